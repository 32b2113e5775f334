-- Flow control (issue 14): fleet-wide concurrency and rate limits per kind or queue,
-- and per limit key; enforced by the claim (mailfathom/store/flow_store.py).

-- The job's limit key (say its customer or its recipient domain), computed at enqueue by
-- the kind's limit_key function or given by the enqueuer; NULL: no per-key limit applies.
ALTER TABLE mf_jobs ADD COLUMN limit_key text
    CHECK (limit_key IS NULL OR length(limit_key) BETWEEN 1 AND 200);

-- The limits every claimer obeys, written when a worker starts (or mf.limits.sync()).
-- A row with limit_key NULL limits the whole kind or queue (and gives the per-key
-- defaults); a row with a limit_key gives that one key its own per-key values.
-- Windows are in milliseconds.
CREATE TABLE mf_flow_limits (
    name                 TEXT    NOT NULL PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 420),
    scope                TEXT    NOT NULL CHECK (scope IN ('kind', 'queue')),
    target               TEXT    NOT NULL CHECK (length(target) BETWEEN 1 AND 200),
    limit_key            TEXT    CHECK (limit_key IS NULL OR length(limit_key) BETWEEN 1 AND 200),
    max_running          INTEGER CHECK (max_running IS NULL OR max_running >= 1),
    rate_count           INTEGER CHECK (rate_count IS NULL OR rate_count >= 1),
    rate_window_ms       INTEGER CHECK (rate_window_ms IS NULL OR rate_window_ms >= 1),
    max_running_per_key  INTEGER CHECK (max_running_per_key IS NULL OR max_running_per_key >= 1),
    rate_per_key_count   INTEGER CHECK (rate_per_key_count IS NULL OR rate_per_key_count >= 1),
    rate_per_key_window_ms INTEGER
        CHECK (rate_per_key_window_ms IS NULL OR rate_per_key_window_ms >= 1),
    updated_at           TIMESTAMPTZ NOT NULL,
    CHECK ((rate_count IS NULL) = (rate_window_ms IS NULL)),
    CHECK ((rate_per_key_count IS NULL) = (rate_per_key_window_ms IS NULL)),
    -- a key's own row sets per-key values only
    CHECK (limit_key IS NULL OR (max_running IS NULL AND rate_count IS NULL))
);

-- Starts of rate-limited jobs, written in the claim's transaction: one row per limit
-- (and key) a started job falls under; rows older than their window are trimmed.
CREATE TABLE mf_flow_starts (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    limit_name TEXT    NOT NULL,
    limit_key  TEXT    NOT NULL,  -- '' for the whole kind or queue
    started_at TIMESTAMPTZ NOT NULL,
    job_id     BIGINT  NOT NULL
);
CREATE INDEX mf_flow_starts_window ON mf_flow_starts (limit_name, limit_key, started_at);
