-- Named queries for the job queue (PostgreSQL). Values are always bound parameters;
-- `now` always comes from the injected clock, never from the database.
-- Only what differs from common/jobs.sql: each block overrides the common one of
-- its name (`-- dialect-only`: a statement the other dialect does without).

-- name: insert_job
-- Creates the job unless its idempotency key exists; returns nothing when it does.
INSERT INTO mf_jobs (kind, queue, payload, priority, state, idempotency_key, available_at,
                     max_attempts, created_at, trace_context)
VALUES (:kind, :queue, :payload::json, :priority, 'Pending', :idempotency_key, :available_at,
        :max_attempts, :now, :trace_context)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING *;

-- name: insert_job_id
-- insert_job returning only the new id (enqueue reads nothing else back).
INSERT INTO mf_jobs (kind, queue, payload, priority, state, idempotency_key, available_at,
                     max_attempts, created_at, trace_context)
VALUES (:kind, :queue, :payload::json, :priority, 'Pending', :idempotency_key, :available_at,
        :max_attempts, :now, :trace_context)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING id;

-- name: jobs_by_keys
-- The jobs holding any of the keys in the JSON array :keys.
SELECT * FROM mf_jobs
WHERE idempotency_key IN (SELECT jsonb_array_elements_text(:keys::jsonb));

-- name: reap_expired_leases
-- Jobs whose worker vanished: the lost attempt counts; out of attempts means dead-lettered.
-- Expired means it ended at least the clock-skew margin ago (lease_cutoff is now minus
-- clock_skew), so a reaper whose clock runs ahead of the claimer's takes no healthy job.
-- Rows another transaction holds (being finished, or reaped by another worker) are skipped.
-- A job an operator asked to abort is dead-lettered as permanent instead, whatever attempts
-- it has left: the abort takes effect even though its worker is gone.
-- The reaper's own live leases (:owner at the attempts in :ids / :attempts, which
-- its heartbeat renews) are never reaped, whatever its clock says: a clock stepped forward
-- must not make a worker take its own running jobs away from itself.
WITH expired AS MATERIALIZED (
    SELECT id FROM mf_jobs
    WHERE state = 'Claimed' AND lease_expires_at <= :lease_cutoff
      AND NOT (lease_owner = :owner
               AND (id, attempts) IN (SELECT * FROM unnest(:ids::bigint[],
                                                           :attempts::integer[])))
    FOR UPDATE SKIP LOCKED
)
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
FROM expired
WHERE mf_jobs.id = expired.id
RETURNING mf_jobs.id, attempts, state, claimed_by, claimed_at, failure_class, failure_reason,
          abort_reason;

-- name: claim_jobs
-- One statement: the due jobs in claim order, leased to :owner, each attempt counted.
-- The MATERIALIZED CTE picks and locks the rows exactly once (a sub-select could be
-- re-run by the planner); rows other claimers hold are skipped, never waited for.
-- Jobs of paused queues are skipped (a hashed lookup in the tiny paused set).
-- Only the kinds in the JSON array :kinds (the claimer's handlers; NULL: every kind): a job
-- of another kind stays Pending, no attempt spent, for a worker that has its handler.
-- The other claim statements filter :kinds the same way.
WITH due AS MATERIALIZED (
    SELECT id FROM mf_jobs
    WHERE state = 'Pending' AND available_at IS NOT NULL AND available_at <= :now
      AND queue NOT IN (SELECT queue FROM mf_paused_queues)
      AND (:kinds::jsonb IS NULL OR kind IN (SELECT jsonb_array_elements_text(:kinds::jsonb)))
    ORDER BY priority DESC, available_at, id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE mf_jobs
SET state = 'Claimed', lease_owner = :owner, lease_expires_at = :lease_until,
    claimed_by = :owner, claimed_at = :now, attempts = attempts + 1, abort_reason = NULL
FROM due
WHERE mf_jobs.id = due.id
RETURNING mf_jobs.*;

-- name: claim_jobs_in_queues
-- As claim_jobs, restricted to the queues in the JSON array :queues. Each queue is read
-- through its own ordered range of mf_jobs_queue_claimable (so a backlog in another queue
-- costs nothing; a paused queue is left out), up to :limit rows each, then the best :limit overall are leased.
-- The few extra rows locked per queue stay locked only until this transaction commits.
WITH due AS MATERIALIZED (
    SELECT picked.id
    FROM (SELECT DISTINCT jsonb_array_elements_text(:queues::jsonb)
          EXCEPT SELECT queue FROM mf_paused_queues) AS wanted (queue)
    CROSS JOIN LATERAL (
        SELECT id, priority, available_at FROM mf_jobs
        WHERE queue = wanted.queue
          AND state = 'Pending' AND available_at IS NOT NULL AND available_at <= :now
          AND (:kinds::jsonb IS NULL OR kind IN (SELECT jsonb_array_elements_text(:kinds::jsonb)))
        ORDER BY priority DESC, available_at, id
        LIMIT :limit
        FOR UPDATE SKIP LOCKED
    ) AS picked
    ORDER BY picked.priority DESC, picked.available_at, picked.id
    LIMIT :limit
)
UPDATE mf_jobs
SET state = 'Claimed', lease_owner = :owner, lease_expires_at = :lease_until,
    claimed_by = :owner, claimed_at = :now, attempts = attempts + 1, abort_reason = NULL
FROM due
WHERE mf_jobs.id = due.id
RETURNING mf_jobs.*;

-- name: extend_leases
-- Renews the leases :owner still holds; returns the ids it still holds, each with the
-- operator's abort request if there is one (the worker learns of it in the same trip). A lease only
-- grows: a renewal from a clock stepped backwards never shortens it. A row locked
-- by another transaction is being finished or reaped right now: it is skipped (not
-- renewed, not returned) rather than waited for, so a heartbeat never deadlocks with
-- the same worker's batch of outcomes.
-- The (id, attempt) pairs come as two arrays joined to the table (see complete_jobs).
WITH mine AS MATERIALIZED (
    SELECT mf_jobs.id FROM mf_jobs
    JOIN unnest(:ids::bigint[], :attempts::integer[]) AS held (id, attempt)
      ON mf_jobs.id = held.id
    WHERE state = 'Claimed' AND lease_owner = :owner
      AND mf_jobs.attempts = held.attempt
    FOR UPDATE OF mf_jobs SKIP LOCKED
)
UPDATE mf_jobs SET lease_expires_at = GREATEST(lease_expires_at, :lease_until)
FROM mine
WHERE mf_jobs.id = mine.id
RETURNING mf_jobs.id, mf_jobs.abort_reason;

-- name: release_unstarted
-- Jobs :owner claimed (ahead of its free slots) and never started: Pending again, due
-- as before, the claim's attempt taken back. Matched on (id, attempt) and the lease owner,
-- so a lease that moved on is left alone. A job an operator asked to abort meanwhile
-- never starts: dead-lettered as permanent, the abort's text as its reason.
UPDATE mf_jobs
SET state = CASE WHEN abort_reason IS NULL THEN 'Pending' ELSE 'DeadLettered' END,
    attempts = attempts - 1, lease_owner = NULL, lease_expires_at = NULL,
    finished_at = CASE WHEN abort_reason IS NOT NULL THEN :now END,
    failure_class = CASE WHEN abort_reason IS NULL THEN failure_class ELSE 'Permanent' END,
    failure_reason = coalesce(abort_reason || ' (before it started)', failure_reason)
FROM unnest(:ids::bigint[], :attempts::integer[]) AS held (id, attempt)
WHERE state = 'Claimed' AND lease_owner = :owner
  AND mf_jobs.id = held.id AND mf_jobs.attempts = held.attempt
RETURNING mf_jobs.id, mf_jobs.state;

-- name: complete_jobs
-- Marks succeeded every (id, attempt) of :ids and :attempts that :owner still holds.
-- Returns each one's abort request, if an operator asked one meanwhile (it came too late).
-- The pairs come as two arrays joined to the table, never as a JSON document in an
-- `IN (SELECT … jsonb_array_elements(…))`: the planner cannot size that function (it
-- assumes 100 rows) and, believing from the statistics that hardly any row is Claimed
-- (rows are Claimed only for moments), it put the function scan inside a nested loop
-- over every Claimed row — a batch of 5,000 outcomes against 5,000 claimed rows
-- compared 15 million pairs and took 3 s (auto_explain). `unnest` of arrays is sized
-- from the arrays, and the join is hashed or driven through the primary key.
-- :results holds each job's result as JSON text, one line per job in the order of :ids
-- (an empty line: none; compact JSON holds no newline), written in the same update. One
-- text rather than a text[]: the client quotes no element (an array of JSON strings cost
-- the worker 30 µs a job). unnest pads a shorter array with NULLs.
UPDATE mf_jobs
SET state = 'Succeeded', finished_at = :now, lease_owner = NULL, lease_expires_at = NULL,
    failure_class = NULL, failure_reason = NULL, result = held.result::json
FROM unnest(:ids::bigint[], :attempts::integer[],
            string_to_array(:results::text, E'\n', '')) AS held (id, attempt, result)
WHERE state = 'Claimed' AND lease_owner = :owner
  AND mf_jobs.id = held.id AND mf_jobs.attempts = held.attempt
RETURNING mf_jobs.id, mf_jobs.abort_reason;

-- name: filter_text
-- :text is a LIKE pattern whose own % _ \ are escaped with a backslash. It is
-- matched, ignoring ASCII case only (lower() under the "C" collation folds A-Z
-- alone, like SQLite's LIKE), against the failure reason, the idempotency key
-- and the payload's object keys and string and number values (not jsonb's text
-- rendering, which spaces and reorders). SQLite's filter_text matches the same.
-- The payload is stored as json (its exact text); the search reads it as jsonb.
AND (lower(failure_reason COLLATE "C") LIKE lower(:text COLLATE "C")
     OR lower(idempotency_key COLLATE "C") LIKE lower(:text COLLATE "C")
     OR EXISTS (SELECT 1 FROM jsonb_path_query(mf_jobs.payload::jsonb, 'strict $.**') AS node(v)
                WHERE jsonb_typeof(node.v) IN ('string', 'number')
                  AND lower((node.v #>> '{}') COLLATE "C") LIKE lower(:text COLLATE "C"))
     OR EXISTS (SELECT 1 FROM jsonb_path_query(
                    mf_jobs.payload::jsonb, 'strict $.** ? (@.type() == "object").keyvalue().key'
                ) AS key(k)
                WHERE lower((key.k #>> '{}') COLLATE "C") LIKE lower(:text COLLATE "C")))

-- name: throughput_jobs
-- Jobs that ended since :since, per UTC minute and final state.
SELECT to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI') AS minute, state AS outcome, count(*) AS n
FROM mf_jobs
WHERE finished_at >= :since
GROUP BY 1, 2;

-- name: throughput_failures
-- Attempts that failed (and were retried or dead-lettered; a snooze is no failure) since :since, per UTC minute.
SELECT to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI') AS minute, 'Failed' AS outcome, count(*) AS n
FROM mf_job_attempts
WHERE finished_at >= :since AND outcome <> 'Snoozed'
GROUP BY 1, 2;

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

-- name: insert_keyless_jobs
-- dialect-only
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
    SELECT :kind, :queue, t.payload::json, :priority, 'Pending', :available_at,
           :max_attempts, :now, :trace_context
    FROM unnest(string_to_array(:payloads::text, E'\n')) WITH ORDINALITY
        AS t (payload, position)
    ORDER BY t.position
    RETURNING id
)
SELECT array_agg(id ORDER BY id) AS ids FROM inserted;

-- name: insert_keyless_job
-- dialect-only
-- One job without an idempotency key (the common single enqueue), as a plain insert:
-- nothing can conflict, so no speculative insertion and no arbiter-index check (what
-- ON CONFLICT costs every row); returns the new id.
INSERT INTO mf_jobs (kind, queue, payload, priority, state, available_at, max_attempts,
                     created_at, trace_context)
VALUES (:kind, :queue, :payload::json, :priority, 'Pending', :available_at, :max_attempts,
        :now, :trace_context)
RETURNING id;

-- name: insert_jobs
-- dialect-only
-- A batch with idempotency keys in one statement: the payloads as one newline-joined
-- text (as above), the keys one array sent in binary (%(…)b), what the jobs share one
-- parameter each. Ids are drawn in input order (so FIFO holds within a batch). Keyless
-- jobs are plain inserts; keyed ones are inserted in key order (so concurrent batches
-- sharing keys wait for each other instead of deadlocking), and an existing key inserts
-- nothing. Returns the ids and 1-based input positions of the rows inserted, as two
-- arrays in one row: the rest of each row is what was sent (the caller builds it).
WITH input AS MATERIALIZED (
    SELECT nextval('mf_jobs_id_seq') AS id, t.*
    FROM unnest(string_to_array(:payloads::text, E'\n'), %(keys)b::text[]) WITH ORDINALITY
        AS t (payload, idempotency_key, position)
    ORDER BY t.position
), keyless AS (
    INSERT INTO mf_jobs (id, kind, queue, payload, priority, state, idempotency_key,
                         available_at, max_attempts, created_at, trace_context)
    OVERRIDING SYSTEM VALUE
    SELECT id, :kind, :queue, payload::json, :priority, 'Pending', NULL,
           :available_at, :max_attempts, :now, :trace_context
    FROM input
    WHERE idempotency_key IS NULL
    RETURNING id
), keyed AS (
    INSERT INTO mf_jobs (id, kind, queue, payload, priority, state, idempotency_key,
                         available_at, max_attempts, created_at, trace_context)
    OVERRIDING SYSTEM VALUE
    SELECT id, :kind, :queue, payload::json, :priority, 'Pending', idempotency_key,
           :available_at, :max_attempts, :now, :trace_context
    FROM input
    WHERE idempotency_key IS NOT NULL
    ORDER BY idempotency_key, position
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id
)
SELECT array_agg(input.position) AS positions, array_agg(input.id) AS ids FROM input
WHERE input.id IN (SELECT id FROM keyless UNION ALL SELECT id FROM keyed);

-- name: plan_claims
-- dialect-only
-- Run in a claim's transaction before it claims (and reaps): the claims below walk the
-- claim-order index and stop at their limit. With statistics from before a burst of
-- enqueues (a new table was never analyzed; a big one is not analyzed again until a
-- tenth of it changed), the planner believes few jobs are due and reads and sorts every
-- due job instead: 169 ms instead of 4.4 to claim 100 of 200,000, growing with the
-- backlog. Without a sort to choose it takes the index (a queue claim's final sort of
-- its few rows stays). JIT off with it: a plan that keeps a sort is costed past the JIT
-- thresholds, and compiling it took 200 ms. For this transaction only (SQLite: INDEXED BY).
SELECT set_config('enable_sort', 'off', true), set_config('jit', 'off', true);

-- name: notify_jobs
-- dialect-only
-- Wakes the workers listening on this schema (jobs became claimable without an insert).
SELECT pg_notify('mailfathom_jobs', current_schema());
