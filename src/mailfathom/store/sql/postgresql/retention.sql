-- Named queries for retention (PostgreSQL). Values are bound; `now` and every cutoff come
-- from the injected clock. Each batch is one short transaction of at most :limit rows.
-- The job filter, shared by every job block: terminal rows of :state not yet compacted,
-- finished before :cutoff, of :kind (NULL: any kind not in the JSON array
-- :except_kinds), and with a key or not as :only says ('all', 'keyless', 'keyed').
-- Only what differs from common/retention.sql: each block overrides the common one of
-- its name (`-- dialect-only`: a statement the other dialect does without).

-- name: finish_pruner
-- Gives the lease back and keeps what the pass did, for the console.
UPDATE mf_pruner
SET holder = NULL, lease_until = NULL, last_finished_at = :now, last_report = :report::jsonb
WHERE id = 1 AND holder = :holder
RETURNING id;

-- name: claims_waiting
-- Whether a due job waits to be claimed (queues that are paused aside): the pruner then
-- keeps to its busy duty cycle.
SELECT EXISTS (
    SELECT 1 FROM mf_jobs
    WHERE state = 'Pending' AND available_at IS NOT NULL AND available_at <= :now
      AND queue NOT IN (SELECT queue FROM mf_paused_queues)
) AS waiting;

-- name: count_prunable_jobs
SELECT count(*) AS n FROM mf_jobs
WHERE state = :state AND compacted_at IS NULL AND finished_at IS NOT NULL
  AND finished_at < :cutoff
  AND (CASE WHEN :kind::text IS NULL THEN kind NOT IN (SELECT jsonb_array_elements_text(:except_kinds::jsonb))
            ELSE kind = :kind END)
  AND (:only::text = 'all' OR (:only::text = 'keyless') = (idempotency_key IS NULL));

-- name: compact_jobs
-- Empties the payload and the result of up to :limit rows and stamps them compacted;
-- returns their ids.
UPDATE mf_jobs SET payload = '{}', result = NULL, compacted_at = :now
WHERE id IN (
    SELECT id FROM mf_jobs
    WHERE state = :state AND compacted_at IS NULL AND finished_at IS NOT NULL
      AND finished_at < :cutoff
      AND (CASE WHEN :kind::text IS NULL THEN kind NOT IN (SELECT jsonb_array_elements_text(:except_kinds::jsonb))
                ELSE kind = :kind END)
      AND (:only::text = 'all' OR (:only::text = 'keyless') = (idempotency_key IS NULL))
    ORDER BY finished_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
RETURNING id;

-- name: compact_attempts
-- The compacted jobs' attempts keep one summary line each: outcome, class, error type and
-- the first line of the message (at most 200 characters); the traceback goes.
UPDATE mf_job_attempts
SET traceback = NULL,
    message = left(split_part(message, E'\n', 1), 200)
WHERE job_id IN (SELECT (jsonb_array_elements_text(:ids::jsonb))::bigint)
  AND (traceback IS NOT NULL OR length(message) > 200 OR strpos(message, E'\n') > 0);

-- name: delete_jobs
-- Opt-in only: deletes up to :limit keyless rows (their attempts and events go with them).
DELETE FROM mf_jobs
WHERE id IN (
    SELECT id FROM mf_jobs
    WHERE state = :state AND compacted_at IS NULL AND finished_at IS NOT NULL
      AND finished_at < :cutoff AND idempotency_key IS NULL
      AND (CASE WHEN :kind::text IS NULL THEN kind NOT IN (SELECT jsonb_array_elements_text(:except_kinds::jsonb))
                ELSE kind = :kind END)
    ORDER BY finished_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
RETURNING id;

-- name: count_prunable_emails
SELECT count(*) AS n FROM mf_outbox AS o
WHERE o.stage = :stage AND o.compacted_at IS NULL AND o.finished_at IS NOT NULL
  AND o.finished_at < :cutoff
  AND (:only::text = 'all'
       OR (:only::text = 'keyed' AND (o.idempotency_key IS NOT NULL
                                OR EXISTS (SELECT 1 FROM mf_outbox AS c WHERE c.parent_id = o.id)))
       OR (:only::text = 'keyless' AND o.idempotency_key IS NULL
           AND NOT EXISTS (SELECT 1 FROM mf_outbox AS c WHERE c.parent_id = o.id)));

-- name: compact_emails
-- Empties the bytes (and the subject, which is content) of up to :limit final records;
-- envelope, Message-ID, stage, recipients' replies and failure stay.
UPDATE mf_outbox SET message = '\x'::bytea, size = 0, subject = NULL, compacted_at = :now
WHERE id IN (
    SELECT o.id FROM mf_outbox AS o
    WHERE o.stage = :stage AND o.compacted_at IS NULL AND o.finished_at IS NOT NULL
      AND o.finished_at < :cutoff
      AND (:only::text = 'all'
           OR (:only::text = 'keyed' AND (o.idempotency_key IS NOT NULL
                                    OR EXISTS (SELECT 1 FROM mf_outbox AS c
                                               WHERE c.parent_id = o.id))))
    ORDER BY o.finished_at
    LIMIT :limit
    FOR UPDATE OF o SKIP LOCKED
)
RETURNING id;

-- name: delete_emails
-- Opt-in only: deletes up to :limit keyless records no split record points at.
DELETE FROM mf_outbox
WHERE id IN (
    SELECT o.id FROM mf_outbox AS o
    WHERE o.stage = :stage AND o.compacted_at IS NULL AND o.finished_at IS NOT NULL
      AND o.finished_at < :cutoff AND o.idempotency_key IS NULL
      AND NOT EXISTS (SELECT 1 FROM mf_outbox AS c WHERE c.parent_id = o.id)
    ORDER BY o.finished_at
    LIMIT :limit
    FOR UPDATE OF o SKIP LOCKED
)
RETURNING id;

-- name: count_prunable_job_events
-- An audit event lives as long as its row (a deleted row's events go with it, by cascade);
-- past the audit period, an event whose reason runs over one line keeps only its first
-- line (at most 200 characters). Who, what, from which state to which and when stay.
SELECT count(*) AS n FROM mf_job_events
WHERE at < :cutoff AND (length(reason) > 200 OR strpos(reason, E'\n') > 0);

-- name: compact_job_events
UPDATE mf_job_events
SET reason = left(split_part(reason, E'\n', 1), 200)
WHERE id IN (SELECT id FROM mf_job_events
             WHERE at < :cutoff AND (length(reason) > 200 OR strpos(reason, E'\n') > 0)
             ORDER BY at LIMIT :limit FOR UPDATE SKIP LOCKED)
RETURNING id;

-- name: count_prunable_email_events
SELECT count(*) AS n FROM mf_outbox_events
WHERE at < :cutoff AND (length(reason) > 200 OR strpos(reason, E'\n') > 0);

-- name: compact_email_events
UPDATE mf_outbox_events
SET reason = left(split_part(reason, E'\n', 1), 200)
WHERE id IN (SELECT id FROM mf_outbox_events
             WHERE at < :cutoff AND (length(reason) > 200 OR strpos(reason, E'\n') > 0)
             ORDER BY at LIMIT :limit FOR UPDATE SKIP LOCKED)
RETURNING id;

-- name: expire_emails
-- Settles up to :limit Recorded records past their expiry (:cutoff, the pass's instant) whose
-- body never went out: Refused, "expired", as their delivery would (expire_email). No body
-- can start for them any more (mark_transmission_begun checks the expiry too).
UPDATE mf_outbox SET stage = 'Refused', finished_at = :now, reason = 'expired'
WHERE id IN (
    SELECT id FROM mf_outbox
    WHERE stage = 'Recorded' AND expires_at IS NOT NULL AND expires_at <= :cutoff
      AND body_transmissions = 0
    ORDER BY id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
  AND stage = 'Recorded' AND body_transmissions = 0
RETURNING id;

-- name: prune_lock
-- dialect-only
-- Every pruning transaction first takes this schema's pruner advisory lock (released at
-- commit); false means another pruner is inside a batch right now. In the same trip it
-- turns synchronous_commit off for this transaction only: its commit does not wait for
-- the WAL flush (a batch lost to a crash is only pruned again by the next pass), so
-- the claimers' commits do not queue behind the pruner's.
SELECT set_config('synchronous_commit', 'off', true) AS commit_mode,
       pg_try_advisory_xact_lock(hashtext(current_schema() || '.mf_pruner')) AS locked;
