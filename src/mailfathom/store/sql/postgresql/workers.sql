-- Named queries for the worker registry (PostgreSQL).

-- name: upsert_worker
-- Registers a worker, or refreshes its heartbeat when it is registered already.
INSERT INTO mf_workers (id, host, pid, queues, kinds, concurrency, lease_seconds, started_at,
                        last_heartbeat_at)
VALUES (%(id)s, %(host)s, %(pid)s, %(queues)s::jsonb, %(kinds)s::jsonb, %(concurrency)s,
        %(lease_seconds)s, %(started_at)s, %(now)s)
ON CONFLICT (id) DO UPDATE SET last_heartbeat_at = excluded.last_heartbeat_at;

-- name: delete_worker
DELETE FROM mf_workers WHERE id = %(id)s;

-- name: list_workers
SELECT * FROM mf_workers ORDER BY started_at, id;

-- name: prune_workers
-- Forgets workers silent since before %(before)s (long dead; their jobs were reclaimed).
DELETE FROM mf_workers WHERE last_heartbeat_at < %(before)s;
