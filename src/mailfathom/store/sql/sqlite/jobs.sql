-- Named queries for the job queue (SQLite). Values are always bound parameters;
-- `now` always comes from the injected clock, never from the database.
-- Only what differs from common/jobs.sql: each block overrides the common one of
-- its name (`-- dialect-only`: a statement the other dialect does without).

-- name: insert_job
-- Creates the job unless its idempotency key exists; returns nothing when it does.
INSERT INTO mf_jobs (kind, queue, payload, priority, state, idempotency_key, available_at,
                     max_attempts, created_at, trace_context)
VALUES (:kind, :queue, :payload, :priority, 'Pending', :idempotency_key, :available_at,
        :max_attempts, :now, :trace_context)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING *;

-- name: insert_job_id
-- insert_job returning only the new id (enqueue reads nothing else back).
INSERT INTO mf_jobs (kind, queue, payload, priority, state, idempotency_key, available_at,
                     max_attempts, created_at, trace_context)
VALUES (:kind, :queue, :payload, :priority, 'Pending', :idempotency_key, :available_at,
        :max_attempts, :now, :trace_context)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING id;

-- name: jobs_by_keys
-- The jobs holding any of the keys in the JSON array :keys.
SELECT * FROM mf_jobs WHERE idempotency_key IN (SELECT value FROM json_each(:keys));

-- name: reap_expired_leases
-- Jobs whose worker vanished: the lost attempt counts; out of attempts means dead-lettered.
-- Expired means it ended at least the clock-skew margin ago (lease_cutoff is now minus
-- clock_skew), so a reaper whose clock runs ahead of the claimer's takes no healthy job.
-- A job an operator asked to abort is dead-lettered as permanent instead, whatever attempts
-- it has left: the abort takes effect even though its worker is gone.
-- The reaper's own live leases (:owner at the attempts in :held, which its heartbeat
-- renews) are never reaped, whatever its clock says: a clock stepped forward must not
-- make a worker take its own running jobs away from itself.
UPDATE mf_jobs
SET state = CASE WHEN abort_reason IS NOT NULL OR attempts - attempt_base >= max_attempts
                 THEN 'DeadLettered' ELSE 'Pending' END,
    available_at = :now,
    finished_at = CASE WHEN abort_reason IS NOT NULL OR attempts - attempt_base >= max_attempts
                       THEN :now END,
    failure_class = CASE WHEN abort_reason IS NOT NULL THEN 'Permanent' ELSE 'Transient' END,
    failure_reason = coalesce(abort_reason || ' (its worker ' || lease_owner || ' was gone)',
                              'lease expired: worker ' || lease_owner || ' stopped renewing it'),
    lease_owner = NULL,
    lease_expires_at = NULL
WHERE state = 'Claimed' AND lease_expires_at <= :lease_cutoff
  AND NOT (lease_owner = :owner
           AND (id, attempts) IN (SELECT value ->> 0, value ->> 1 FROM json_each(:held)))
RETURNING id, attempts, state, claimed_by, claimed_at, failure_class, failure_reason,
          abort_reason;

-- name: claim_jobs
-- One statement: the due jobs in claim order, leased to :owner, each attempt counted.
-- Jobs of paused queues are skipped (the paused set is tiny: one lookup per row walked).
-- Only the kinds in the JSON array :kinds (the claimer's handlers; NULL: every kind): a job
-- of another kind stays Pending, no attempt spent, for a worker that has its handler.
-- The other claim statements filter :kinds the same way.
-- INDEXED BY: walk the claim-order index and stop at :limit; left to itself the planner
-- picks mf_jobs_state and sorts every pending job on every claim.
UPDATE mf_jobs
SET state = 'Claimed', lease_owner = :owner, lease_expires_at = :lease_until,
    claimed_by = :owner, claimed_at = :now, attempts = attempts + 1, abort_reason = NULL
WHERE id IN (
    SELECT id FROM mf_jobs INDEXED BY mf_jobs_claimable
    WHERE state = 'Pending' AND available_at IS NOT NULL AND available_at <= :now
      AND queue NOT IN (SELECT queue FROM mf_paused_queues)
      AND (:kinds IS NULL OR kind IN (SELECT value FROM json_each(:kinds)))
    ORDER BY priority DESC, available_at, id
    LIMIT :limit
)
RETURNING *;

-- name: claim_jobs_in_queues
-- As claim_jobs, restricted to some queues. {each_queue} stands for one
-- claim_jobs_in_one_queue block per queue, joined by UNION ALL (SqlStore builds it for
-- the worker's number of queues): each walks its own range of mf_jobs_queue_claimable in
-- claim order and stops at :limit, and only those few rows are sorted. Left to itself,
-- `queue IN (…)` sorts every pending job of those queues on every claim.
UPDATE mf_jobs
SET state = 'Claimed', lease_owner = :owner, lease_expires_at = :lease_until,
    claimed_by = :owner, claimed_at = :now, attempts = attempts + 1, abort_reason = NULL
WHERE id IN (
    SELECT id FROM ({each_queue})
    ORDER BY priority DESC, available_at, id
    LIMIT :limit
)
RETURNING *;

-- name: claim_jobs_in_one_queue
-- dialect-only
-- One queue's due jobs in claim order, at most :limit; {n} is the queue's position.
-- Nothing when the queue is paused.
SELECT * FROM (
    SELECT id, priority, available_at FROM mf_jobs INDEXED BY mf_jobs_queue_claimable
    WHERE queue = :queue_{n} AND state = 'Pending' AND available_at IS NOT NULL
      AND available_at <= :now
      AND NOT EXISTS (SELECT 1 FROM mf_paused_queues WHERE queue = :queue_{n})
      AND (:kinds IS NULL OR kind IN (SELECT value FROM json_each(:kinds)))
    ORDER BY priority DESC, available_at, id
    LIMIT :limit
)

-- name: extend_leases
-- Renews the leases :owner still holds; returns the ids it still holds, each with the
-- operator's abort request if there is one (so the worker learns of it in the same trip).
-- A lease only grows: a renewal from a clock stepped backwards never shortens it.
UPDATE mf_jobs SET lease_expires_at = max(lease_expires_at, :lease_until)
WHERE state = 'Claimed' AND lease_owner = :owner
  AND (id, attempts) IN (SELECT value ->> 0, value ->> 1 FROM json_each(:held))
RETURNING id, abort_reason;

-- name: release_unstarted
-- Jobs :owner claimed (ahead of its free slots) and never started: Pending again, due as
-- before, the claim's attempt taken back. Matched on (id, attempt) and the lease owner,
-- so a lease that moved on is left alone. A job an operator asked to abort meanwhile
-- never starts: dead-lettered as permanent, the abort's text as its reason.
UPDATE mf_jobs
SET state = CASE WHEN abort_reason IS NULL THEN 'Pending' ELSE 'DeadLettered' END,
    attempts = attempts - 1, lease_owner = NULL, lease_expires_at = NULL,
    finished_at = CASE WHEN abort_reason IS NOT NULL THEN :now END,
    failure_class = CASE WHEN abort_reason IS NULL THEN failure_class ELSE 'Permanent' END,
    failure_reason = coalesce(abort_reason || ' (before it started)', failure_reason)
WHERE state = 'Claimed' AND lease_owner = :owner
  AND (id, attempts) IN (SELECT value ->> 0, value ->> 1 FROM json_each(:held))
RETURNING id, state;

-- name: complete_jobs
-- Marks succeeded every (id, attempt, result) in :held that :owner still holds, writing
-- the handler's result (its JSON text, as a JSON string; null: none) in the same update.
-- Returns each one's abort request, if an operator asked one meanwhile (it came too late).
-- The batch is the outer loop and each row is found through the primary key: `+state`
-- keeps the planner off mf_jobs_state, which it would otherwise walk (every Claimed row)
-- with a scan of the batch inside, for each row (batch × claimed rows; measured: a
-- worker's no-op throughput halved).
UPDATE mf_jobs
SET state = 'Succeeded', finished_at = :now, lease_owner = NULL, lease_expires_at = NULL,
    failure_class = NULL, failure_reason = NULL, result = held.value ->> 2
FROM json_each(:held) AS held
WHERE mf_jobs.id = held.value ->> 0 AND mf_jobs.attempts = held.value ->> 1
  AND +state = 'Claimed' AND lease_owner = :owner
RETURNING id, abort_reason;

-- name: filter_text
-- :text is a LIKE pattern whose own % _ \ are escaped with a backslash. It is
-- matched, ignoring ASCII case only (LIKE's own folding), against the failure
-- reason, the idempotency key and the payload's object keys and string and
-- number values (not its JSON text: quoting, escapes and spacing differ
-- between dialects). PostgreSQL's filter_text matches exactly the same.
AND (failure_reason LIKE :text ESCAPE '\' OR idempotency_key LIKE :text ESCAPE '\'
     OR EXISTS (SELECT 1 FROM json_tree(mf_jobs.payload) AS node
                WHERE (node.type IN ('text', 'integer', 'real')
                       AND node.atom LIKE :text ESCAPE '\')
                   OR (typeof(node.key) = 'text' AND node.key LIKE :text ESCAPE '\')))

-- name: throughput_jobs
-- Jobs that ended since :since, per UTC minute and final state.
SELECT substr(finished_at, 1, 16) AS minute, state AS outcome, count(*) AS n
FROM mf_jobs
WHERE finished_at >= :since
GROUP BY 1, 2;

-- name: throughput_failures
-- Attempts that failed (and were retried or dead-lettered; a snooze is no failure) since :since, per UTC minute.
SELECT substr(finished_at, 1, 16) AS minute, 'Failed' AS outcome, count(*) AS n
FROM mf_job_attempts
WHERE finished_at >= :since AND outcome <> 'Snoozed'
GROUP BY 1, 2;

-- name: queue_names
-- Every queue that has a job or a pause, with its due, held and running counts.
SELECT queue,
       sum(state = 'Pending' AND available_at IS NOT NULL) AS pending,
       sum(state = 'Pending' AND available_at IS NULL) AS held,
       sum(state = 'Claimed') AS running
FROM mf_jobs
WHERE state IN ('Pending', 'Claimed')
GROUP BY queue
ORDER BY queue;
