-- Flow control (PostgreSQL): the limit definitions, the claim of limited jobs, the starts log.
-- Limited claims are serialised fleet-wide by flow_lock (a transaction-scoped advisory
-- lock), so two claimers never both see a free slot; unlimited claims never take it.
-- `now` always comes from the injected clock; rate windows alone are judged on the
-- database's clock (flow_clock), the one clock every claimer shares.

-- name: flow_limits
SELECT * FROM mf_flow_limits ORDER BY name;

-- name: flow_lock
-- Held until the claim's transaction ends: every count read after it includes every
-- limited claim committed before it.
SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.mf_flow'));

-- name: flow_clock
-- The database's clock, which every rate window is judged on (read under flow_lock, so
-- the starts of the claims before are stamped no later): the claimers' clocks may
-- disagree, one clock measures every window.
SELECT clock_timestamp() AS now;

-- name: flow_upsert_limit
INSERT INTO mf_flow_limits (name, scope, target, limit_key, max_running, rate_count,
                            rate_window_ms, max_running_per_key, rate_per_key_count,
                            rate_per_key_window_ms, updated_at)
VALUES (%(name)s, %(scope)s, %(target)s, %(limit_key)s, %(max_running)s, %(rate_count)s,
        %(rate_window_ms)s, %(max_running_per_key)s, %(rate_per_key_count)s,
        %(rate_per_key_window_ms)s, %(now)s)
ON CONFLICT (name) DO UPDATE SET
    max_running = excluded.max_running, rate_count = excluded.rate_count,
    rate_window_ms = excluded.rate_window_ms, max_running_per_key = excluded.max_running_per_key,
    rate_per_key_count = excluded.rate_per_key_count,
    rate_per_key_window_ms = excluded.rate_per_key_window_ms, updated_at = excluded.updated_at;

-- name: flow_delete_limits
-- Every row of one kind or queue whose name is not in the JSON array %(keep)s.
DELETE FROM mf_flow_limits
WHERE scope = %(scope)s AND target = %(target)s
  AND name NOT IN (SELECT jsonb_array_elements_text(%(keep)s::jsonb));

-- name: flow_set_keys
-- Sets the limit key of just-inserted jobs: %(keys)s is a JSON array of [id, key] pairs.
UPDATE mf_jobs SET limit_key = k.key
FROM (SELECT (e ->> 0)::bigint AS id, e ->> 1 AS key
      FROM jsonb_array_elements(%(keys)s::jsonb) AS e) AS k
WHERE mf_jobs.id = k.id;

-- name: flow_running
-- Claimed jobs of the limited kinds and queues, per kind, queue and key (the running set is
-- small: it is walked through the mf_jobs_leases partial index).
SELECT kind, queue, limit_key, count(*) AS n FROM mf_jobs
WHERE state = 'Claimed' AND lease_expires_at IS NOT NULL
  AND (kind IN (SELECT jsonb_array_elements_text(%(kinds)s::jsonb))
       OR queue IN (SELECT jsonb_array_elements_text(%(queues)s::jsonb)))
GROUP BY kind, queue, limit_key;

-- name: flow_trim_starts
-- Starts of one limit that left its longest window (started at or before %(cutoff)s).
DELETE FROM mf_flow_starts WHERE limit_name = %(name)s AND started_at <= %(cutoff)s;

-- name: flow_starts_whole
-- Starts of a whole kind or queue in the window (after %(since)s).
SELECT count(*) AS n FROM mf_flow_starts
WHERE limit_name = %(name)s AND limit_key = '' AND started_at > %(since)s;

-- name: flow_starts_keys
-- Starts per key in the window (after %(since)s), for every key (%(keys)s NULL) or some.
SELECT limit_key, count(*) AS n FROM mf_flow_starts
WHERE limit_name = %(name)s AND limit_key <> '' AND started_at > %(since)s
  AND (%(keys)s::jsonb IS NULL
       OR limit_key IN (SELECT jsonb_array_elements_text(%(keys)s::jsonb)))
GROUP BY limit_key;

-- name: flow_candidates
-- Due jobs in claim order, limited (of the limited kinds and queues) or not: one order for
-- both, so a limit never reorders what it lets through. Leaves out jobs under a limit
-- that is used up (%(blocked_*)s come from the counts just read), so a busy key or kind
-- never hides the jobs behind it. At most %(scan)s rows; the store picks among them.
-- Walks the claim-order index and stops at %(scan)s (plan_claims keeps it from sorting).
SELECT id, kind, queue, limit_key,
       (kind IN (SELECT jsonb_array_elements_text(%(flow_kinds)s::jsonb))
        OR queue IN (SELECT jsonb_array_elements_text(%(flow_queues)s::jsonb))) AS limited
FROM mf_jobs
WHERE state = 'Pending' AND available_at IS NOT NULL AND available_at <= %(now)s
  AND queue NOT IN (SELECT queue FROM mf_paused_queues)
  AND (%(queues)s::jsonb IS NULL
       OR queue IN (SELECT jsonb_array_elements_text(%(queues)s::jsonb)))
  AND kind NOT IN (SELECT jsonb_array_elements_text(%(blocked_kinds)s::jsonb))
  AND queue NOT IN (SELECT jsonb_array_elements_text(%(blocked_queues)s::jsonb))
  AND 'kind:' || kind || '|' || coalesce(limit_key, '')
      NOT IN (SELECT jsonb_array_elements_text(%(blocked_keys)s::jsonb))
  AND 'queue:' || queue || '|' || coalesce(limit_key, '')
      NOT IN (SELECT jsonb_array_elements_text(%(blocked_keys)s::jsonb))
ORDER BY priority DESC, available_at, id
LIMIT %(scan)s;

-- name: flow_waiting
-- Due jobs held back by a used-up limit (the console's "waiting on it"), oldest claim first.
SELECT id, kind, queue, limit_key FROM mf_jobs
WHERE state = 'Pending' AND available_at IS NOT NULL AND available_at <= %(now)s
  AND (kind IN (SELECT jsonb_array_elements_text(%(blocked_kinds)s::jsonb))
       OR queue IN (SELECT jsonb_array_elements_text(%(blocked_queues)s::jsonb))
       OR 'kind:' || kind || '|' || coalesce(limit_key, '')
          IN (SELECT jsonb_array_elements_text(%(blocked_keys)s::jsonb))
       OR 'queue:' || queue || '|' || coalesce(limit_key, '')
          IN (SELECT jsonb_array_elements_text(%(blocked_keys)s::jsonb)))
ORDER BY priority DESC, available_at, id
LIMIT %(scan)s;

-- name: flow_claim_ids
-- Leases the picked jobs (JSON array %(ids)s) to %(owner)s, each attempt counted, if still
-- due (a row another transaction holds is skipped, never waited for).
WITH picked AS MATERIALIZED (
    SELECT id FROM mf_jobs
    WHERE id IN (SELECT (jsonb_array_elements_text(%(ids)s::jsonb))::bigint)
      AND state = 'Pending' AND available_at IS NOT NULL AND available_at <= %(now)s
    FOR UPDATE SKIP LOCKED
)
UPDATE mf_jobs
SET state = 'Claimed', lease_owner = %(owner)s, lease_expires_at = %(lease_until)s,
    claimed_by = %(owner)s, claimed_at = %(now)s, attempts = attempts + 1, abort_reason = NULL
FROM picked
WHERE mf_jobs.id = picked.id
RETURNING mf_jobs.*;

-- name: flow_insert_starts
-- One starts row per [limit name, key, job id] in the JSON array %(rows)s, at %(now)s.
INSERT INTO mf_flow_starts (limit_name, limit_key, started_at, job_id)
SELECT e ->> 0, e ->> 1, %(now)s, (e ->> 2)::bigint
FROM jsonb_array_elements(%(rows)s::jsonb) AS e;

-- name: claim_jobs_unlimited
-- claim_jobs leaving out the limited kinds and queues (JSON arrays %(flow_kinds)s and
-- %(flow_queues)s), whose jobs flow_claim_ids leases; used only while limits exist, after
-- the limited claim, for the places the unlimited jobs kept in claim order (%(limit)s).
WITH due AS MATERIALIZED (
    SELECT id FROM mf_jobs
    WHERE state = 'Pending' AND available_at IS NOT NULL AND available_at <= %(now)s
      AND queue NOT IN (SELECT queue FROM mf_paused_queues)
      AND kind NOT IN (SELECT jsonb_array_elements_text(%(flow_kinds)s::jsonb))
      AND queue NOT IN (SELECT jsonb_array_elements_text(%(flow_queues)s::jsonb))
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

-- name: claim_jobs_in_queues_unlimited
-- claim_jobs_in_queues leaving out the limited kinds (a limited queue is not asked).
WITH due AS MATERIALIZED (
    SELECT picked.id
    FROM (SELECT DISTINCT jsonb_array_elements_text(%(queues)s::jsonb)
          EXCEPT SELECT queue FROM mf_paused_queues) AS wanted (queue)
    CROSS JOIN LATERAL (
        SELECT id, priority, available_at FROM mf_jobs
        WHERE queue = wanted.queue
          AND state = 'Pending' AND available_at IS NOT NULL AND available_at <= %(now)s
          AND kind NOT IN (SELECT jsonb_array_elements_text(%(flow_kinds)s::jsonb))
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
