-- Flow control (SQLite): the limit definitions, the claim of limited jobs, the starts log.
-- SQLite's write lock serialises claims, so two claimers never both see a free slot.
-- `now` always comes from the injected clock; rate windows alone are judged on the
-- database's clock (flow_clock), the one clock every claimer shares.
-- Only what differs from common/flow.sql: each block overrides the common one of
-- its name (`-- dialect-only`: a statement the other dialect does without).

-- name: flow_clock
-- The database's clock, which every rate window is judged on: the clock of the machine
-- holding the file (every process sharing a SQLite file runs there), as the text
-- time_param writes (microseconds; SQLite tells milliseconds).
SELECT strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000+00:00' AS now;

-- name: flow_delete_limits
-- Every row of one kind or queue whose name is not in the JSON array :keep.
DELETE FROM mf_flow_limits
WHERE scope = :scope AND target = :target AND name NOT IN (SELECT value FROM json_each(:keep));

-- name: flow_set_keys
-- Sets the limit key of just-inserted jobs: :keys is a JSON array of [id, key] pairs.
UPDATE mf_jobs SET limit_key = (SELECT value ->> 1 FROM json_each(:keys) WHERE value ->> 0 = mf_jobs.id)
WHERE id IN (SELECT value ->> 0 FROM json_each(:keys));

-- name: flow_running
-- Claimed jobs of the limited kinds and queues, per kind, queue and key (the running set is
-- small: it is walked through the mf_jobs_leases partial index).
SELECT kind, queue, limit_key, count(*) AS n FROM mf_jobs INDEXED BY mf_jobs_leases
WHERE state = 'Claimed' AND lease_expires_at IS NOT NULL
  AND (kind IN (SELECT value FROM json_each(:kinds))
       OR queue IN (SELECT value FROM json_each(:queues)))
GROUP BY kind, queue, limit_key;

-- name: flow_starts_keys
-- Starts per key in the window (after :since), for every key (:keys NULL) or some keys.
SELECT limit_key, count(*) AS n FROM mf_flow_starts
WHERE limit_name = :name AND limit_key <> '' AND started_at > :since
  AND (:keys IS NULL OR limit_key IN (SELECT value FROM json_each(:keys)))
GROUP BY limit_key;

-- name: flow_candidates
-- Due jobs in claim order, limited (of the limited kinds and queues) or not: one order for
-- both, so a limit never reorders what it lets through. Leaves out jobs under a limit
-- that is used up (:blocked_* come from the counts just read), so a busy key or kind never
-- hides the jobs behind it. At most :scan rows; the store picks among them in order.
-- INDEXED BY: walk the claim-order index and stop at :scan (not sort every pending job).
SELECT id, kind, queue, limit_key,
       (kind IN (SELECT value FROM json_each(:flow_kinds))
        OR queue IN (SELECT value FROM json_each(:flow_queues))) AS limited
FROM mf_jobs INDEXED BY mf_jobs_claimable
WHERE state = 'Pending' AND available_at IS NOT NULL AND available_at <= :now
  AND queue NOT IN (SELECT queue FROM mf_paused_queues)
  AND (:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues)))
  AND (:kinds IS NULL OR kind IN (SELECT value FROM json_each(:kinds)))
  AND kind NOT IN (SELECT value FROM json_each(:blocked_kinds))
  AND queue NOT IN (SELECT value FROM json_each(:blocked_queues))
  AND 'kind:' || kind || '|' || coalesce(limit_key, '')
      NOT IN (SELECT value FROM json_each(:blocked_keys))
  AND 'queue:' || queue || '|' || coalesce(limit_key, '')
      NOT IN (SELECT value FROM json_each(:blocked_keys))
ORDER BY priority DESC, available_at, id
LIMIT :scan;

-- name: flow_waiting
-- Due jobs held back by a used-up limit (the console's "waiting on it"), oldest claim first.
SELECT id, kind, queue, limit_key FROM mf_jobs
WHERE state = 'Pending' AND available_at IS NOT NULL AND available_at <= :now
  AND (kind IN (SELECT value FROM json_each(:blocked_kinds))
       OR queue IN (SELECT value FROM json_each(:blocked_queues))
       OR 'kind:' || kind || '|' || coalesce(limit_key, '')
          IN (SELECT value FROM json_each(:blocked_keys))
       OR 'queue:' || queue || '|' || coalesce(limit_key, '')
          IN (SELECT value FROM json_each(:blocked_keys)))
ORDER BY priority DESC, available_at, id
LIMIT :scan;

-- name: flow_claim_ids
-- Leases the picked jobs (JSON array :ids) to :owner, each attempt counted, if still due.
UPDATE mf_jobs
SET state = 'Claimed', lease_owner = :owner, lease_expires_at = :lease_until,
    claimed_by = :owner, claimed_at = :now, attempts = attempts + 1, abort_reason = NULL
WHERE id IN (SELECT value FROM json_each(:ids))
  AND state = 'Pending' AND available_at IS NOT NULL AND available_at <= :now
RETURNING *;

-- name: flow_insert_starts
-- One starts row per [limit name, key, job id] in the JSON array :rows, at :now.
INSERT INTO mf_flow_starts (limit_name, limit_key, started_at, job_id)
SELECT value ->> 0, value ->> 1, :now, value ->> 2 FROM json_each(:rows);

-- name: claim_jobs_unlimited
-- claim_jobs leaving out the limited kinds and queues (JSON arrays :flow_kinds and
-- :flow_queues), whose jobs flow_claim_ids leases; used only while limits exist, after
-- the limited claim, for the places the unlimited jobs kept in claim order (:limit).
UPDATE mf_jobs
SET state = 'Claimed', lease_owner = :owner, lease_expires_at = :lease_until,
    claimed_by = :owner, claimed_at = :now, attempts = attempts + 1, abort_reason = NULL
WHERE id IN (
    SELECT id FROM mf_jobs INDEXED BY mf_jobs_claimable
    WHERE state = 'Pending' AND available_at IS NOT NULL AND available_at <= :now
      AND queue NOT IN (SELECT queue FROM mf_paused_queues)
      AND kind NOT IN (SELECT value FROM json_each(:flow_kinds))
      AND queue NOT IN (SELECT value FROM json_each(:flow_queues))
      AND (:kinds IS NULL OR kind IN (SELECT value FROM json_each(:kinds)))
    ORDER BY priority DESC, available_at, id
    LIMIT :limit
)
RETURNING *;

-- name: claim_jobs_in_one_queue_unlimited
-- dialect-only
-- claim_jobs_in_one_queue leaving out the limited kinds (a limited queue is not asked).
SELECT * FROM (
    SELECT id, priority, available_at FROM mf_jobs INDEXED BY mf_jobs_queue_claimable
    WHERE queue = :queue_{n} AND state = 'Pending' AND available_at IS NOT NULL
      AND available_at <= :now
      AND NOT EXISTS (SELECT 1 FROM mf_paused_queues WHERE queue = :queue_{n})
      AND kind NOT IN (SELECT value FROM json_each(:flow_kinds))
      AND (:kinds IS NULL OR kind IN (SELECT value FROM json_each(:kinds)))
    ORDER BY priority DESC, available_at, id
    LIMIT :limit
)
