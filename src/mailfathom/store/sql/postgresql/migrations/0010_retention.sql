-- Retention: old terminal rows are compacted in place, never moved and never forgotten.
-- A compacted job keeps its id, kind, queue, state, idempotency key (so a duplicate is
-- still refused), attempt count, failure and times; its payload becomes {} and its
-- attempts keep one summary line each (no traceback). A compacted email keeps its
-- envelope, Message-ID, stage, per-recipient replies and failure; its bytes become empty.
-- compacted_at says when; the CHECKs below hold it to that.
ALTER TABLE mf_jobs ADD COLUMN compacted_at TIMESTAMPTZ,
    -- only a terminal row is compacted, and a compacted row stays terminal (so a
    -- compacted dead letter can never be requeued: its payload is gone)
    ADD CONSTRAINT mf_jobs_compacted_terminal
        CHECK (compacted_at IS NULL OR state IN ('Succeeded', 'DeadLettered', 'Dropped')),
    -- a compacted row has given up its payload
    ADD CONSTRAINT mf_jobs_compacted_payload CHECK (compacted_at IS NULL OR payload::text = '{}');

-- The pruner's work list: terminal rows not yet compacted, oldest finished first.
CREATE INDEX mf_jobs_compactable ON mf_jobs (state, finished_at)
    WHERE compacted_at IS NULL AND finished_at IS NOT NULL;

-- Once compacted, always compacted (the payload cannot come back).
CREATE FUNCTION mf_jobs_compaction_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.compacted_at IS NOT NULL AND NEW.compacted_at IS DISTINCT FROM OLD.compacted_at THEN
        RAISE EXCEPTION 'a compacted job stays compacted' USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER mf_jobs_compaction_kept BEFORE UPDATE OF compacted_at ON mf_jobs
    FOR EACH ROW EXECUTE FUNCTION mf_jobs_compaction_kept();

ALTER TABLE mf_outbox ADD COLUMN compacted_at TIMESTAMPTZ,
    ADD CONSTRAINT mf_outbox_compacted_final
        CHECK (compacted_at IS NULL OR stage IN ('Sent', 'Refused', 'Cancelled')),
    -- the bytes are empty exactly when the record is compacted (record never stores none)
    ADD CONSTRAINT mf_outbox_compacted_message
        CHECK ((compacted_at IS NOT NULL) = (octet_length(message) = 0));

CREATE INDEX mf_outbox_compactable ON mf_outbox (stage, finished_at)
    WHERE compacted_at IS NULL AND finished_at IS NOT NULL;

CREATE FUNCTION mf_outbox_compaction_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.compacted_at IS NOT NULL AND NEW.compacted_at IS DISTINCT FROM OLD.compacted_at THEN
        RAISE EXCEPTION 'a compacted email stays compacted' USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER mf_outbox_compaction_kept BEFORE UPDATE OF compacted_at ON mf_outbox
    FOR EACH ROW EXECUTE FUNCTION mf_outbox_compaction_kept();

-- One row: who prunes now (a lease, so one worker at a time across the fleet; every
-- pruning transaction also holds an advisory lock), and what the last pass did.
CREATE TABLE mf_pruner (
    id               INTEGER PRIMARY KEY CHECK (id = 1),
    holder           TEXT,
    lease_until      TIMESTAMPTZ,
    last_started_at  TIMESTAMPTZ,
    last_finished_at TIMESTAMPTZ,
    last_report      JSONB   CHECK (last_report IS NULL OR jsonb_typeof(last_report) = 'object'),
    CHECK ((holder IS NULL) = (lease_until IS NULL))
);
INSERT INTO mf_pruner (id) VALUES (1);

-- Audit events are pruned by age, oldest first.
CREATE INDEX mf_job_events_at ON mf_job_events (at);
CREATE INDEX mf_outbox_events_at ON mf_outbox_events (at);
