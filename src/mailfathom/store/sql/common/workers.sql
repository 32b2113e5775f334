-- Named queries for the worker registry.
-- Written once with :name parameters (translated to the driver's style when loaded);
-- a `-- per-dialect` block has no body here: each dialect's file defines it.

-- name: upsert_worker
-- per-dialect

-- name: delete_worker
DELETE FROM mf_workers WHERE id = :id;

-- name: list_workers
SELECT * FROM mf_workers ORDER BY started_at, id;

-- name: prune_workers
-- Forgets workers silent since before :before (long dead; their jobs were reclaimed).
DELETE FROM mf_workers WHERE last_heartbeat_at < :before;
