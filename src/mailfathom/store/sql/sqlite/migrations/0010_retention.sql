-- Retention: old terminal rows are compacted in place, never moved and never forgotten.
-- A compacted job keeps its id, kind, queue, state, idempotency key (so a duplicate is
-- still refused), attempt count, failure and times; its payload becomes {} and its
-- attempts keep one summary line each (no traceback). A compacted email keeps its
-- envelope, Message-ID, stage, per-recipient replies and failure; its bytes become empty.
-- compacted_at says when; the CHECKs below hold it to that. (They are unnamed: SQLite
-- would report a later unnamed table CHECK that fails under the last name it read.)
ALTER TABLE mf_jobs ADD COLUMN compacted_at TEXT
    -- only a terminal row is compacted, and a compacted row stays terminal (so a
    -- compacted dead letter can never be requeued: its payload is gone)
    CHECK (compacted_at IS NULL OR state IN ('Succeeded', 'DeadLettered', 'Dropped'))
    -- a compacted row has given up its payload
    CHECK (compacted_at IS NULL OR payload = '{}');

-- The pruner's work list: terminal rows not yet compacted, oldest finished first.
CREATE INDEX mf_jobs_compactable ON mf_jobs (state, finished_at)
    WHERE compacted_at IS NULL AND finished_at IS NOT NULL;

-- Once compacted, always compacted (the payload cannot come back).
CREATE TRIGGER mf_jobs_compaction_kept BEFORE UPDATE OF compacted_at ON mf_jobs
WHEN OLD.compacted_at IS NOT NULL AND (NEW.compacted_at IS NULL OR NEW.compacted_at <> OLD.compacted_at)
BEGIN
    SELECT RAISE(ABORT, 'a compacted job stays compacted');
END;

ALTER TABLE mf_outbox ADD COLUMN compacted_at TEXT
    CHECK (compacted_at IS NULL OR stage IN ('Sent', 'Refused', 'Cancelled'))
    -- the bytes are empty exactly when the record is compacted (record never stores none)
    CHECK ((compacted_at IS NOT NULL) = (length(message) = 0));

CREATE INDEX mf_outbox_compactable ON mf_outbox (stage, finished_at)
    WHERE compacted_at IS NULL AND finished_at IS NOT NULL;

CREATE TRIGGER mf_outbox_compaction_kept BEFORE UPDATE OF compacted_at ON mf_outbox
WHEN OLD.compacted_at IS NOT NULL AND (NEW.compacted_at IS NULL OR NEW.compacted_at <> OLD.compacted_at)
BEGIN
    SELECT RAISE(ABORT, 'a compacted email stays compacted');
END;

-- One row: who prunes now (a lease, so one worker at a time across the fleet), and what
-- the last pass did (for the console).
CREATE TABLE mf_pruner (
    id               INTEGER PRIMARY KEY CHECK (id = 1),
    holder           TEXT,
    lease_until      TEXT,
    last_started_at  TEXT,
    last_finished_at TEXT,
    last_report      TEXT    CHECK (last_report IS NULL OR json_type(last_report) = 'object'),
    CHECK ((holder IS NULL) = (lease_until IS NULL))
);
INSERT INTO mf_pruner (id) VALUES (1);

-- Audit events are pruned by age, oldest first.
CREATE INDEX mf_job_events_at ON mf_job_events (at);
CREATE INDEX mf_outbox_events_at ON mf_outbox_events (at);
