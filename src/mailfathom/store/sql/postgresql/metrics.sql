-- Named queries behind the database gauges of /metrics (PostgreSQL). Read-only; run at
-- most once per collector interval, however often Prometheus scrapes.
-- Only what differs from common/metrics.sql: each block overrides the common one of
-- its name (`-- dialect-only`: a statement the other dialect does without).

-- name: metrics_oldest_due
-- Per queue, the earliest instant a claimable job became due.
SELECT queue, min(available_at) AS oldest
FROM mf_jobs
WHERE state = 'Pending' AND available_at IS NOT NULL AND available_at <= :now
GROUP BY queue;

-- name: metrics_unhandled_kinds
-- Per kind, the due jobs (Pending, not held, available_at <= :now) of the kinds not in
-- the JSON array :kinds (every kind a live worker handles): what no live worker claims.
-- Reads the Pending jobs only (a partial claim index), never the history.
SELECT kind, count(*) AS n
FROM mf_jobs
WHERE state = 'Pending' AND available_at IS NOT NULL AND available_at <= :now
  AND kind NOT IN (SELECT jsonb_array_elements_text(:kinds::jsonb))
GROUP BY kind;
