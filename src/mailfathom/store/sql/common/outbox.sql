-- Named queries for the outbox. Values are always bound parameters; `now`
-- always comes from the injected clock. Every stage change is conditional on the stage
-- (and attempt) it starts from, so of two racing writers exactly one wins.
-- Written once with :name parameters (translated to the driver's style when loaded);
-- a `-- per-dialect` block has no body here: each dialect's file defines it.

-- name: insert_email
-- Records a frozen message unless its idempotency key exists; returns nothing when it does.
INSERT INTO mf_outbox (stage, idempotency_key, message_id, sender, subject, message, size,
                       smtputf8, eightbit, created_at, expires_at, priority, queue)
VALUES ('Recorded', :idempotency_key, :message_id, :sender, :subject, :message, :size,
        :smtputf8, :eightbit, :now, :expires_at, :priority, :queue)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
          smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
          body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue;

-- name: email_by_key
SELECT id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
       smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
       body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue
FROM mf_outbox WHERE idempotency_key = :idempotency_key;

-- name: insert_recipients
-- per-dialect

-- name: set_email_job
UPDATE mf_outbox SET job_id = :job_id WHERE id = :id
RETURNING id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
          smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
          body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue;

-- name: get_email
SELECT id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
       smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
       body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue
FROM mf_outbox WHERE id = :id;

-- name: email_message
SELECT message FROM mf_outbox WHERE id = :id;

-- name: email_recipients
-- per-dialect

-- name: owed_recipients
-- The recipients a new attempt offers: all but those the server refused permanently.
SELECT * FROM mf_outbox_recipients
WHERE email_id = :id AND (reply_code IS NULL OR reply_code < 500)
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
  AND (CAST(:stage AS text) IS NULL OR m.stage = CAST(:stage AS text)
       OR EXISTS (SELECT 1 FROM mf_outbox AS p WHERE p.root_id = m.id AND p.stage = CAST(:stage AS text)))
  AND (CAST(:before_id AS bigint) IS NULL OR m.id < CAST(:before_id AS bigint))
ORDER BY m.id DESC
LIMIT :limit;

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
                  AND j.lease_expires_at > :lease_cutoff)
  AND (CAST(:after_id AS bigint) IS NULL OR o.id > CAST(:after_id AS bigint))
ORDER BY o.id
LIMIT :limit;

-- name: count_unknown_emails
-- How many unknown outcomes there are, exactly (the same condition as unknown_emails).
SELECT count(*) AS n
FROM mf_outbox AS o
WHERE o.stage = 'TransmissionBegun'
  AND NOT EXISTS (SELECT 1 FROM mf_jobs AS j WHERE j.id = o.job_id AND j.state = 'Claimed'
                  AND j.lease_expires_at > :lease_cutoff);

-- name: count_emails
SELECT stage, count(*) AS n FROM mf_outbox GROUP BY stage;

-- name: delivery_in_progress
-- Whether a worker holds a live lease on the record's delivery job.
SELECT 1 AS live FROM mf_outbox AS o JOIN mf_jobs AS j ON j.id = o.job_id
WHERE o.id = :id AND j.state = 'Claimed' AND j.lease_expires_at > :lease_cutoff;

-- name: start_attempts
-- per-dialect

-- name: unstart_attempts
-- per-dialect

-- name: take_back_attempt
-- A delivery attempt that stopped on a configuration error (SMTP: a refused password, no
-- STARTTLS for the credentials, "authentication required"; a provider's 401 or 403) is
-- uncounted: the record
-- stays Recorded with the count it had, if nothing moved it since the attempt began,
-- and its reason says why it waits.
UPDATE mf_outbox SET attempts = attempts - 1, reason = :reason
WHERE id = :id AND stage = 'Recorded' AND attempts = :attempt AND attempts > 0
RETURNING id;

-- name: mark_transmission_begun
-- After the 354, before the body: only if nothing (cancel, newer attempt) moved it meanwhile.
-- Counts one more body that may go out (never reset: Cancelled needs a count of 0).
-- Never once the record is past its expiry with no body out: no body starts after
-- expires_at (the delivery then refuses the record as expired).
UPDATE mf_outbox
SET stage = 'TransmissionBegun', transmission_begun_at = :now,
    body_transmissions = body_transmissions + 1
WHERE id = :id AND stage = 'Recorded' AND attempts = :attempt
  AND (expires_at IS NULL OR expires_at > :now OR body_transmissions > 0)
RETURNING id;

-- name: set_recipient_reply
UPDATE mf_outbox_recipients
SET reply_code = :reply_code, enhanced_status = :enhanced_status, reply_text = :reply_text,
    replied_at = :replied_at
WHERE email_id = :email_id AND position = :position;

-- name: split_email
-- A new Recorded record with the same bytes and Message-ID, linked to its parent and part of
-- the same message (root_id), with what the message was recorded with: its priority, queue
-- and (unless keep_expiry is false: an operator recorded it again) its expiry.
INSERT INTO mf_outbox (stage, parent_id, root_id, message_id, sender, subject, message, size,
                       smtputf8, eightbit, created_at, expires_at, priority, queue)
SELECT 'Recorded', id, coalesce(root_id, id), message_id, sender, subject, message, size,
       smtputf8, eightbit, :now, CASE WHEN :keep_expiry THEN expires_at END, priority, queue
FROM mf_outbox WHERE id = :parent_id
RETURNING id;

-- name: record_domain_part
-- At record time, one more record for a message's recipients at another domain (per-domain
-- throttling): the same bytes, Message-ID, expiry, priority and queue, linked to the first domain's
-- record, which is the message's root.
INSERT INTO mf_outbox (stage, parent_id, root_id, message_id, sender, subject, message, size,
                       smtputf8, eightbit, created_at, expires_at, priority, queue)
SELECT 'Recorded', id, id, message_id, sender, subject, message, size, smtputf8, eightbit,
       :now, expires_at, priority, queue
FROM mf_outbox WHERE id = :parent_id
RETURNING id;

-- name: split_recipients
-- per-dialect

-- name: cancel_email
-- Operator: Recorded → Cancelled, unless a worker holds a live lease on the delivery, and
-- only if no body ever went out for the record (after one, the way out is give_up).
UPDATE mf_outbox SET stage = 'Cancelled', finished_at = :now, reason = :reason
WHERE id = :id AND stage = 'Recorded' AND body_transmissions = 0
  AND NOT EXISTS (SELECT 1 FROM mf_jobs AS j WHERE j.id = mf_outbox.job_id
                  AND j.state = 'Claimed' AND j.lease_expires_at > :lease_cutoff)
RETURNING id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
          smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
          body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue;

-- name: resolve_email
-- Operator: settle an unknown outcome (TransmissionBegun, no live delivery lease), or give up
-- on a Recorded record whose body already went out (it can no longer be Cancelled).
UPDATE mf_outbox
SET stage = CAST(:to_stage AS text),
    finished_at = CASE WHEN CAST(:to_stage AS text) IN ('Sent', 'Refused') THEN :now END,
    transmission_begun_at = CASE WHEN CAST(:to_stage AS text) = 'Recorded' THEN NULL
                                 ELSE transmission_begun_at END,
    reason = :reason
WHERE id = :id
  AND (stage = 'TransmissionBegun'
       OR (stage = 'Recorded' AND body_transmissions > 0 AND CAST(:to_stage AS text) = 'Refused'))
  AND NOT EXISTS (SELECT 1 FROM mf_jobs AS j WHERE j.id = mf_outbox.job_id
                  AND j.state = 'Claimed' AND j.lease_expires_at > :lease_cutoff)
RETURNING id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
          smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
          body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue;

-- name: insert_outbox_event
INSERT INTO mf_outbox_events (email_id, at, actor, action, from_stage, to_stage, reason)
VALUES (:email_id, :at, :actor, :action, :from_stage, :to_stage, :reason);

-- name: outbox_events
SELECT * FROM mf_outbox_events WHERE email_id = :id ORDER BY id;

-- name: recent_outbox_events
-- Every record's operator actions, newest first, keyset-paginated by id (the console's audit log).
SELECT * FROM mf_outbox_events
WHERE (CAST(:before_id AS bigint) IS NULL OR id < CAST(:before_id AS bigint))
ORDER BY id DESC
LIMIT :limit;

-- name: expire_email
-- A Recorded record past its expires_at whose body never went out is Refused ("expired").
-- A record with a body transmission on its count is never expired: it may have arrived.
UPDATE mf_outbox SET stage = 'Refused', finished_at = :now, reason = 'expired'
WHERE id = :id AND stage = 'Recorded' AND expires_at IS NOT NULL AND expires_at <= :now
  AND body_transmissions = 0
RETURNING id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
          smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
          body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue;

-- name: message_records
-- per-dialect
