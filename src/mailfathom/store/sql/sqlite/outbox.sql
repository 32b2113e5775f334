-- Named queries for the outbox (SQLite). Values are always bound parameters; `now`
-- always comes from the injected clock. Every stage change is conditional on the stage
-- (and attempt) it starts from, so of two racing writers exactly one wins.
-- Only what differs from common/outbox.sql: each block overrides the common one of
-- its name (`-- dialect-only`: a statement the other dialect does without).

-- name: insert_recipients
-- Every envelope recipient of a new record, in order, from a JSON array of addresses.
INSERT INTO mf_outbox_recipients (email_id, position, address)
SELECT :email_id, key, value FROM json_each(:addresses);

-- name: email_recipients
-- The recipients of every record in the JSON array :ids, in envelope order.
SELECT * FROM mf_outbox_recipients
WHERE email_id IN (SELECT value FROM json_each(:ids))
ORDER BY email_id, position;

-- name: begin_attempt
-- dialect-only
-- A delivery attempt starts (before any SMTP command): only a Recorded record, counted,
-- and not one past its expiry whose body never went out (expire_email refuses that one).
UPDATE mf_outbox SET attempts = attempts + 1, last_attempt_at = :now
WHERE id = :id AND stage = 'Recorded'
  AND (expires_at IS NULL OR expires_at > :now OR body_transmissions > 0)
RETURNING id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
          smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
          body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue;

-- name: start_attempts
-- The delivery jobs a claim has just leased, in the claim's own transaction (no write of
-- their own while delivering): each Recorded record in the JSON array :ids that is not past
-- its expiry with no body out gets its attempt counted, as begin_attempt does, and comes
-- back with its bytes. A record in any other stage is left alone and not returned (its
-- job's handler looks at it: a record found in TransmissionBegun is never attempted).
UPDATE mf_outbox SET attempts = attempts + 1, last_attempt_at = :now
WHERE id IN (SELECT value FROM json_each(:ids)) AND stage = 'Recorded'
  AND (expires_at IS NULL OR expires_at > :now OR body_transmissions > 0)
RETURNING id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
          smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
          body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue,
          message;

-- name: owed_recipients_of
-- dialect-only
-- owed_recipients for every record in the JSON array :ids, in envelope order.
SELECT * FROM mf_outbox_recipients
WHERE email_id IN (SELECT value FROM json_each(:ids)) AND (reply_code IS NULL OR reply_code < 500)
ORDER BY email_id, position;

-- name: unstart_attempts
-- The records whose delivery jobs a worker gave back unstarted after their claim counted
-- their attempt (start_attempts): that count is taken back, in the release's transaction.
-- Only a record still Recorded (a claimed delivery cannot be cancelled or resolved while
-- its lease is live, so it is), and never below zero.
UPDATE mf_outbox SET attempts = attempts - 1
WHERE id IN (SELECT value FROM json_each(:ids)) AND stage = 'Recorded' AND attempts > 0;

-- name: end_attempt
-- dialect-only
-- How an attempt ended, written only if the record is still where the attempt left it.
UPDATE mf_outbox
SET stage = :to_stage,
    finished_at = CASE WHEN :to_stage IN ('Sent', 'Refused', 'Cancelled') THEN :now END,
    transmission_begun_at = CASE WHEN :to_stage = 'Recorded' THEN NULL
                                 ELSE transmission_begun_at END,
    reply_code = :reply_code, reply_text = :reply_text, reason = :reason
WHERE id = :id AND stage = :from_stage AND attempts = :attempt
RETURNING id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
          smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
          body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue;

-- name: split_recipients
-- The parent's recipients at the positions in the JSON array :positions, renumbered.
INSERT INTO mf_outbox_recipients (email_id, position, address)
SELECT :child_id, row_number() OVER (ORDER BY position) - 1, address
FROM mf_outbox_recipients
WHERE email_id = :parent_id AND position IN (SELECT value FROM json_each(:positions));

-- name: message_records
-- Every record of the messages whose roots are in the JSON array :ids: the roots and
-- the records split off them (root_id), oldest first.
SELECT id, stage, idempotency_key, parent_id, job_id, message_id, sender, subject, size,
       smtputf8, eightbit, attempts, last_attempt_at, created_at, transmission_begun_at,
       body_transmissions, compacted_at, finished_at, reply_code, reply_text, reason,
          expires_at, root_id, priority, queue
FROM mf_outbox
WHERE id IN (SELECT value FROM json_each(:ids)) OR root_id IN (SELECT value FROM json_each(:ids))
ORDER BY id;
