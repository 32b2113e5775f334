-- Named queries for the job queue (PostgreSQL). Values are always bound parameters;
-- `now` always comes from the injected clock, never from the database.

-- name: insert_job
-- Creates the job unless its idempotency key exists; returns nothing when it does.
INSERT INTO mf_jobs (kind, queue, payload, priority, state, idempotency_key, available_at,
                     max_attempts, created_at, trace_context)
VALUES (%(kind)s, %(queue)s, %(payload)s::json, %(priority)s, 'Pending', %(idempotency_key)s, %(available_at)s,
        %(max_attempts)s, %(now)s, %(trace_context)s)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING *;

-- name: insert_job_id
-- insert_job returning only the new id (enqueue reads nothing else back).
INSERT INTO mf_jobs (kind, queue, payload, priority, state, idempotency_key, available_at,
                     max_attempts, created_at, trace_context)
VALUES (%(kind)s, %(queue)s, %(payload)s::json, %(priority)s, 'Pending', %(idempotency_key)s, %(available_at)s,
        %(max_attempts)s, %(now)s, %(trace_context)s)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING id;

-- name: insert_keyless_jobs
-- A batch with no idempotency keys, in one plain insert (nothing can conflict: no
-- speculative insertion, one heap WAL record per row). The payloads come as one text,
-- joined by newlines (compact JSON holds none: it escapes every control character), so
-- the client builds no array; what every job shares is one parameter each. Ids are drawn
-- in input order (volatile defaults are evaluated after the sort), so FIFO holds within
-- the batch and the ids, sorted, are the jobs' in input order: they come back as one
-- array in one row (a fifth of the client's cost of a row per id).
-- payload::json takes each payload as the exact text written (jsonb would rewrite it).
WITH inserted AS (
    INSERT INTO mf_jobs (kind, queue, payload, priority, state, available_at, max_attempts,
                         created_at, trace_context)
    SELECT %(kind)s, %(queue)s, t.payload::json, %(priority)s, 'Pending', %(available_at)s,
           %(max_attempts)s, %(now)s, %(trace_context)s
    FROM unnest(string_to_array(%(payloads)s::text, E'\n')) WITH ORDINALITY
        AS t (payload, position)
    ORDER BY t.position
    RETURNING id
)
SELECT array_agg(id ORDER BY id) AS ids FROM inserted;

-- name: insert_jobs
-- A batch with idempotency keys in one statement: the payloads as one newline-joined
-- text (as above), the keys one array sent in binary (%(…)b), what the jobs share one
-- parameter each. Ids are drawn in input order (so FIFO holds within a batch). Keyless
-- jobs are plain inserts; keyed ones are inserted in key order (so concurrent batches
-- sharing keys wait for each other instead of deadlocking), and an existing key inserts
-- nothing. Returns the ids and 1-based input positions of the rows inserted, as two
-- arrays in one row: the rest of each row is what was sent (the caller builds it).
WITH input AS MATERIALIZED (
    SELECT nextval('mf_jobs_id_seq') AS id, t.*
    FROM unnest(string_to_array(%(payloads)s::text, E'\n'), %(keys)b::text[]) WITH ORDINALITY
        AS t (payload, idempotency_key, position)
    ORDER BY t.position
), keyless AS (
    INSERT INTO mf_jobs (id, kind, queue, payload, priority, state, idempotency_key,
                         available_at, max_attempts, created_at, trace_context)
    OVERRIDING SYSTEM VALUE
    SELECT id, %(kind)s, %(queue)s, payload::json, %(priority)s, 'Pending', NULL,
           %(available_at)s, %(max_attempts)s, %(now)s, %(trace_context)s
    FROM input
    WHERE idempotency_key IS NULL
    RETURNING id
), keyed AS (
    INSERT INTO mf_jobs (id, kind, queue, payload, priority, state, idempotency_key,
                         available_at, max_attempts, created_at, trace_context)
    OVERRIDING SYSTEM VALUE
    SELECT id, %(kind)s, %(queue)s, payload::json, %(priority)s, 'Pending', idempotency_key,
           %(available_at)s, %(max_attempts)s, %(now)s, %(trace_context)s
    FROM input
    WHERE idempotency_key IS NOT NULL
    ORDER BY idempotency_key, position
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id
)
SELECT array_agg(input.position) AS positions, array_agg(input.id) AS ids FROM input
WHERE input.id IN (SELECT id FROM keyless UNION ALL SELECT id FROM keyed);

-- name: job_by_key
SELECT * FROM mf_jobs WHERE idempotency_key = %(idempotency_key)s;

-- name: jobs_by_keys
-- The jobs holding any of the keys in the JSON array %(keys)s.
SELECT * FROM mf_jobs
WHERE idempotency_key IN (SELECT jsonb_array_elements_text(%(keys)s::jsonb));

-- name: get_job
SELECT * FROM mf_jobs WHERE id = %(id)s;

-- name: reap_expired_leases
-- Jobs whose worker vanished: the lost attempt counts; out of attempts means dead-lettered.
-- Expired means it ended at least the clock-skew margin ago (lease_cutoff is now minus
-- clock_skew), so a reaper whose clock runs ahead of the claimer's takes no healthy job.
-- Rows another transaction holds (being finished, or reaped by another worker) are skipped.
-- A job an operator asked to abort is dead-lettered as permanent instead, whatever attempts
-- it has left: the abort takes effect even though its worker is gone.
-- The reaper's own live leases (%(owner)s at the attempts in %(ids)s / %(attempts)s, which
-- its heartbeat renews) are never reaped, whatever its clock says: a clock stepped forward
-- must not make a worker take its own running jobs away from itself.
WITH expired AS MATERIALIZED (
    SELECT id FROM mf_jobs
    WHERE state = 'Claimed' AND lease_expires_at <= %(lease_cutoff)s
      AND NOT (lease_owner = %(owner)s
               AND (id, attempts) IN (SELECT * FROM unnest(%(ids)s::bigint[],
                                                           %(attempts)s::integer[])))
    FOR UPDATE SKIP LOCKED
)
UPDATE mf_jobs
SET state = CASE WHEN abort_reason IS NOT NULL OR attempts - attempt_base >= max_attempts
                 THEN 'DeadLettered' ELSE 'Pending' END,
    available_at = %(now)s,
    finished_at = CASE WHEN abort_reason IS NOT NULL OR attempts - attempt_base >= max_attempts
                       THEN %(now)s END,
    failure_class = CASE WHEN abort_reason IS NOT NULL THEN 'Permanent' ELSE 'Transient' END,
    failure_reason = coalesce(abort_reason || ' (its worker ' || lease_owner || ' was gone)',
                              'lease expired: worker ' || lease_owner || ' stopped renewing it'),
    lease_owner = NULL,
    lease_expires_at = NULL
FROM expired
WHERE mf_jobs.id = expired.id
RETURNING mf_jobs.id, attempts, state, claimed_by, claimed_at, failure_class, failure_reason,
          abort_reason;

-- name: plan_claims
-- Run in a claim's transaction before it claims (and reaps): the claims below walk the
-- claim-order index and stop at their limit. With statistics from before a burst of
-- enqueues (a new table was never analyzed; a big one is not analyzed again until a
-- tenth of it changed), the planner believes few jobs are due and reads and sorts every
-- due job instead: 169 ms instead of 4.4 to claim 100 of 200,000, growing with the
-- backlog. Without a sort to choose it takes the index (a queue claim's final sort of
-- its few rows stays). JIT off with it: a plan that keeps a sort is costed past the JIT
-- thresholds, and compiling it took 200 ms. For this transaction only (SQLite: INDEXED BY).
SELECT set_config('enable_sort', 'off', true), set_config('jit', 'off', true);

-- name: claim_jobs
-- One statement: the due jobs in claim order, leased to %(owner)s, each attempt counted.
-- The MATERIALIZED CTE picks and locks the rows exactly once (a sub-select could be
-- re-run by the planner); rows other claimers hold are skipped, never waited for.
-- Jobs of paused queues are skipped (a hashed lookup in the tiny paused set).
WITH due AS MATERIALIZED (
    SELECT id FROM mf_jobs
    WHERE state = 'Pending' AND available_at IS NOT NULL AND available_at <= %(now)s
      AND queue NOT IN (SELECT queue FROM mf_paused_queues)
    ORDER BY priority DESC, available_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE mf_jobs
SET state = 'Claimed', lease_owner = %(owner)s, lease_expires_at = %(lease_until)s,
    claimed_by = %(owner)s, claimed_at = %(now)s, attempts = attempts + 1, abort_reason = NULL
FROM due
WHERE mf_jobs.id = due.id
RETURNING mf_jobs.*;

-- name: claim_jobs_in_queues
-- As claim_jobs, restricted to the queues in the JSON array %(queues)s. Each queue is read
-- through its own ordered range of mf_jobs_queue_claimable (so a backlog in another queue
-- costs nothing; a paused queue is left out), up to %(limit)s rows each, then the best %(limit)s overall are leased.
-- The few extra rows locked per queue stay locked only until this transaction commits.
WITH due AS MATERIALIZED (
    SELECT picked.id
    FROM (SELECT DISTINCT jsonb_array_elements_text(%(queues)s::jsonb)
          EXCEPT SELECT queue FROM mf_paused_queues) AS wanted (queue)
    CROSS JOIN LATERAL (
        SELECT id, priority, available_at FROM mf_jobs
        WHERE queue = wanted.queue
          AND state = 'Pending' AND available_at IS NOT NULL AND available_at <= %(now)s
        ORDER BY priority DESC, available_at, id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS picked
    ORDER BY picked.priority DESC, picked.available_at, picked.id
    LIMIT %(limit)s
)
UPDATE mf_jobs
SET state = 'Claimed', lease_owner = %(owner)s, lease_expires_at = %(lease_until)s,
    claimed_by = %(owner)s, claimed_at = %(now)s, attempts = attempts + 1, abort_reason = NULL
FROM due
WHERE mf_jobs.id = due.id
RETURNING mf_jobs.*;

-- name: extend_leases
-- Renews the leases %(owner)s still holds; returns the ids it still holds, each with the
-- operator's abort request if there is one (the worker learns of it in the same trip). A lease only
-- grows: a renewal from a clock stepped backwards never shortens it. A row locked
-- by another transaction is being finished or reaped right now: it is skipped (not
-- renewed, not returned) rather than waited for, so a heartbeat never deadlocks with
-- the same worker's batch of outcomes.
-- The (id, attempt) pairs come as two arrays joined to the table (see complete_jobs).
WITH mine AS MATERIALIZED (
    SELECT mf_jobs.id FROM mf_jobs
    JOIN unnest(%(ids)s::bigint[], %(attempts)s::integer[]) AS held (id, attempt)
      ON mf_jobs.id = held.id
    WHERE state = 'Claimed' AND lease_owner = %(owner)s
      AND mf_jobs.attempts = held.attempt
    FOR UPDATE OF mf_jobs SKIP LOCKED
)
UPDATE mf_jobs SET lease_expires_at = GREATEST(lease_expires_at, %(lease_until)s)
FROM mine
WHERE mf_jobs.id = mine.id
RETURNING mf_jobs.id, mf_jobs.abort_reason;

-- name: release_unstarted
-- Jobs %(owner)s claimed (ahead of its free slots) and never started: Pending again, due
-- as before, the claim's attempt taken back. Matched on (id, attempt) and the lease owner,
-- so a lease that moved on is left alone. A job an operator asked to abort meanwhile
-- never starts: dead-lettered as permanent, the abort's text as its reason.
UPDATE mf_jobs
SET state = CASE WHEN abort_reason IS NULL THEN 'Pending' ELSE 'DeadLettered' END,
    attempts = attempts - 1, lease_owner = NULL, lease_expires_at = NULL,
    finished_at = CASE WHEN abort_reason IS NOT NULL THEN %(now)s END,
    failure_class = CASE WHEN abort_reason IS NULL THEN failure_class ELSE 'Permanent' END,
    failure_reason = coalesce(abort_reason || ' (before it started)', failure_reason)
FROM unnest(%(ids)s::bigint[], %(attempts)s::integer[]) AS held (id, attempt)
WHERE state = 'Claimed' AND lease_owner = %(owner)s
  AND mf_jobs.id = held.id AND mf_jobs.attempts = held.attempt
RETURNING mf_jobs.id, mf_jobs.state;

-- name: notify_jobs
-- Wakes the workers listening on this schema (jobs became claimable without an insert).
SELECT pg_notify('mailfathom_jobs', current_schema());

-- name: complete_jobs
-- Marks succeeded every (id, attempt) of %(ids)s and %(attempts)s that %(owner)s still holds.
-- Returns each one's abort request, if an operator asked one meanwhile (it came too late).
-- The pairs come as two arrays joined to the table, never as a JSON document in an
-- `IN (SELECT … jsonb_array_elements(…))`: the planner cannot size that function (it
-- assumes 100 rows) and, believing from the statistics that hardly any row is Claimed
-- (rows are Claimed only for moments), it put the function scan inside a nested loop
-- over every Claimed row — a batch of 5,000 outcomes against 5,000 claimed rows
-- compared 15 million pairs and took 3 s (auto_explain). `unnest` of arrays is sized
-- from the arrays, and the join is hashed or driven through the primary key.
UPDATE mf_jobs
SET state = 'Succeeded', finished_at = %(now)s, lease_owner = NULL, lease_expires_at = NULL,
    failure_class = NULL, failure_reason = NULL
FROM unnest(%(ids)s::bigint[], %(attempts)s::integer[]) AS held (id, attempt)
WHERE state = 'Claimed' AND lease_owner = %(owner)s
  AND mf_jobs.id = held.id AND mf_jobs.attempts = held.attempt
RETURNING mf_jobs.id, mf_jobs.abort_reason;

-- name: retry_job
-- The attempt failed and may be retried: Pending again at %(retry_at)s. Unless an
-- operator asked to abort the job meanwhile: then it never runs again, whichever way the
-- attempt ended (dead-lettered as permanent, the abort's text as its reason).
UPDATE mf_jobs
SET state = CASE WHEN abort_reason IS NULL THEN 'Pending' ELSE 'DeadLettered' END,
    available_at = %(retry_at)s, lease_owner = NULL, lease_expires_at = NULL,
    finished_at = CASE WHEN abort_reason IS NOT NULL THEN %(now)s END,
    failure_class = CASE WHEN abort_reason IS NULL THEN %(failure_class)s ELSE 'Permanent' END,
    failure_reason = coalesce(abort_reason || ' (its attempt had failed first)', %(failure_reason)s)
WHERE id = %(id)s AND attempts = %(attempt)s AND state = 'Claimed' AND lease_owner = %(owner)s
RETURNING id;

-- name: snooze_job
-- The handler snoozed: Pending again at %(retry_at)s, the attempt given back (attempt_base
-- grows with attempts, so attempt numbers stay unique and the budget is untouched).
-- An operator's abort asked meanwhile wins: dead-lettered as permanent (as retry_job).
UPDATE mf_jobs
SET state = CASE WHEN abort_reason IS NULL THEN 'Pending' ELSE 'DeadLettered' END,
    available_at = %(retry_at)s, lease_owner = NULL, lease_expires_at = NULL,
    finished_at = CASE WHEN abort_reason IS NOT NULL THEN %(now)s END,
    failure_class = CASE WHEN abort_reason IS NULL THEN failure_class ELSE 'Permanent' END,
    failure_reason = coalesce(abort_reason || ' (its attempt had snoozed first)', failure_reason),
    attempt_base = attempt_base + CASE WHEN abort_reason IS NULL THEN 1 ELSE 0 END,
    snoozes = snoozes + CASE WHEN abort_reason IS NULL THEN 1 ELSE 0 END
WHERE id = %(id)s AND attempts = %(attempt)s AND state = 'Claimed' AND lease_owner = %(owner)s
RETURNING id;

-- name: dead_letter_job
-- The attempt failed for good (permanent, or its attempts ran out, or it was aborted). An
-- operator's abort asked meanwhile gives the reason: permanent, the abort's text.
UPDATE mf_jobs
SET state = 'DeadLettered', finished_at = %(now)s, lease_owner = NULL, lease_expires_at = NULL,
    failure_class = CASE WHEN abort_reason IS NULL THEN %(failure_class)s ELSE 'Permanent' END,
    failure_reason = coalesce(abort_reason, %(failure_reason)s)
WHERE id = %(id)s AND attempts = %(attempt)s AND state = 'Claimed' AND lease_owner = %(owner)s
RETURNING id;

-- name: insert_attempt
INSERT INTO mf_job_attempts (job_id, attempt, outcome, failure_class, error_type, message,
                             traceback, worker, started_at, finished_at)
VALUES (%(job_id)s, %(attempt)s, %(outcome)s, %(failure_class)s, %(error_type)s, %(message)s, %(traceback)s,
        %(worker)s, %(started_at)s, %(finished_at)s);

-- name: job_attempts
SELECT * FROM mf_job_attempts WHERE job_id = %(id)s ORDER BY attempt;

-- name: requeue_job
-- Operator: a dead letter gets a fresh attempt budget; its history stays. A compacted
-- one cannot run again (its payload is gone).
UPDATE mf_jobs
SET state = 'Pending', available_at = %(now)s, finished_at = NULL, attempt_base = attempts,
    snoozes = 0, abort_reason = NULL
WHERE id = %(id)s AND state = 'DeadLettered' AND compacted_at IS NULL
RETURNING *;

-- name: drop_job
-- Operator: a dead letter will never run.
UPDATE mf_jobs SET state = 'Dropped', finished_at = %(now)s
WHERE id = %(id)s AND state = 'DeadLettered'
RETURNING *;

-- name: release_job
-- Operator: a held job becomes due now.
UPDATE mf_jobs SET available_at = %(now)s
WHERE id = %(id)s AND state = 'Pending' AND available_at IS NULL
RETURNING *;

-- name: hold_job
-- Operator: a Pending job no worker holds waits (held) until released.
UPDATE mf_jobs SET available_at = NULL
WHERE id = %(id)s AND state = 'Pending' AND available_at IS NOT NULL
RETURNING *;

-- name: run_now_job
-- Operator: a delayed or backed-off Pending job becomes due now.
UPDATE mf_jobs SET available_at = %(now)s
WHERE id = %(id)s AND state = 'Pending' AND available_at > %(now)s
RETURNING *;

-- name: abort_job
-- Operator: stop a job for good (%(abort)s names the actor). A Pending one (held or not)
-- never starts: dead-lettered as permanent at once. A Claimed one keeps running until its
-- worker learns of the request (its next lease renewal), and every statement that ends the
-- attempt honours it (retry_job, snooze_job, release_unstarted, reap_expired_leases: it
-- never runs again). Asked once: a second request on a Claimed job is refused.
UPDATE mf_jobs
SET abort_reason = %(abort)s,
    state = CASE WHEN state = 'Pending' THEN 'DeadLettered' ELSE state END,
    finished_at = CASE WHEN state = 'Pending' THEN %(now)s ELSE finished_at END,
    failure_class = CASE WHEN state = 'Pending' THEN 'Permanent' ELSE failure_class END,
    failure_reason = CASE WHEN state = 'Pending' THEN %(abort)s::text || ' (before it started)'
                          ELSE failure_reason END
WHERE id = %(id)s AND (state = 'Pending' OR (state = 'Claimed' AND abort_reason IS NULL))
RETURNING *;

-- name: clear_late_abort
-- A success recorded after an operator's abort: the work was done and stays Succeeded,
-- and the row keeps no abort request (the audit trail says the abort came too late).
UPDATE mf_jobs SET abort_reason = NULL WHERE id = %(id)s AND state = 'Succeeded';

-- name: insert_event
INSERT INTO mf_job_events (job_id, at, actor, action, from_state, to_state, reason)
VALUES (%(job_id)s, %(at)s, %(actor)s, %(action)s, %(from_state)s, %(to_state)s, %(reason)s);

-- name: job_events
SELECT * FROM mf_job_events WHERE job_id = %(id)s ORDER BY id;

-- name: list_jobs
-- Newest first, keyset-paginated by id. The store appends one constant `filter_*`
-- fragment per filter in use, then `list_jobs_order`, so every combination gets
-- a plan of its own that walks an index (state, id) / (kind, id) / the primary key
-- backwards and stops after :limit rows, however many rows the table holds.
SELECT * FROM mf_jobs WHERE 1 = 1

-- name: filter_state
AND state = %(state)s

-- name: filter_kind
AND kind = %(kind)s

-- name: filter_queue
AND queue = %(queue)s

-- name: filter_held
AND state = 'Pending' AND available_at IS NULL

-- name: filter_text
-- :text is a LIKE pattern whose own % _ \ are escaped with a backslash. It is
-- matched, ignoring ASCII case only (lower() under the "C" collation folds A-Z
-- alone, like SQLite's LIKE), against the failure reason, the idempotency key
-- and the payload's object keys and string and number values (not jsonb's text
-- rendering, which spaces and reorders). SQLite's filter_text matches the same.
-- The payload is stored as json (its exact text); the search reads it as jsonb.
AND (lower(failure_reason COLLATE "C") LIKE lower(%(text)s COLLATE "C")
     OR lower(idempotency_key COLLATE "C") LIKE lower(%(text)s COLLATE "C")
     OR EXISTS (SELECT 1 FROM jsonb_path_query(mf_jobs.payload::jsonb, 'strict $.**') AS node(v)
                WHERE jsonb_typeof(node.v) IN ('string', 'number')
                  AND lower((node.v #>> '{}') COLLATE "C") LIKE lower(%(text)s COLLATE "C"))
     OR EXISTS (SELECT 1 FROM jsonb_path_query(
                    mf_jobs.payload::jsonb, 'strict $.** ? (@.type() == "object").keyvalue().key'
                ) AS key(k)
                WHERE lower((key.k #>> '{}') COLLATE "C") LIKE lower(%(text)s COLLATE "C")))

-- name: filter_created_before
AND created_at < %(created_before)s

-- name: filter_created_after
AND created_at >= %(created_after)s

-- name: filter_before_id
AND id < %(before_id)s

-- name: list_jobs_order
ORDER BY id DESC LIMIT %(limit)s

-- name: recent_events
-- Every job's operator actions, newest first, keyset-paginated by id.
SELECT * FROM mf_job_events
WHERE (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
ORDER BY id DESC
LIMIT %(limit)s;

-- name: count_held
SELECT count(*) AS n FROM mf_jobs WHERE state = 'Pending' AND available_at IS NULL;

-- name: throughput_jobs
-- Jobs that ended since :since, per UTC minute and final state.
SELECT to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI') AS minute, state AS outcome, count(*) AS n
FROM mf_jobs
WHERE finished_at >= %(since)s
GROUP BY 1, 2;

-- name: throughput_failures
-- Attempts that failed (and were retried or dead-lettered; a snooze is no failure) since :since, per UTC minute.
SELECT to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI') AS minute, 'Failed' AS outcome, count(*) AS n
FROM mf_job_attempts
WHERE finished_at >= %(since)s AND outcome <> 'Snoozed'
GROUP BY 1, 2;

-- name: count_jobs
SELECT state, count(*) AS n FROM mf_jobs GROUP BY state;

-- name: paused_queues
SELECT * FROM mf_paused_queues ORDER BY queue;

-- name: pause_queue
-- Returns the row only when the queue was not paused already.
INSERT INTO mf_paused_queues (queue, paused_at, actor, reason)
VALUES (%(queue)s, %(now)s, %(actor)s, %(reason)s)
ON CONFLICT (queue) DO NOTHING
RETURNING *;

-- name: resume_queue
DELETE FROM mf_paused_queues WHERE queue = %(queue)s RETURNING *;

-- name: insert_queue_event
INSERT INTO mf_queue_events (queue, at, actor, action, reason)
VALUES (%(queue)s, %(now)s, %(actor)s, %(action)s, %(reason)s);

-- name: queue_events
-- Pauses and resumes, newest first (one queue's, or every queue's when %(queue)s is NULL).
SELECT * FROM mf_queue_events
WHERE (%(queue)s::text IS NULL OR queue = %(queue)s::text)
ORDER BY id DESC
LIMIT %(limit)s;

-- name: queue_names
-- Every queue with an unfinished job, with its due, held and running counts.
SELECT queue,
       count(*) FILTER (WHERE state = 'Pending' AND available_at IS NOT NULL) AS pending,
       count(*) FILTER (WHERE state = 'Pending' AND available_at IS NULL) AS held,
       count(*) FILTER (WHERE state = 'Claimed') AS running
FROM mf_jobs
WHERE state IN ('Pending', 'Claimed')
GROUP BY queue
ORDER BY queue;
