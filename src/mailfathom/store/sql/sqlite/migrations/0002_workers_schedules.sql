-- The worker registry and the recurring schedules.

-- Every running worker, refreshed by its heartbeat. A worker whose heartbeat is
-- older than its lease is dead: its jobs are claimable again.
CREATE TABLE mf_workers (
    id                TEXT    PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 200),
    host              TEXT    NOT NULL,
    pid               INTEGER NOT NULL CHECK (pid >= 0),
    queues            TEXT    CHECK (queues IS NULL OR (json_valid(queues) AND json_type(queues) = 'array')),
    kinds             TEXT    NOT NULL CHECK (json_valid(kinds) AND json_type(kinds) = 'array'),
    concurrency       INTEGER NOT NULL CHECK (concurrency >= 1),
    lease_seconds     REAL    NOT NULL CHECK (lease_seconds > 0),
    started_at        TEXT    NOT NULL,
    last_heartbeat_at TEXT    NOT NULL CHECK (last_heartbeat_at >= started_at)
);
CREATE INDEX mf_workers_heartbeat ON mf_workers (last_heartbeat_at);

-- Recurring schedules. Each tick is enqueued with the idempotency key
-- schedule:<name>:<tick>, and last_tick only moves forward, so any number of
-- workers enqueue each tick once. Ticks at or before not_before never run.
CREATE TABLE mf_schedules (
    name         TEXT    PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 200),
    cron         TEXT    NOT NULL CHECK (length(cron) BETWEEN 1 AND 200),
    timezone     TEXT    NOT NULL CHECK (length(timezone) BETWEEN 1 AND 100),
    kind         TEXT    NOT NULL CHECK (length(kind) BETWEEN 1 AND 200),
    queue        TEXT    NOT NULL CHECK (length(queue) BETWEEN 1 AND 100),
    payload      TEXT    NOT NULL CHECK (json_valid(payload) AND json_type(payload) = 'object'),
    paused       INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    paused_by    TEXT,
    paused_at    TEXT,
    pause_reason TEXT,
    not_before   TEXT    NOT NULL,
    last_tick    TEXT,
    last_job_id  INTEGER REFERENCES mf_jobs (id) ON DELETE SET NULL,
    created_at   TEXT    NOT NULL,
    updated_at   TEXT    NOT NULL,
    -- paused <=> who paused it and when are known
    CHECK ((paused = 1) = (paused_by IS NOT NULL AND paused_at IS NOT NULL))
);
