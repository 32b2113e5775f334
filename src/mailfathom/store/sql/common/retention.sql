-- Named queries for retention. Values are bound; `now` and every cutoff come
-- from the injected clock. Each batch is one short transaction of at most :limit rows.
-- The job filter, shared by every job block: terminal rows of :state not yet compacted,
-- finished before :cutoff, of :kind (NULL: any kind not in the JSON array
-- :except_kinds), and with a key or not as :only says ('all', 'keyless', 'keyed').
-- Written once with :name parameters (translated to the driver's style when loaded);
-- a `-- per-dialect` block has no body here: each dialect's file defines it.

-- name: acquire_pruner
-- Takes the one pruner lease unless another holder's lease is still live (it counts as
-- expired only a clock-skew margin after its end). Returns the row when taken.
UPDATE mf_pruner SET holder = :holder, lease_until = :lease_until, last_started_at = :now
WHERE id = 1 AND (holder IS NULL OR holder = :holder OR lease_until <= :lease_cutoff)
RETURNING id;

-- name: renew_pruner
UPDATE mf_pruner SET lease_until = :lease_until WHERE id = 1 AND holder = :holder
RETURNING id;

-- name: finish_pruner
-- per-dialect

-- name: pruner_state
SELECT holder, lease_until, last_started_at, last_finished_at, last_report
FROM mf_pruner WHERE id = 1;

-- name: claims_waiting
-- per-dialect

-- name: count_prunable_jobs
-- per-dialect

-- name: compact_jobs
-- per-dialect

-- name: compact_attempts
-- per-dialect

-- name: delete_jobs
-- per-dialect

-- name: count_prunable_emails
-- per-dialect

-- name: compact_emails
-- per-dialect

-- name: delete_emails
-- per-dialect

-- name: count_prunable_job_events
-- per-dialect

-- name: compact_job_events
-- per-dialect

-- name: count_prunable_email_events
-- per-dialect

-- name: compact_email_events
-- per-dialect

-- name: count_jobs_compacted
-- Rows per state, and how many of them are compacted.
SELECT state, count(*) AS n, count(compacted_at) AS compacted FROM mf_jobs GROUP BY state;

-- name: count_emails_compacted
SELECT stage AS state, count(*) AS n, count(compacted_at) AS compacted
FROM mf_outbox GROUP BY stage;

-- name: count_expire_emails
-- How many Recorded records are past their expiry with no body ever out (expire_emails).
SELECT count(*) AS n FROM mf_outbox
WHERE stage = 'Recorded' AND expires_at IS NOT NULL AND expires_at <= :cutoff
  AND body_transmissions = 0;

-- name: expire_emails
-- per-dialect
