-- Guards the job queue's state machine in the database, and refuses a Recorded email
-- whose delivery job ended without delivering it (however it ended), so that no
-- record waits forever for a job that will never run.

-- Only the moves the queue makes (store/sql/sqlite/jobs.sql) are possible.
CREATE TRIGGER mf_jobs_state_moves BEFORE UPDATE OF state ON mf_jobs
WHEN NEW.state <> OLD.state AND NOT (
       (OLD.state = 'Pending' AND NEW.state = 'Claimed')
    OR (OLD.state = 'Claimed' AND NEW.state IN ('Pending', 'Succeeded', 'DeadLettered'))
    OR (OLD.state = 'DeadLettered' AND NEW.state IN ('Pending', 'Dropped')))
BEGIN
    SELECT RAISE(ABORT, 'illegal job state move');
END;

-- A delivery job that dead-letters (lease lost or shutdown on its last attempt, a
-- failure outside the handler) or is dropped leaves its Recorded email Refused, as the
-- deliverer does itself when attempts run out. Records past Recorded are left alone:
-- TransmissionBegun is an unknown outcome for an operator to resolve.
CREATE TRIGGER mf_jobs_refuse_stranded_email AFTER UPDATE OF state ON mf_jobs
WHEN NEW.state IN ('DeadLettered', 'Dropped') AND NEW.state <> OLD.state
     AND NEW.kind = 'mailfathom.deliver'
BEGIN
    UPDATE mf_outbox
    SET stage = 'Refused', finished_at = NEW.finished_at,
        reason = 'delivery job ' || NEW.id
                 || CASE NEW.state WHEN 'Dropped' THEN ' dropped' ELSE ' dead-lettered' END
                 || ': ' || NEW.failure_reason
    WHERE job_id = NEW.id AND stage = 'Recorded';
END;
