-- An operator's abort applies to a Pending job too: it never starts, and is dead-lettered
-- as permanent at once (Pending -> DeadLettered, only with an abort request on the row).
-- Jobs an earlier release returned to Pending despite an abort request are settled the
-- same way: the request is honoured, late.

-- Only the moves the queue makes (store/sql/sqlite/jobs.sql) are possible.
DROP TRIGGER mf_jobs_state_moves;
CREATE TRIGGER mf_jobs_state_moves BEFORE UPDATE OF state ON mf_jobs
WHEN NEW.state <> OLD.state AND NOT (
       (OLD.state = 'Pending' AND NEW.state = 'Claimed')
    OR (OLD.state = 'Pending' AND NEW.state = 'DeadLettered' AND NEW.abort_reason IS NOT NULL)
    OR (OLD.state = 'Claimed' AND NEW.state IN ('Pending', 'Succeeded', 'DeadLettered'))
    OR (OLD.state = 'DeadLettered' AND NEW.state IN ('Pending', 'Dropped')))
BEGIN
    SELECT RAISE(ABORT, 'illegal job state move');
END;

UPDATE mf_jobs
SET state = 'DeadLettered', finished_at = coalesce(available_at, created_at),
    failure_class = 'Permanent', failure_reason = abort_reason || ' (before it started)'
WHERE state = 'Pending' AND abort_reason IS NOT NULL;
