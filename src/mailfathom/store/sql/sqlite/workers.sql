-- Named queries for the worker registry (SQLite).

-- name: upsert_worker
-- Registers a worker, or refreshes its heartbeat when it is registered already.
INSERT INTO mf_workers (id, host, pid, queues, kinds, concurrency, lease_seconds, started_at,
                        last_heartbeat_at)
VALUES (:id, :host, :pid, :queues, :kinds, :concurrency, :lease_seconds, :started_at, :now)
ON CONFLICT (id) DO UPDATE SET last_heartbeat_at = excluded.last_heartbeat_at;

-- name: delete_worker
DELETE FROM mf_workers WHERE id = :id;

-- name: list_workers
SELECT * FROM mf_workers ORDER BY started_at, id;

-- name: prune_workers
-- Forgets workers silent since before :before (long dead; their jobs were reclaimed).
DELETE FROM mf_workers WHERE last_heartbeat_at < :before;
