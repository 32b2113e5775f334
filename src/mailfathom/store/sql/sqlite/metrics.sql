-- Named queries behind the database gauges of /metrics (SQLite). Read-only; run at
-- most once per collector interval, however often Prometheus scrapes.
-- Only what differs from common/metrics.sql: each block overrides the common one of
-- its name (`-- dialect-only`: a statement the other dialect does without).

-- name: metrics_oldest_due
-- Per queue, the earliest instant a claimable job became due (walks the claim index).
SELECT queue, min(available_at) AS oldest
FROM mf_jobs INDEXED BY mf_jobs_queue_claimable
WHERE state = 'Pending' AND available_at IS NOT NULL AND available_at <= :now
GROUP BY queue;

-- name: metrics_unhandled_kinds
-- Per kind, the due jobs (Pending, not held, available_at <= :now) of the kinds not in
-- the JSON array :kinds (every kind a live worker handles): what no live worker claims.
-- Reads the partial claim index's due range (the Pending jobs), never the history.
SELECT kind, count(*) AS n
FROM mf_jobs
WHERE state = 'Pending' AND available_at IS NOT NULL AND available_at <= :now
  AND kind NOT IN (SELECT value FROM json_each(:kinds))
GROUP BY kind;
