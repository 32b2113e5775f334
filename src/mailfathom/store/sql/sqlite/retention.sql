-- Named queries for retention (SQLite). Values are bound; `now` and every cutoff come
-- from the injected clock. Each batch is one short transaction of at most :limit rows.
-- The job filter, shared by every job block: terminal rows of :state not yet compacted,
-- finished before :cutoff, of :kind (NULL: any kind not in the JSON array
-- :except_kinds), and with a key or not as :only says ('all', 'keyless', 'keyed').
-- Only what differs from common/retention.sql: each block overrides the common one of
-- its name (`-- dialect-only`: a statement the other dialect does without).

-- name: finish_pruner
-- Gives the lease back and keeps what the pass did, for the console.
UPDATE mf_pruner
SET holder = NULL, lease_until = NULL, last_finished_at = :now, last_report = :report
WHERE id = 1 AND holder = :holder
RETURNING id;

-- name: claims_waiting
-- Whether a due job waits to be claimed (queues that are paused aside): the pruner then
-- keeps to its busy duty cycle. INDEXED BY: the claim's own index, so this walks what a
-- claim walks; left to itself the planner takes mf_jobs_state and reads every pending
-- row, however many wait for a later time (300,000 delayed jobs: 44 ms → 26 ms, and
-- microseconds when the first row walked is due, as it is whenever claimers have work).
SELECT EXISTS (
    SELECT 1 FROM mf_jobs INDEXED BY mf_jobs_claimable
    WHERE state = 'Pending' AND available_at IS NOT NULL AND available_at <= :now
      AND queue NOT IN (SELECT queue FROM mf_paused_queues)
) AS waiting;

-- name: count_prunable_jobs
SELECT count(*) AS n FROM mf_jobs INDEXED BY mf_jobs_compactable
WHERE state = :state AND compacted_at IS NULL AND finished_at IS NOT NULL
  AND finished_at < :cutoff
  AND (CASE WHEN :kind IS NULL THEN kind NOT IN (SELECT value FROM json_each(:except_kinds))
            ELSE kind = :kind END)
  AND (:only = 'all' OR (:only = 'keyless') = (idempotency_key IS NULL));

-- name: compact_jobs
-- Empties the payload and the result of up to :limit rows and stamps them compacted;
-- returns their ids.
UPDATE mf_jobs SET payload = '{}', result = NULL, compacted_at = :now
WHERE id IN (
    SELECT id FROM mf_jobs INDEXED BY mf_jobs_compactable
    WHERE state = :state AND compacted_at IS NULL AND finished_at IS NOT NULL
      AND finished_at < :cutoff
      AND (CASE WHEN :kind IS NULL THEN kind NOT IN (SELECT value FROM json_each(:except_kinds))
                ELSE kind = :kind END)
      AND (:only = 'all' OR (:only = 'keyless') = (idempotency_key IS NULL))
    ORDER BY finished_at
    LIMIT :limit
)
RETURNING id;

-- name: compact_attempts
-- The compacted jobs' attempts keep one summary line each: outcome, class, error type and
-- the first line of the message (at most 200 characters); the traceback goes.
UPDATE mf_job_attempts
SET traceback = NULL,
    message = substr(CASE WHEN instr(message, char(10)) > 0
                          THEN substr(message, 1, instr(message, char(10)) - 1)
                          ELSE message END, 1, 200)
WHERE job_id IN (SELECT value FROM json_each(:ids))
  AND (traceback IS NOT NULL OR length(message) > 200 OR instr(message, char(10)) > 0);

-- name: repack_copy
-- dialect-only
-- SQLite only: the repack, in four statements of one transaction run with foreign keys
-- off on this connection (nothing cascades, nothing is set NULL; no trigger fires on
-- insert or delete). Shrinking a row in place leaves its leaf page mostly empty, and new
-- rows (higher ids) never reuse that room, while a delete merges underfull pages so that
-- they come free (measured: bench/retention.py). So the compacted rows are copied to a
-- temporary table, taken out, and written back unchanged, all inside SQLite: no row goes
-- through Python (a third of the batch's time). First, a fresh copy (the table is made
-- anew each time, so its columns are always mf_jobs' own, with their affinities).
CREATE TEMP TABLE mf_repack AS SELECT * FROM mf_jobs WHERE id IN (SELECT value FROM json_each(:ids));

-- name: repack_jobs
-- dialect-only
DELETE FROM mf_jobs WHERE id IN (SELECT id FROM temp.mf_repack);

-- name: repack_restore
-- dialect-only
INSERT INTO mf_jobs SELECT * FROM temp.mf_repack;

-- name: repack_drop
-- dialect-only
DROP TABLE temp.mf_repack;

-- name: delete_jobs
-- Opt-in only: deletes up to :limit keyless rows (their attempts and events go with them).
DELETE FROM mf_jobs
WHERE id IN (
    SELECT id FROM mf_jobs INDEXED BY mf_jobs_compactable
    WHERE state = :state AND compacted_at IS NULL AND finished_at IS NOT NULL
      AND finished_at < :cutoff AND idempotency_key IS NULL
      AND (CASE WHEN :kind IS NULL THEN kind NOT IN (SELECT value FROM json_each(:except_kinds))
                ELSE kind = :kind END)
    ORDER BY finished_at
    LIMIT :limit
)
RETURNING id;

-- name: count_prunable_emails
SELECT count(*) AS n FROM mf_outbox AS o INDEXED BY mf_outbox_compactable
WHERE o.stage = :stage AND o.compacted_at IS NULL AND o.finished_at IS NOT NULL
  AND o.finished_at < :cutoff
  AND (:only = 'all'
       OR (:only = 'keyed' AND (o.idempotency_key IS NOT NULL
                                OR EXISTS (SELECT 1 FROM mf_outbox AS c WHERE c.parent_id = o.id)))
       OR (:only = 'keyless' AND o.idempotency_key IS NULL
           AND NOT EXISTS (SELECT 1 FROM mf_outbox AS c WHERE c.parent_id = o.id)));

-- name: compact_emails
-- Empties the bytes (and the subject, which is content) of up to :limit final records;
-- envelope, Message-ID, stage, recipients' replies and failure stay.
UPDATE mf_outbox SET message = x'', size = 0, subject = NULL, compacted_at = :now
WHERE id IN (
    SELECT o.id FROM mf_outbox AS o INDEXED BY mf_outbox_compactable
    WHERE o.stage = :stage AND o.compacted_at IS NULL AND o.finished_at IS NOT NULL
      AND o.finished_at < :cutoff
      AND (:only = 'all'
           OR (:only = 'keyed' AND (o.idempotency_key IS NOT NULL
                                    OR EXISTS (SELECT 1 FROM mf_outbox AS c
                                               WHERE c.parent_id = o.id))))
    ORDER BY o.finished_at
    LIMIT :limit
)
RETURNING id;

-- name: delete_emails
-- Opt-in only: deletes up to :limit keyless records no split record points at.
DELETE FROM mf_outbox
WHERE id IN (
    SELECT o.id FROM mf_outbox AS o INDEXED BY mf_outbox_compactable
    WHERE o.stage = :stage AND o.compacted_at IS NULL AND o.finished_at IS NOT NULL
      AND o.finished_at < :cutoff AND o.idempotency_key IS NULL
      AND NOT EXISTS (SELECT 1 FROM mf_outbox AS c WHERE c.parent_id = o.id)
    ORDER BY o.finished_at
    LIMIT :limit
)
RETURNING id;

-- name: count_prunable_job_events
-- An audit event lives as long as its row (a deleted row's events go with it, by cascade);
-- past the audit period, an event whose reason runs over one line keeps only its first
-- line (at most 200 characters). Who, what, from which state to which and when stay.
SELECT count(*) AS n FROM mf_job_events
WHERE at < :cutoff AND (length(reason) > 200 OR instr(reason, char(10)) > 0);

-- name: compact_job_events
UPDATE mf_job_events
SET reason = substr(CASE WHEN instr(reason, char(10)) > 0
                         THEN substr(reason, 1, instr(reason, char(10)) - 1)
                         ELSE reason END, 1, 200)
WHERE id IN (SELECT id FROM mf_job_events
             WHERE at < :cutoff AND (length(reason) > 200 OR instr(reason, char(10)) > 0)
             ORDER BY at LIMIT :limit)
RETURNING id;

-- name: count_prunable_email_events
SELECT count(*) AS n FROM mf_outbox_events
WHERE at < :cutoff AND (length(reason) > 200 OR instr(reason, char(10)) > 0);

-- name: compact_email_events
UPDATE mf_outbox_events
SET reason = substr(CASE WHEN instr(reason, char(10)) > 0
                         THEN substr(reason, 1, instr(reason, char(10)) - 1)
                         ELSE reason END, 1, 200)
WHERE id IN (SELECT id FROM mf_outbox_events
             WHERE at < :cutoff AND (length(reason) > 200 OR instr(reason, char(10)) > 0)
             ORDER BY at LIMIT :limit)
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
)
  AND stage = 'Recorded' AND body_transmissions = 0
RETURNING id;
