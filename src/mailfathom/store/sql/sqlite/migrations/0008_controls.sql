-- Operator controls (issue 13): abort requests, snoozes, paused queues with their audit
-- trail, the Aborted and Snoozed attempt outcomes, and an expiry on outgoing email.

-- Set by an operator's abort on a Claimed job: the text becomes the dead letter's reason.
-- The worker learns of it through its lease renewal; a reaper dead-letters a lease that
-- expired with one. A claim clears it.
ALTER TABLE mf_jobs ADD COLUMN abort_reason TEXT;
-- Times a handler snoozed the job (raise Snooze): capped by the snooze_limit setting.
ALTER TABLE mf_jobs ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0 CHECK (snoozes >= 0);

-- SQLite cannot change a CHECK in place: the attempts table is rebuilt with the two new
-- outcomes. Nothing references it, so the copy keeps every row and id.
CREATE TABLE mf_job_attempts_new (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id        INTEGER NOT NULL REFERENCES mf_jobs (id) ON DELETE CASCADE,
    attempt       INTEGER NOT NULL CHECK (attempt >= 1),
    outcome       TEXT    NOT NULL CHECK (outcome IN
        ('Failed', 'ExecutionTimeout', 'ShutdownTimeout', 'LeaseExpired', 'UnknownKind',
         'Aborted', 'Snoozed')),
    failure_class TEXT    NOT NULL CHECK (failure_class IN ('Permanent', 'Transient')),
    error_type    TEXT,
    message       TEXT    NOT NULL,
    traceback     TEXT,
    worker        TEXT,
    started_at    TEXT,
    finished_at   TEXT    NOT NULL,
    UNIQUE (job_id, attempt)
);
INSERT INTO mf_job_attempts_new SELECT * FROM mf_job_attempts;
DROP TABLE mf_job_attempts;
ALTER TABLE mf_job_attempts_new RENAME TO mf_job_attempts;

-- Queues no worker claims from, fleet-wide, until resumed. Enqueueing goes on.
CREATE TABLE mf_paused_queues (
    queue     TEXT NOT NULL PRIMARY KEY CHECK (length(queue) BETWEEN 1 AND 100),
    paused_at TEXT NOT NULL,
    actor     TEXT NOT NULL CHECK (length(actor) >= 1),
    reason    TEXT
);

-- Who paused or resumed which queue, when and why.
CREATE TABLE mf_queue_events (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    queue  TEXT NOT NULL,
    at     TEXT NOT NULL,
    actor  TEXT NOT NULL CHECK (length(actor) >= 1),
    action TEXT NOT NULL CHECK (action IN ('pause', 'resume')),
    reason TEXT
);
CREATE INDEX mf_queue_events_queue ON mf_queue_events (queue, id);

-- After this instant a message not yet transmitted is Refused ("expired").
ALTER TABLE mf_outbox ADD COLUMN expires_at TEXT;
