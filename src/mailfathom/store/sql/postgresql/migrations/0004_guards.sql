-- Guards the job queue's state machine in the database, and refuses a Recorded email
-- whose delivery job ended without delivering it (however it ended), so that no
-- record waits forever for a job that will never run.

-- Only the moves the queue makes (store/sql/postgresql/jobs.sql) are possible.
CREATE FUNCTION mf_jobs_state_moves() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state <> OLD.state AND NOT (
           (OLD.state = 'Pending' AND NEW.state = 'Claimed')
        OR (OLD.state = 'Claimed' AND NEW.state IN ('Pending', 'Succeeded', 'DeadLettered'))
        OR (OLD.state = 'DeadLettered' AND NEW.state IN ('Pending', 'Dropped'))) THEN
        RAISE EXCEPTION 'illegal job state move from % to %', OLD.state, NEW.state
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER mf_jobs_state_moves BEFORE UPDATE OF state ON mf_jobs
    FOR EACH ROW EXECUTE FUNCTION mf_jobs_state_moves();

-- A delivery job that dead-letters (lease lost or shutdown on its last attempt, a
-- failure outside the handler) or is dropped leaves its Recorded email Refused, as the
-- deliverer does itself when attempts run out. Records past Recorded are left alone:
-- TransmissionBegun is an unknown outcome for an operator to resolve.
CREATE FUNCTION mf_jobs_refuse_stranded_email() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE mf_outbox
    SET stage = 'Refused', finished_at = NEW.finished_at,
        reason = 'delivery job ' || NEW.id
                 || CASE NEW.state WHEN 'Dropped' THEN ' dropped' ELSE ' dead-lettered' END
                 || ': ' || NEW.failure_reason
    WHERE job_id = NEW.id AND stage = 'Recorded';
    RETURN NULL;
END $$;
CREATE TRIGGER mf_jobs_refuse_stranded_email AFTER UPDATE OF state ON mf_jobs
    FOR EACH ROW
    WHEN (NEW.state IN ('DeadLettered', 'Dropped') AND NEW.state <> OLD.state
          AND NEW.kind = 'mailfathom.deliver')
    EXECUTE FUNCTION mf_jobs_refuse_stranded_email();
