-- Flow control: the limit definitions, the claim of limited jobs, the starts log.
-- `now` always comes from the injected clock; rate windows alone are judged on the
-- database's clock (flow_clock), the one clock every claimer shares.
-- Written once with :name parameters (translated to the driver's style when loaded);
-- a `-- per-dialect` block has no body here: each dialect's file defines it.

-- name: flow_limits
SELECT * FROM mf_flow_limits ORDER BY name;

-- name: flow_clock
-- per-dialect

-- name: flow_upsert_limit
INSERT INTO mf_flow_limits (name, scope, target, limit_key, max_running, rate_count,
                            rate_window_ms, max_running_per_key, rate_per_key_count,
                            rate_per_key_window_ms, updated_at)
VALUES (:name, :scope, :target, :limit_key, :max_running, :rate_count,
        :rate_window_ms, :max_running_per_key, :rate_per_key_count,
        :rate_per_key_window_ms, :now)
ON CONFLICT (name) DO UPDATE SET
    max_running = excluded.max_running, rate_count = excluded.rate_count,
    rate_window_ms = excluded.rate_window_ms, max_running_per_key = excluded.max_running_per_key,
    rate_per_key_count = excluded.rate_per_key_count,
    rate_per_key_window_ms = excluded.rate_per_key_window_ms, updated_at = excluded.updated_at;

-- name: flow_delete_limits
-- per-dialect

-- name: flow_set_keys
-- per-dialect

-- name: flow_running
-- per-dialect

-- name: flow_trim_starts
-- Starts of one limit that left its longest window (started at or before :cutoff).
DELETE FROM mf_flow_starts WHERE limit_name = :name AND started_at <= :cutoff;

-- name: flow_starts_whole
-- Starts of a whole kind or queue in the window (after :since).
SELECT count(*) AS n FROM mf_flow_starts
WHERE limit_name = :name AND limit_key = '' AND started_at > :since;

-- name: flow_starts_keys
-- per-dialect

-- name: flow_candidates
-- per-dialect

-- name: flow_waiting
-- per-dialect

-- name: flow_claim_ids
-- per-dialect

-- name: flow_insert_starts
-- per-dialect

-- name: claim_jobs_unlimited
-- per-dialect
