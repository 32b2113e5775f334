-- Named queries for the worker registry (PostgreSQL).
-- Only what differs from common/workers.sql: each block overrides the common one of
-- its name (`-- dialect-only`: a statement the other dialect does without).

-- name: upsert_worker
-- Registers a worker, or refreshes its heartbeat when it is registered already.
-- The heartbeat is never written before started_at (the CHECK): a clock stepped back
-- since the worker started records started_at until it has caught up again.
INSERT INTO mf_workers (id, host, pid, queues, kinds, concurrency, lease_seconds, started_at,
                        last_heartbeat_at)
VALUES (:id, :host, :pid, :queues::jsonb, :kinds::jsonb, :concurrency,
        :lease_seconds, :started_at,
        GREATEST(:now, :started_at))
ON CONFLICT (id) DO UPDATE
SET last_heartbeat_at = GREATEST(excluded.last_heartbeat_at, mf_workers.started_at);
