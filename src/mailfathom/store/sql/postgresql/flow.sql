-- Flow control (PostgreSQL): the limit definitions, the claim of limited jobs, the starts log.
-- Limited claims are serialised fleet-wide by flow_lock (a transaction-scoped advisory
-- lock), so two claimers never both see a free slot; unlimited claims never take it.
-- `now` always comes from the injected clock; rate windows alone are judged on the
-- database's clock (flow_clock), the one clock every claimer shares.
-- Only what differs from common/flow.sql: each block overrides the common one of
-- its name (`-- dialect-only`: a statement the other dialect does without).

-- name: flow_clock
-- The database's clock, which every rate window is judged on (read under flow_lock, so
-- the starts of the claims before are stamped no later): the claimers' clocks may
-- disagree, one clock measures every window.
SELECT clock_timestamp() AS now;

-- name: flow_delete_limits
-- Every row of one kind or queue whose name is not in the JSON array :keep.
DELETE FROM mf_flow_limits
WHERE scope = :scope AND target = :target
  AND name NOT IN (SELECT jsonb_array_elements_text(:keep::jsonb));

-- name: flow_set_keys
-- Sets the limit key of just-inserted jobs: :keys is a JSON array of [id, key] pairs.
UPDATE mf_jobs SET limit_key = k.key
FROM (SELECT (e ->> 0)::bigint AS id, e ->> 1 AS key
      FROM jsonb_array_elements(:keys::jsonb) AS e) AS k
WHERE mf_jobs.id = k.id;

-- name: flow_running
-- Claimed jobs of the limited kinds and queues, per kind, queue and key (the running set is
-- small: it is walked through the mf_jobs_leases partial index).
SELECT kind, queue, limit_key, count(*) AS n FROM mf_jobs
WHERE state = 'Claimed' AND lease_expires_at IS NOT NULL
  AND (kind IN (SELECT jsonb_array_elements_text(:kinds::jsonb))
       OR queue IN (SELECT jsonb_array_elements_text(:queues::jsonb)))
GROUP BY kind, queue, limit_key;

-- name: flow_starts_keys
-- Starts per key in the window (after :since), for every key (:keys NULL) or some.
SELECT limit_key, count(*) AS n FROM mf_flow_starts
WHERE limit_name = :name AND limit_key <> '' AND started_at > :since
  AND (:keys::jsonb IS NULL
       OR limit_key IN (SELECT jsonb_array_elements_text(:keys::jsonb)))
GROUP BY limit_key;

-- name: flow_candidates
-- Due jobs in claim order, limited (of the limited kinds and queues) or not: one order for
-- both, so a limit never reorders what it lets through. Leaves out jobs under a limit
-- that is used up (:blocked_* come from the counts just read), so a busy key or kind
-- never hides the jobs behind it. At most :scan rows; the store picks among them.
-- Walks the claim-order index and stops at :scan (plan_claims keeps it from sorting).
SELECT id, kind, queue, limit_key,
       (kind IN (SELECT jsonb_array_elements_text(:flow_kinds::jsonb))
        OR queue IN (SELECT jsonb_array_elements_text(:flow_queues::jsonb))) AS limited
FROM mf_jobs
WHERE state = 'Pending' AND available_at IS NOT NULL AND available_at <= :now
  AND queue NOT IN (SELECT queue FROM mf_paused_queues)
  AND (:queues::jsonb IS NULL
       OR queue IN (SELECT jsonb_array_elements_text(:queues::jsonb)))
  AND (:kinds::jsonb IS NULL OR kind IN (SELECT jsonb_array_elements_text(:kinds::jsonb)))
  AND kind NOT IN (SELECT jsonb_array_elements_text(:blocked_kinds::jsonb))
  AND queue NOT IN (SELECT jsonb_array_elements_text(:blocked_queues::jsonb))
  AND 'kind:' || kind || '|' || coalesce(limit_key, '')
      NOT IN (SELECT jsonb_array_elements_text(:blocked_keys::jsonb))
  AND 'queue:' || queue || '|' || coalesce(limit_key, '')
      NOT IN (SELECT jsonb_array_elements_text(:blocked_keys::jsonb))
ORDER BY priority DESC, available_at, id
LIMIT :scan;

-- name: flow_waiting
-- Due jobs held back by a used-up limit (the console's "waiting on it"), oldest claim first.
SELECT id, kind, queue, limit_key FROM mf_jobs
WHERE state = 'Pending' AND available_at IS NOT NULL AND available_at <= :now
  AND (kind IN (SELECT jsonb_array_elements_text(:blocked_kinds::jsonb))
       OR queue IN (SELECT jsonb_array_elements_text(:blocked_queues::jsonb))
       OR 'kind:' || kind || '|' || coalesce(limit_key, '')
          IN (SELECT jsonb_array_elements_text(:blocked_keys::jsonb))
       OR 'queue:' || queue || '|' || coalesce(limit_key, '')
          IN (SELECT jsonb_array_elements_text(:blocked_keys::jsonb)))
ORDER BY priority DESC, available_at, id
LIMIT :scan;

-- name: flow_claim_ids
-- Leases the picked jobs (JSON array :ids) to :owner, each attempt counted, if still
-- due (a row another transaction holds is skipped, never waited for).
WITH picked AS MATERIALIZED (
    SELECT id FROM mf_jobs
    WHERE id IN (SELECT (jsonb_array_elements_text(:ids::jsonb))::bigint)
      AND state = 'Pending' AND available_at IS NOT NULL AND available_at <= :now
    FOR UPDATE SKIP LOCKED
)
UPDATE mf_jobs
SET state = 'Claimed', lease_owner = :owner, lease_expires_at = :lease_until,
    claimed_by = :owner, claimed_at = :now, attempts = attempts + 1, abort_reason = NULL
FROM picked
WHERE mf_jobs.id = picked.id
RETURNING mf_jobs.*;

-- name: flow_insert_starts
-- One starts row per [limit name, key, job id] in the JSON array :rows, at :now.
INSERT INTO mf_flow_starts (limit_name, limit_key, started_at, job_id)
SELECT e ->> 0, e ->> 1, :now, (e ->> 2)::bigint
FROM jsonb_array_elements(:rows::jsonb) AS e;

-- name: claim_jobs_unlimited
-- claim_jobs leaving out the limited kinds and queues (JSON arrays :flow_kinds and
-- :flow_queues), whose jobs flow_claim_ids leases; used only while limits exist, after
-- the limited claim, for the places the unlimited jobs kept in claim order (:limit).
WITH due AS MATERIALIZED (
    SELECT id FROM mf_jobs
    WHERE state = 'Pending' AND available_at IS NOT NULL AND available_at <= :now
      AND queue NOT IN (SELECT queue FROM mf_paused_queues)
      AND kind NOT IN (SELECT jsonb_array_elements_text(:flow_kinds::jsonb))
      AND queue NOT IN (SELECT jsonb_array_elements_text(:flow_queues::jsonb))
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

-- name: flow_lock
-- dialect-only
-- Held until the claim's transaction ends: every count read after it includes every
-- limited claim committed before it.
SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.mf_flow'));

-- name: claim_jobs_in_queues_unlimited
-- dialect-only
-- claim_jobs_in_queues leaving out the limited kinds (a limited queue is not asked).
WITH due AS MATERIALIZED (
    SELECT picked.id
    FROM (SELECT DISTINCT jsonb_array_elements_text(:queues::jsonb)
          EXCEPT SELECT queue FROM mf_paused_queues) AS wanted (queue)
    CROSS JOIN LATERAL (
        SELECT id, priority, available_at FROM mf_jobs
        WHERE queue = wanted.queue
          AND state = 'Pending' AND available_at IS NOT NULL AND available_at <= :now
          AND kind NOT IN (SELECT jsonb_array_elements_text(:flow_kinds::jsonb))
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
