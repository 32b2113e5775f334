-- Named queries behind the database gauges of /metrics. Read-only; run at
-- most once per collector interval, however often Prometheus scrapes.
-- Written once with :name parameters (translated to the driver's style when loaded);
-- a `-- per-dialect` block has no body here: each dialect's file defines it.

-- name: metrics_jobs
-- Live and dead-lettered jobs by state and queue: a range of mf_jobs_state per state,
-- so the cost follows those rows, never the Succeeded history (which only grows).
SELECT state, queue, count(*) AS n
FROM mf_jobs
WHERE state IN ('Pending', 'Claimed', 'DeadLettered')
GROUP BY state, queue;

-- name: metrics_jobs_history
-- Succeeded and Dropped jobs by queue: every such row is read (they only accumulate),
-- so the collector runs this far less often than the others (its history_interval).
SELECT state, queue, count(*) AS n
FROM mf_jobs
WHERE state IN ('Succeeded', 'Dropped')
GROUP BY state, queue;

-- name: metrics_oldest_due
-- per-dialect

-- name: metrics_lease_expiries
-- Attempts lost to an expired lease, per queue, as recorded in the attempt history.
SELECT j.queue AS queue, count(*) AS n
FROM mf_job_attempts AS a JOIN mf_jobs AS j ON j.id = a.job_id
WHERE a.outcome = 'LeaseExpired'
GROUP BY j.queue;

-- name: metrics_migrations
-- The migration versions applied, for the health check.
SELECT version FROM mf_migrations ORDER BY version;

-- name: metrics_ping
-- The cheapest statement that proves the database answers.
SELECT 1 AS one;

-- name: metrics_unhandled_kinds
-- per-dialect
