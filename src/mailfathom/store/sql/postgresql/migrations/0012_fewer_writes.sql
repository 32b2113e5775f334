-- Fewer writes per job on PostgreSQL: the same guarantees, checked without locking rows.
--
-- A BEFORE ROW UPDATE trigger makes PostgreSQL lock every row an UPDATE touches before
-- it changes it (a WAL record per row, whatever the trigger's column list), so the two
-- guards of mf_jobs become AFTER ROW triggers whose WHEN clause (evaluated in the
-- executor, no function call) picks out exactly the illegal rows; their function only
-- raises. An exception from an AFTER trigger fails the statement just as a BEFORE one
-- did: nothing is written.
DROP TRIGGER mf_jobs_state_moves ON mf_jobs;
DROP FUNCTION mf_jobs_state_moves();
CREATE FUNCTION mf_jobs_state_moves() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'illegal job state move from % to %', OLD.state, NEW.state
        USING ERRCODE = 'check_violation';
END $$;
-- Only the moves the queue makes (store/sql/postgresql/jobs.sql) are possible.
CREATE TRIGGER mf_jobs_state_moves AFTER UPDATE OF state ON mf_jobs
    FOR EACH ROW
    WHEN (NEW.state <> OLD.state AND NOT (
           (OLD.state = 'Pending' AND NEW.state = 'Claimed')
        OR (OLD.state = 'Claimed' AND NEW.state IN ('Pending', 'Succeeded', 'DeadLettered'))
        OR (OLD.state = 'DeadLettered' AND NEW.state IN ('Pending', 'Dropped'))))
    EXECUTE FUNCTION mf_jobs_state_moves();

-- Once compacted, always compacted (the payload cannot come back).
DROP TRIGGER mf_jobs_compaction_kept ON mf_jobs;
DROP FUNCTION mf_jobs_compaction_kept();
CREATE FUNCTION mf_jobs_compaction_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a compacted job stays compacted' USING ERRCODE = 'check_violation';
END $$;
CREATE TRIGGER mf_jobs_compaction_kept AFTER UPDATE OF compacted_at ON mf_jobs
    FOR EACH ROW
    WHEN (OLD.compacted_at IS NOT NULL AND NEW.compacted_at IS DISTINCT FROM OLD.compacted_at)
    EXECUTE FUNCTION mf_jobs_compaction_kept();

-- Room on each page for a job's next versions: a claim and a completion then write the
-- new row version beside the old one (no extra lock record, one page dirtied instead of
-- two), and the old versions are pruned from the page as it fills. Applies to pages
-- written from now on; existing pages keep theirs until rewritten.
ALTER TABLE mf_jobs SET (fillfactor = 70);
