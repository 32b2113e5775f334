-- Named queries for the outbox (PostgreSQL). Values are always bound parameters; `now`
-- always comes from the injected clock. Every stage change is conditional on the stage
-- (and attempt) it starts from, so of two racing writers exactly one wins.

-- name: insert_email
-- Records a frozen message unless its idempotency key exists; returns nothing when it does.
INSERT INTO mf_outbox (stage, idempotency_key, message_id, sender, subject, message, size,
                       smtputf8, eightbit, created_at, expires_at, priority, queue)
VALUES ('Recorded', %(idempotency_key)s, %(message_id)s, %(sender)s, %(subject)s, %(message)s, %(size)s,
        %(smtputf8)s, %(eightbit)s, %(now)s, %(expires_at)s, %(priority)s, %(queue)s)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
          smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
          body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue;

-- name: record_email
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
    SELECT email_id, 'Recorded', %(idempotency_key)s, %(message_id)s, %(sender)s, %(subject)s,
           %(message)s, %(size)s, %(smtputf8)s, %(eightbit)s, %(now)s, job_id,
           %(expires_at)s::timestamptz, %(priority)s, %(queue)s
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
    SELECT email.job_id, %(kind)s, %(queue)s, jsonb_build_object('email_id', email.id),
           %(priority)s, 'Pending', %(available_at)s::timestamptz, %(max_attempts)s, %(now)s,
           %(trace_context)s, %(limit_key)s
    FROM email
    RETURNING id
), recipients AS (
    INSERT INTO mf_outbox_recipients (email_id, position, address)
    SELECT email.id, ordinality - 1, value
    FROM email CROSS JOIN jsonb_array_elements_text(%(addresses)s::jsonb) WITH ORDINALITY
    RETURNING *
)
SELECT email.*,
       (SELECT jsonb_agg(to_jsonb(r) ORDER BY r.position) FROM recipients AS r) AS recipients,
       (SELECT count(*) FROM job) AS jobs
FROM email;

-- name: email_by_key
SELECT id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
       smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
       body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue
FROM mf_outbox WHERE idempotency_key = %(idempotency_key)s;

-- name: insert_recipients
-- Every envelope recipient of a new record, in order, from a JSON array of addresses.
INSERT INTO mf_outbox_recipients (email_id, position, address)
SELECT %(email_id)s::bigint, ordinality - 1, value
FROM jsonb_array_elements_text(%(addresses)s::jsonb) WITH ORDINALITY;

-- name: set_email_job
UPDATE mf_outbox SET job_id = %(job_id)s WHERE id = %(id)s
RETURNING id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
          smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
          body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue;

-- name: get_email
SELECT id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
       smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
       body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue
FROM mf_outbox WHERE id = %(id)s;

-- name: email_message
SELECT message FROM mf_outbox WHERE id = %(id)s;

-- name: email_recipients
-- The recipients of every record in the JSON array %(ids)s, in envelope order.
SELECT * FROM mf_outbox_recipients
WHERE email_id IN (SELECT value::bigint FROM jsonb_array_elements_text(%(ids)s::jsonb))
ORDER BY email_id, position;

-- name: owed_recipients
-- The recipients a new attempt offers: all but those the server refused permanently.
SELECT * FROM mf_outbox_recipients
WHERE email_id = %(id)s AND (reply_code IS NULL OR reply_code < 500)
ORDER BY position;

-- name: list_emails
-- Messages newest first (each message's root record: its parts are message_records),
-- keyset-paginated by id; with a stage, the messages that have a record in that stage.
SELECT id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
       smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
       body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue
FROM mf_outbox AS m
WHERE m.root_id IS NULL
  AND (%(stage)s::text IS NULL OR m.stage = %(stage)s::text
       OR EXISTS (SELECT 1 FROM mf_outbox AS p WHERE p.root_id = m.id AND p.stage = %(stage)s::text))
  AND (%(before_id)s::bigint IS NULL OR m.id < %(before_id)s::bigint)
ORDER BY m.id DESC
LIMIT %(limit)s;

-- name: unknown_emails
-- Unknown outcomes: TransmissionBegun, and no worker holds a live lease on the delivery.
-- Oldest first, keyset-paginated by id (after_id).
SELECT id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
       smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
       body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue
FROM mf_outbox AS o
WHERE o.stage = 'TransmissionBegun'
  AND NOT EXISTS (SELECT 1 FROM mf_jobs AS j WHERE j.id = o.job_id AND j.state = 'Claimed'
                  AND j.lease_expires_at > %(lease_cutoff)s)
  AND (%(after_id)s::bigint IS NULL OR o.id > %(after_id)s::bigint)
ORDER BY o.id
LIMIT %(limit)s;

-- name: count_unknown_emails
-- How many unknown outcomes there are, exactly (the same condition as unknown_emails).
SELECT count(*) AS n
FROM mf_outbox AS o
WHERE o.stage = 'TransmissionBegun'
  AND NOT EXISTS (SELECT 1 FROM mf_jobs AS j WHERE j.id = o.job_id AND j.state = 'Claimed'
                  AND j.lease_expires_at > %(lease_cutoff)s);

-- name: count_emails
SELECT stage, count(*) AS n FROM mf_outbox GROUP BY stage;

-- name: delivery_in_progress
-- Whether a worker holds a live lease on the record's delivery job.
SELECT 1 AS live FROM mf_outbox AS o JOIN mf_jobs AS j ON j.id = o.job_id
WHERE o.id = %(id)s AND j.state = 'Claimed' AND j.lease_expires_at > %(lease_cutoff)s;

-- name: start_attempts
-- Each Recorded record in the array %(ids)s that is not past its expiry with no body out
-- gets its attempt counted and comes back with its bytes and the recipients a new attempt
-- offers (all but those the server refused permanently). A record in any other stage is
-- left alone and not returned: a record found in TransmissionBegun is never attempted
-- again. Run in a claim's own transaction for the delivery jobs it just leased (one
-- commit for the batch), and on its own, committing itself, for one record
-- (begin_attempt: one round trip).
WITH started AS (
UPDATE mf_outbox SET attempts = attempts + 1, last_attempt_at = %(now)s
WHERE id = ANY(%(ids)s::bigint[]) AND stage = 'Recorded'
  AND (expires_at IS NULL OR expires_at > %(now)s OR body_transmissions > 0)
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
WHERE id = ANY(%(ids)s::bigint[]) AND stage = 'Recorded' AND attempts > 0;

-- name: take_back_attempt
-- A delivery attempt that stopped on an SMTP configuration error (a refused password, no
-- STARTTLS for the credentials, "authentication required") is uncounted: the record
-- stays Recorded with the count it had, if nothing moved it since the attempt began,
-- and its reason says why it waits.
UPDATE mf_outbox SET attempts = attempts - 1, reason = %(reason)s
WHERE id = %(id)s AND stage = 'Recorded' AND attempts = %(attempt)s AND attempts > 0
RETURNING id;

-- name: mark_transmission_begun
-- After the 354, before the body: only if nothing (cancel, newer attempt) moved it meanwhile.
-- Counts one more body that may go out (never reset: Cancelled needs a count of 0).
-- Never once the record is past its expiry with no body out: no body starts after
-- expires_at (the delivery then refuses the record as expired).
UPDATE mf_outbox
SET stage = 'TransmissionBegun', transmission_begun_at = %(now)s,
    body_transmissions = body_transmissions + 1
WHERE id = %(id)s AND stage = 'Recorded' AND attempts = %(attempt)s
  AND (expires_at IS NULL OR expires_at > %(now)s OR body_transmissions > 0)
RETURNING id;

-- name: end_attempt_whole
-- How an attempt ended, written only if the record is still where the attempt left it,
-- with every recipient's reply (arrays by position), in one statement: nothing of it is
-- written when the record moved on.
WITH ended AS (
UPDATE mf_outbox
SET stage = %(to_stage)s::text,
    finished_at = CASE WHEN %(to_stage)s::text IN ('Sent', 'Refused', 'Cancelled') THEN %(now)s END,
    transmission_begun_at = CASE WHEN %(to_stage)s::text = 'Recorded' THEN NULL
                                 ELSE transmission_begun_at END,
    reply_code = %(reply_code)s::integer, reply_text = %(reply_text)s, reason = %(reason)s
WHERE id = %(id)s AND stage = %(from_stage)s AND attempts = %(attempt)s
RETURNING id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
          smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
          body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue
), replies AS (
    UPDATE mf_outbox_recipients AS r
    SET reply_code = x.reply_code, enhanced_status = x.enhanced_status,
        reply_text = x.reply_text, replied_at = x.replied_at
    FROM ended, unnest(%(positions)s::integer[], %(codes)s::integer[], %(statuses)s::text[],
                       %(texts)s::text[], %(replied)s::timestamptz[])
         AS x(position, reply_code, enhanced_status, reply_text, replied_at)
    WHERE r.email_id = ended.id AND r.position = x.position
    RETURNING 1
)
SELECT ended.* FROM ended;

-- name: set_recipient_reply
UPDATE mf_outbox_recipients
SET reply_code = %(reply_code)s, enhanced_status = %(enhanced_status)s, reply_text = %(reply_text)s,
    replied_at = %(replied_at)s
WHERE email_id = %(email_id)s AND position = %(position)s;

-- name: split_email
-- A new Recorded record with the same bytes and Message-ID, linked to its parent and part of
-- the same message (root_id), with what the message was recorded with: its priority, queue
-- and (unless keep_expiry is false: an operator recorded it again) its expiry.
INSERT INTO mf_outbox (stage, parent_id, root_id, message_id, sender, subject, message, size,
                       smtputf8, eightbit, created_at, expires_at, priority, queue)
SELECT 'Recorded', id, coalesce(root_id, id), message_id, sender, subject, message, size,
       smtputf8, eightbit, %(now)s, CASE WHEN %(keep_expiry)s THEN expires_at END, priority, queue
FROM mf_outbox WHERE id = %(parent_id)s
RETURNING id;

-- name: record_domain_part
-- At record time, one more record for a message's recipients at another domain (per-domain
-- throttling): the same bytes, Message-ID, expiry, priority and queue, linked to the first domain's
-- record, which is the message's root.
INSERT INTO mf_outbox (stage, parent_id, root_id, message_id, sender, subject, message, size,
                       smtputf8, eightbit, created_at, expires_at, priority, queue)
SELECT 'Recorded', id, id, message_id, sender, subject, message, size, smtputf8, eightbit,
       %(now)s, expires_at, priority, queue
FROM mf_outbox WHERE id = %(parent_id)s
RETURNING id;

-- name: split_recipients
-- The parent's recipients at the positions in the JSON array %(positions)s, renumbered.
INSERT INTO mf_outbox_recipients (email_id, position, address)
SELECT %(child_id)s::bigint, row_number() OVER (ORDER BY position) - 1, address
FROM mf_outbox_recipients
WHERE email_id = %(parent_id)s AND position IN (
    SELECT value::integer FROM jsonb_array_elements_text(%(positions)s::jsonb));

-- name: cancel_email
-- Operator: Recorded → Cancelled, unless a worker holds a live lease on the delivery, and
-- only if no body ever went out for the record (after one, the way out is give_up).
UPDATE mf_outbox SET stage = 'Cancelled', finished_at = %(now)s, reason = %(reason)s
WHERE id = %(id)s AND stage = 'Recorded' AND body_transmissions = 0
  AND NOT EXISTS (SELECT 1 FROM mf_jobs AS j WHERE j.id = mf_outbox.job_id
                  AND j.state = 'Claimed' AND j.lease_expires_at > %(lease_cutoff)s)
RETURNING id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
          smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
          body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue;

-- name: resolve_email
-- Operator: settle an unknown outcome (TransmissionBegun, no live delivery lease), or give up
-- on a Recorded record whose body already went out (it can no longer be Cancelled).
UPDATE mf_outbox
SET stage = %(to_stage)s::text,
    finished_at = CASE WHEN %(to_stage)s::text IN ('Sent', 'Refused') THEN %(now)s END,
    transmission_begun_at = CASE WHEN %(to_stage)s::text = 'Recorded' THEN NULL
                                 ELSE transmission_begun_at END,
    reason = %(reason)s
WHERE id = %(id)s
  AND (stage = 'TransmissionBegun'
       OR (stage = 'Recorded' AND body_transmissions > 0 AND %(to_stage)s::text = 'Refused'))
  AND NOT EXISTS (SELECT 1 FROM mf_jobs AS j WHERE j.id = mf_outbox.job_id
                  AND j.state = 'Claimed' AND j.lease_expires_at > %(lease_cutoff)s)
RETURNING id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
          smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
          body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue;

-- name: insert_outbox_event
INSERT INTO mf_outbox_events (email_id, at, actor, action, from_stage, to_stage, reason)
VALUES (%(email_id)s, %(at)s, %(actor)s, %(action)s, %(from_stage)s, %(to_stage)s, %(reason)s);

-- name: outbox_events
SELECT * FROM mf_outbox_events WHERE email_id = %(id)s ORDER BY id;

-- name: recent_outbox_events
-- Every record's operator actions, newest first, keyset-paginated by id (the console's audit log).
SELECT * FROM mf_outbox_events
WHERE (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
ORDER BY id DESC
LIMIT %(limit)s;

-- name: expire_email
-- A Recorded record past its expires_at whose body never went out is Refused ("expired").
-- A record with a body transmission on its count is never expired: it may have arrived.
UPDATE mf_outbox SET stage = 'Refused', finished_at = %(now)s, reason = 'expired'
WHERE id = %(id)s AND stage = 'Recorded' AND expires_at IS NOT NULL AND expires_at <= %(now)s
  AND body_transmissions = 0
RETURNING id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
          smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
          body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue;

-- name: message_records
-- Every record of the messages whose roots are in the JSON array %(ids)s: the roots and
-- the records split off them (root_id), oldest first.
SELECT id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
       smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
       body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue
FROM mf_outbox
WHERE id IN (SELECT value::bigint FROM jsonb_array_elements_text(%(ids)s::jsonb)) OR root_id IN (SELECT value::bigint FROM jsonb_array_elements_text(%(ids)s::jsonb))
ORDER BY id;
