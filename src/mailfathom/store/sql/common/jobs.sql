-- Named queries for the job queue. Values are always bound parameters;
-- `now` always comes from the injected clock, never from the database.
-- Written once with :name parameters (translated to the driver's style when loaded);
-- a `-- per-dialect` block has no body here: each dialect's file defines it.

-- name: insert_job
-- per-dialect

-- name: insert_job_id
-- per-dialect

-- name: job_by_key
SELECT * FROM mf_jobs WHERE idempotency_key = :idempotency_key;

-- name: jobs_by_keys
-- per-dialect

-- name: get_job
SELECT * FROM mf_jobs WHERE id = :id;

-- name: reap_expired_leases
-- per-dialect

-- name: claim_jobs
-- per-dialect

-- name: claim_jobs_in_queues
-- per-dialect

-- name: extend_leases
-- per-dialect

-- name: release_unstarted
-- per-dialect

-- name: complete_jobs
-- per-dialect

-- name: retry_job
-- The attempt failed and may be retried: Pending again at :retry_at. Unless an
-- operator asked to abort the job meanwhile: then it never runs again, whichever way the
-- attempt ended (dead-lettered as permanent, the abort's text as its reason).
UPDATE mf_jobs
SET state = CASE WHEN abort_reason IS NULL THEN 'Pending' ELSE 'DeadLettered' END,
    available_at = :retry_at, lease_owner = NULL, lease_expires_at = NULL,
    finished_at = CASE WHEN abort_reason IS NOT NULL THEN :now END,
    failure_class = CASE WHEN abort_reason IS NULL THEN :failure_class ELSE 'Permanent' END,
    failure_reason = coalesce(abort_reason || ' (its attempt had failed first)', :failure_reason)
WHERE id = :id AND attempts = :attempt AND state = 'Claimed' AND lease_owner = :owner
RETURNING id;

-- name: snooze_job
-- The handler snoozed: Pending again at :retry_at, the attempt given back (attempt_base
-- grows with attempts, so attempt numbers stay unique and the budget is untouched).
-- An operator's abort asked meanwhile wins: dead-lettered as permanent (as retry_job).
UPDATE mf_jobs
SET state = CASE WHEN abort_reason IS NULL THEN 'Pending' ELSE 'DeadLettered' END,
    available_at = :retry_at, lease_owner = NULL, lease_expires_at = NULL,
    finished_at = CASE WHEN abort_reason IS NOT NULL THEN :now END,
    failure_class = CASE WHEN abort_reason IS NULL THEN failure_class ELSE 'Permanent' END,
    failure_reason = coalesce(abort_reason || ' (its attempt had snoozed first)', failure_reason),
    attempt_base = attempt_base + CASE WHEN abort_reason IS NULL THEN 1 ELSE 0 END,
    snoozes = snoozes + CASE WHEN abort_reason IS NULL THEN 1 ELSE 0 END
WHERE id = :id AND attempts = :attempt AND state = 'Claimed' AND lease_owner = :owner
RETURNING id;

-- name: dead_letter_job
-- The attempt failed for good (permanent, or its attempts ran out, or it was aborted). An
-- operator's abort asked meanwhile gives the reason: permanent, the abort's text.
UPDATE mf_jobs
SET state = 'DeadLettered', finished_at = :now, lease_owner = NULL, lease_expires_at = NULL,
    failure_class = CASE WHEN abort_reason IS NULL THEN :failure_class ELSE 'Permanent' END,
    failure_reason = coalesce(abort_reason, :failure_reason)
WHERE id = :id AND attempts = :attempt AND state = 'Claimed' AND lease_owner = :owner
RETURNING id;

-- name: insert_attempt
INSERT INTO mf_job_attempts (job_id, attempt, outcome, failure_class, error_type, message,
                             traceback, worker, started_at, finished_at)
VALUES (:job_id, :attempt, :outcome, :failure_class, :error_type, :message, :traceback,
        :worker, :started_at, :finished_at);

-- name: job_attempts
SELECT * FROM mf_job_attempts WHERE job_id = :id ORDER BY attempt;

-- name: requeue_job
-- Operator: a dead letter gets a fresh attempt budget; its history stays. A compacted
-- one cannot run again (its payload is gone).
UPDATE mf_jobs
SET state = 'Pending', available_at = :now, finished_at = NULL, attempt_base = attempts,
    snoozes = 0, abort_reason = NULL
WHERE id = :id AND state = 'DeadLettered' AND compacted_at IS NULL
RETURNING *;

-- name: drop_job
-- Operator: a dead letter will never run.
UPDATE mf_jobs SET state = 'Dropped', finished_at = :now
WHERE id = :id AND state = 'DeadLettered'
RETURNING *;

-- name: release_job
-- Operator: a held job becomes due now.
UPDATE mf_jobs SET available_at = :now
WHERE id = :id AND state = 'Pending' AND available_at IS NULL
RETURNING *;

-- name: hold_job
-- Operator: a Pending job no worker holds waits (held) until released.
UPDATE mf_jobs SET available_at = NULL
WHERE id = :id AND state = 'Pending' AND available_at IS NOT NULL
RETURNING *;

-- name: run_now_job
-- Operator: a delayed or backed-off Pending job becomes due now.
UPDATE mf_jobs SET available_at = :now
WHERE id = :id AND state = 'Pending' AND available_at > :now
RETURNING *;

-- name: abort_job
-- Operator: stop a job for good (:abort names the actor). A Pending one (held or not)
-- never starts: dead-lettered as permanent at once. A Claimed one keeps running until its
-- worker learns of the request (its next lease renewal), and every statement that ends the
-- attempt honours it (retry_job, snooze_job, release_unstarted, reap_expired_leases: it
-- never runs again). Asked once: a second request on a Claimed job is refused.
UPDATE mf_jobs
SET abort_reason = :abort,
    state = CASE WHEN state = 'Pending' THEN 'DeadLettered' ELSE state END,
    finished_at = CASE WHEN state = 'Pending' THEN :now ELSE finished_at END,
    failure_class = CASE WHEN state = 'Pending' THEN 'Permanent' ELSE failure_class END,
    failure_reason = CASE WHEN state = 'Pending' THEN CAST(:abort AS text) || ' (before it started)'
                          ELSE failure_reason END
WHERE id = :id AND (state = 'Pending' OR (state = 'Claimed' AND abort_reason IS NULL))
RETURNING *;

-- name: clear_late_abort
-- A success recorded after an operator's abort: the work was done and stays Succeeded,
-- and the row keeps no abort request (the audit trail says the abort came too late).
UPDATE mf_jobs SET abort_reason = NULL WHERE id = :id AND state = 'Succeeded';

-- name: insert_event
INSERT INTO mf_job_events (job_id, at, actor, action, from_state, to_state, reason)
VALUES (:job_id, :at, :actor, :action, :from_state, :to_state, :reason);

-- name: job_events
SELECT * FROM mf_job_events WHERE job_id = :id ORDER BY id;

-- name: list_jobs
-- Newest first, keyset-paginated by id. The store appends one constant `filter_*`
-- fragment per filter in use, then `list_jobs_order`, so every combination gets
-- a plan of its own that walks an index (state, id) / (kind, id) / the primary key
-- backwards and stops after :limit rows, however many rows the table holds.
SELECT * FROM mf_jobs WHERE 1 = 1

-- name: filter_state
AND state = :state

-- name: filter_kind
AND kind = :kind

-- name: filter_queue
AND queue = :queue

-- name: filter_held
AND state = 'Pending' AND available_at IS NULL

-- name: filter_text
-- per-dialect

-- name: filter_created_before
AND created_at < :created_before

-- name: filter_created_after
AND created_at >= :created_after

-- name: filter_before_id
AND id < :before_id

-- name: list_jobs_order
ORDER BY id DESC LIMIT :limit

-- name: recent_events
-- Every job's operator actions, newest first, keyset-paginated by id.
SELECT * FROM mf_job_events
WHERE (CAST(:before_id AS bigint) IS NULL OR id < CAST(:before_id AS bigint))
ORDER BY id DESC
LIMIT :limit;

-- name: count_held
SELECT count(*) AS n FROM mf_jobs WHERE state = 'Pending' AND available_at IS NULL;

-- name: throughput_jobs
-- per-dialect

-- name: throughput_failures
-- per-dialect

-- name: count_jobs
SELECT state, count(*) AS n FROM mf_jobs GROUP BY state;

-- name: paused_queues
SELECT * FROM mf_paused_queues ORDER BY queue;

-- name: pause_queue
-- Returns the row only when the queue was not paused already.
INSERT INTO mf_paused_queues (queue, paused_at, actor, reason)
VALUES (:queue, :now, :actor, :reason)
ON CONFLICT (queue) DO NOTHING
RETURNING *;

-- name: resume_queue
DELETE FROM mf_paused_queues WHERE queue = :queue RETURNING *;

-- name: insert_queue_event
INSERT INTO mf_queue_events (queue, at, actor, action, reason)
VALUES (:queue, :now, :actor, :action, :reason);

-- name: queue_events
-- Pauses and resumes, newest first (one queue's, or every queue's when :queue is NULL).
SELECT * FROM mf_queue_events
WHERE (CAST(:queue AS text) IS NULL OR queue = CAST(:queue AS text))
ORDER BY id DESC
LIMIT :limit;

-- name: queue_names
-- per-dialect
