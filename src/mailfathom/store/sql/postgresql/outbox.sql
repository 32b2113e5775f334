-- Named queries for the outbox (PostgreSQL). Values are always bound parameters; `now`
-- always comes from the injected clock. Every stage change is conditional on the stage
-- (and attempt) it starts from, so of two racing writers exactly one wins.
-- Only what differs from common/outbox.sql: each block overrides the common one of
-- its name (`-- dialect-only`: a statement the other dialect does without).

-- name: insert_recipients
-- Every envelope recipient of a new record, in order, from a JSON array of addresses.
INSERT INTO mf_outbox_recipients (email_id, position, address)
SELECT :email_id::bigint, ordinality - 1, value
FROM jsonb_array_elements_text(:addresses::jsonb) WITH ORDINALITY;

-- name: email_recipients
-- The recipients of every record in the JSON array :ids, in envelope order.
SELECT * FROM mf_outbox_recipients
WHERE email_id IN (SELECT value::bigint FROM jsonb_array_elements_text(:ids::jsonb))
ORDER BY email_id, position;

-- name: start_attempts
-- Each Recorded record in the array :ids that is not past its expiry with no body out
-- gets its attempt counted and comes back with its bytes and the recipients a new attempt
-- offers (all but those the server refused permanently). A record in any other stage is
-- left alone and not returned: a record found in TransmissionBegun is never attempted
-- again. Run in a claim's own transaction for the delivery jobs it just leased (one
-- commit for the batch), and on its own, committing itself, for one record
-- (begin_attempt: one round trip).
WITH started AS (
UPDATE mf_outbox SET attempts = attempts + 1, last_attempt_at = :now
WHERE id = ANY(:ids::bigint[]) AND stage = 'Recorded'
  AND (expires_at IS NULL OR expires_at > :now OR body_transmissions > 0)
RETURNING id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
          smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
          body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue, message
)
SELECT started.*, owed.*
FROM started CROSS JOIN LATERAL (
    SELECT array_agg(r.position ORDER BY r.position) AS owed_positions,
           array_agg(r.address ORDER BY r.position) AS owed_addresses,
           array_agg(r.reply_code ORDER BY r.position) AS owed_codes,
           array_agg(r.enhanced_status ORDER BY r.position) AS owed_statuses,
           array_agg(r.reply_text ORDER BY r.position) AS owed_texts,
           array_agg(r.replied_at ORDER BY r.position) AS owed_replied
    FROM mf_outbox_recipients AS r
    WHERE r.email_id = started.id AND (r.reply_code IS NULL OR r.reply_code < 500)
) AS owed;

-- name: unstart_attempts
-- The records whose delivery jobs a worker gave back unstarted after their claim counted
-- their attempt (start_attempts): that count is taken back, in the release's transaction.
-- Only a record still Recorded (a claimed delivery cannot be cancelled or resolved while
-- its lease is live, so it is), and never below zero.
UPDATE mf_outbox SET attempts = attempts - 1
WHERE id = ANY(:ids::bigint[]) AND stage = 'Recorded' AND attempts > 0;

-- name: split_recipients
-- The parent's recipients at the positions in the JSON array :positions, renumbered.
INSERT INTO mf_outbox_recipients (email_id, position, address)
SELECT :child_id::bigint, row_number() OVER (ORDER BY position) - 1, address
FROM mf_outbox_recipients
WHERE email_id = :parent_id AND position IN (
    SELECT value::integer FROM jsonb_array_elements_text(:positions::jsonb));

-- name: message_records
-- Every record of the messages whose roots are in the JSON array :ids: the roots and
-- the records split off them (root_id), oldest first.
SELECT id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
       smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
       body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue
FROM mf_outbox
WHERE id IN (SELECT value::bigint FROM jsonb_array_elements_text(:ids::jsonb)) OR root_id IN (SELECT value::bigint FROM jsonb_array_elements_text(:ids::jsonb))
ORDER BY id;

-- name: record_email
-- dialect-only
-- The whole record in one statement (one round trip, and one commit when it runs on its
-- own): the email, its recipients and its delivery job. Both ids are drawn first so each
-- row can point at the other; foreign keys are checked at the end of the statement, when
-- all three exist. Returns the email with its recipients as a JSON array, or nothing when
-- the idempotency key exists (then nothing is inserted). The job carries its limit key
-- (the recipient domain, for per-domain throttling).
WITH ids AS MATERIALIZED (
    SELECT nextval('mf_outbox_id_seq') AS email_id, nextval('mf_jobs_id_seq') AS job_id
), email AS (
    INSERT INTO mf_outbox (id, stage, idempotency_key, message_id, sender, subject, message,
                           size, smtputf8, eightbit, created_at, job_id, expires_at,
                           priority, queue)
    OVERRIDING SYSTEM VALUE
    SELECT email_id, 'Recorded', :idempotency_key, :message_id, :sender, :subject,
           :message, :size, :smtputf8, :eightbit, :now, job_id,
           :expires_at::timestamptz, :priority, :queue
    FROM ids
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
              smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
              body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue
), job AS (
    INSERT INTO mf_jobs (id, kind, queue, payload, priority, state, available_at,
                         max_attempts, created_at, trace_context, limit_key)
    OVERRIDING SYSTEM VALUE
    SELECT email.job_id, :kind, :queue, jsonb_build_object('email_id', email.id),
           :priority, 'Pending', :available_at::timestamptz, :max_attempts, :now,
           :trace_context, :limit_key
    FROM email
    RETURNING id
), recipients AS (
    INSERT INTO mf_outbox_recipients (email_id, position, address)
    SELECT email.id, ordinality - 1, value
    FROM email CROSS JOIN jsonb_array_elements_text(:addresses::jsonb) WITH ORDINALITY
    RETURNING *
)
SELECT email.*,
       (SELECT jsonb_agg(to_jsonb(r) ORDER BY r.position) FROM recipients AS r) AS recipients,
       (SELECT count(*) FROM job) AS jobs
FROM email;

-- name: record_emails
-- dialect-only
-- A batch of records without idempotency keys in one statement (one executor start-up,
-- one firing of each statement trigger, one NOTIFY for the batch): the emails, their
-- recipients and their delivery jobs. The frozen bytes come as one bytea array sent in
-- binary; the rest of each email as one JSON array of objects (:emails), zipped with it
-- by position. Both ids of each email are drawn first, in input order, so each row can
-- point at the other; foreign keys are checked at the end of the statement, when every
-- row exists. Nothing can conflict (no key): one row per email comes back, in input
-- order, with its recipients as a JSON array, and how many jobs went in.
WITH input AS MATERIALIZED (
    SELECT nextval('mf_outbox_id_seq') AS email_id, nextval('mf_jobs_id_seq') AS job_id, t.*
    FROM ROWS FROM (
        unnest(%(messages)b::bytea[]),
        json_to_recordset(:emails::json) AS (message_id text, sender text, subject text,
            size bigint, smtputf8 boolean, eightbit boolean, addresses jsonb,
            expires_at timestamptz, available_at timestamptz, priority integer,
            limit_key text)
    ) WITH ORDINALITY AS t (message, message_id, sender, subject, size, smtputf8, eightbit,
                            addresses, expires_at, available_at, priority, limit_key,
                            position)
    ORDER BY t.position
), email AS (
    INSERT INTO mf_outbox (id, stage, idempotency_key, message_id, sender, subject, message,
                           size, smtputf8, eightbit, created_at, job_id, expires_at,
                           priority, queue)
    OVERRIDING SYSTEM VALUE
    SELECT email_id, 'Recorded', NULL, message_id, sender, subject, message, size, smtputf8,
           eightbit, :now, job_id, expires_at, priority, :queue
    FROM input
    RETURNING id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
              smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
              body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue
), job AS (
    INSERT INTO mf_jobs (id, kind, queue, payload, priority, state, available_at,
                         max_attempts, created_at, trace_context, limit_key)
    OVERRIDING SYSTEM VALUE
    SELECT job_id, :kind, :queue, jsonb_build_object('email_id', email_id), priority,
           'Pending', available_at, :max_attempts, :now, :trace_context, limit_key
    FROM input
    RETURNING id
), recipients AS (
    INSERT INTO mf_outbox_recipients (email_id, position, address)
    SELECT input.email_id, r.ordinality - 1, r.value
    FROM input CROSS JOIN jsonb_array_elements_text(input.addresses) WITH ORDINALITY AS r
    RETURNING *
), listed AS (
    SELECT r.email_id, jsonb_agg(to_jsonb(r) ORDER BY r.position) AS recipients
    FROM recipients AS r GROUP BY r.email_id
)
SELECT email.*, listed.recipients, (SELECT count(*) FROM job) AS jobs
FROM email LEFT JOIN listed ON listed.email_id = email.id
ORDER BY email.id;

-- name: record_emails_keyed
-- dialect-only
-- A batch of records some of which have idempotency keys (each key at most once in the
-- batch), in one statement: as record_emails, with each email's key in :emails. Keyless
-- emails are plain inserts; keyed ones are inserted in key order (so concurrent batches
-- sharing keys wait for each other instead of deadlocking), and a key that exists
-- inserts nothing: no record, recipients nor job for it. One row per email inserted,
-- with its 1-based input position, in input order; how many jobs went in.
WITH input AS MATERIALIZED (
    SELECT nextval('mf_outbox_id_seq') AS email_id, nextval('mf_jobs_id_seq') AS job_id, t.*
    FROM ROWS FROM (
        unnest(%(messages)b::bytea[]),
        json_to_recordset(:emails::json) AS (idempotency_key text, message_id text,
            sender text, subject text, size bigint, smtputf8 boolean, eightbit boolean,
            addresses jsonb, expires_at timestamptz, available_at timestamptz,
            priority integer, limit_key text)
    ) WITH ORDINALITY AS t (message, idempotency_key, message_id, sender, subject, size,
                            smtputf8, eightbit, addresses, expires_at, available_at,
                            priority, limit_key, position)
    ORDER BY t.position
), keyless AS (
    INSERT INTO mf_outbox (id, stage, idempotency_key, message_id, sender, subject, message,
                           size, smtputf8, eightbit, created_at, job_id, expires_at,
                           priority, queue)
    OVERRIDING SYSTEM VALUE
    SELECT email_id, 'Recorded', NULL, message_id, sender, subject, message, size, smtputf8,
           eightbit, :now, job_id, expires_at, priority, :queue
    FROM input
    WHERE idempotency_key IS NULL
    RETURNING id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
              smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
              body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue
), keyed AS (
    INSERT INTO mf_outbox (id, stage, idempotency_key, message_id, sender, subject, message,
                           size, smtputf8, eightbit, created_at, job_id, expires_at,
                           priority, queue)
    OVERRIDING SYSTEM VALUE
    SELECT email_id, 'Recorded', idempotency_key, message_id, sender, subject, message, size,
           smtputf8, eightbit, :now, job_id, expires_at, priority, :queue
    FROM input
    WHERE idempotency_key IS NOT NULL
    ORDER BY idempotency_key
    ON CONFLICT (idempotency_key) DO NOTHING RETURNING id, stage, idempotency_key, parent_id,
              job_id, message_id, sender, subject, size,
              smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
              body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue
), email AS (
    SELECT * FROM keyless UNION ALL SELECT * FROM keyed
), job AS (
    INSERT INTO mf_jobs (id, kind, queue, payload, priority, state, available_at,
                         max_attempts, created_at, trace_context, limit_key)
    OVERRIDING SYSTEM VALUE
    SELECT input.job_id, :kind, :queue, jsonb_build_object('email_id', input.email_id),
           input.priority, 'Pending', input.available_at, :max_attempts, :now,
           :trace_context, input.limit_key
    FROM input JOIN email ON email.id = input.email_id
    RETURNING id
), recipients AS (
    INSERT INTO mf_outbox_recipients (email_id, position, address)
    SELECT input.email_id, r.ordinality - 1, r.value
    FROM input JOIN email ON email.id = input.email_id
         CROSS JOIN jsonb_array_elements_text(input.addresses) WITH ORDINALITY AS r
    RETURNING *
), listed AS (
    SELECT r.email_id, jsonb_agg(to_jsonb(r) ORDER BY r.position) AS recipients
    FROM recipients AS r GROUP BY r.email_id
)
SELECT input.position, email.*, listed.recipients, (SELECT count(*) FROM job) AS jobs
FROM email JOIN input ON input.email_id = email.id
     LEFT JOIN listed ON listed.email_id = email.id
ORDER BY input.position;

-- name: end_attempt_whole
-- dialect-only
-- How an attempt ended, written only if the record is still where the attempt left it,
-- with every recipient's reply (arrays by position), in one statement: nothing of it is
-- written when the record moved on.
WITH ended AS (
UPDATE mf_outbox
SET stage = :to_stage::text,
    finished_at = CASE WHEN :to_stage::text IN ('Sent', 'Refused', 'Cancelled') THEN :now END,
    transmission_begun_at = CASE WHEN :to_stage::text = 'Recorded' THEN NULL
                                 ELSE transmission_begun_at END,
    reply_code = :reply_code::integer, reply_text = :reply_text, reason = :reason
WHERE id = :id AND stage = :from_stage AND attempts = :attempt
RETURNING id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
          smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
          body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue
), replies AS (
    UPDATE mf_outbox_recipients AS r
    SET reply_code = x.reply_code, enhanced_status = x.enhanced_status,
        reply_text = x.reply_text, replied_at = x.replied_at
    FROM ended, unnest(:positions::integer[], :codes::integer[], :statuses::text[],
                       :texts::text[], :replied::timestamptz[])
         AS x(position, reply_code, enhanced_status, reply_text, replied_at)
    WHERE r.email_id = ended.id AND r.position = x.position
    RETURNING 1
)
SELECT ended.* FROM ended;
