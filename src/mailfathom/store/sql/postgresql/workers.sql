-- Named queries for the worker registry (PostgreSQL).

-- name: upsert_worker
-- Registers a worker, or refreshes its heartbeat when it is registered already.
-- The heartbeat is never written before started_at (the CHECK): a clock stepped back
-- since the worker started records started_at until it has caught up again.
INSERT INTO mf_workers (id, host, pid, queues, kinds, concurrency, lease_seconds, started_at,
                        last_heartbeat_at)
VALUES (%(id)s, %(host)s, %(pid)s, %(queues)s::jsonb, %(kinds)s::jsonb, %(concurrency)s,
        %(lease_seconds)s, %(started_at)s,
        GREATEST(%(now)s, %(started_at)s))
ON CONFLICT (id) DO UPDATE
SET last_heartbeat_at = GREATEST(excluded.last_heartbeat_at, mf_workers.started_at);

-- name: delete_worker
DELETE FROM mf_workers WHERE id = %(id)s;

-- name: list_workers
SELECT * FROM mf_workers ORDER BY started_at, id;

-- name: prune_workers
-- Forgets workers silent since before %(before)s (long dead; their jobs were reclaimed).
DELETE FROM mf_workers WHERE last_heartbeat_at < %(before)s;
