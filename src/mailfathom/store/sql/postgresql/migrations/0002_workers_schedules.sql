-- The worker registry and the recurring schedules.

-- Every running worker, refreshed by its heartbeat. A worker whose heartbeat is
-- older than its lease is dead: its jobs are claimable again.
CREATE TABLE mf_workers (
    id                TEXT    PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 200),
    host              TEXT    NOT NULL,
    pid               INTEGER NOT NULL CHECK (pid >= 0),
    queues            JSONB   CHECK (queues IS NULL OR jsonb_typeof(queues) = 'array'),
    kinds             JSONB   NOT NULL CHECK (jsonb_typeof(kinds) = 'array'),
    concurrency       INTEGER NOT NULL CHECK (concurrency >= 1),
    lease_seconds     DOUBLE PRECISION NOT NULL CHECK (lease_seconds > 0),
    started_at        TIMESTAMPTZ NOT NULL,
    last_heartbeat_at TIMESTAMPTZ NOT NULL CHECK (last_heartbeat_at >= started_at)
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
    payload      JSONB   NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
    paused       BOOLEAN NOT NULL DEFAULT FALSE,
    paused_by    TEXT,
    paused_at    TIMESTAMPTZ,
    pause_reason TEXT,
    not_before   TIMESTAMPTZ NOT NULL,
    last_tick    TIMESTAMPTZ,
    last_job_id  BIGINT  REFERENCES mf_jobs (id) ON DELETE SET NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL,
    -- paused <=> who paused it and when are known
    CHECK (paused = (paused_by IS NOT NULL AND paused_at IS NOT NULL))
);
