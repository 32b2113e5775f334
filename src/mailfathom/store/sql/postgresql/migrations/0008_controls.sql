-- Operator controls (issue 13): abort requests, snoozes, paused queues with their audit
-- trail, the Aborted and Snoozed attempt outcomes, and an expiry on outgoing email.

-- Set by an operator's abort on a Claimed job: the text becomes the dead letter's reason.
-- The worker learns of it through its lease renewal; a reaper dead-letters a lease that
-- expired with one. A claim clears it.
ALTER TABLE mf_jobs ADD COLUMN abort_reason TEXT;
-- Times a handler snoozed the job (raise Snooze): capped by the snooze_limit setting.
ALTER TABLE mf_jobs ADD COLUMN snoozes INTEGER NOT NULL DEFAULT 0 CHECK (snoozes >= 0);

ALTER TABLE mf_job_attempts DROP CONSTRAINT mf_job_attempts_outcome_check;
ALTER TABLE mf_job_attempts ADD CONSTRAINT mf_job_attempts_outcome_check CHECK (outcome IN
    ('Failed', 'ExecutionTimeout', 'ShutdownTimeout', 'LeaseExpired', 'UnknownKind',
     'Aborted', 'Snoozed'));

-- Queues no worker claims from, fleet-wide, until resumed. Enqueueing goes on.
CREATE TABLE mf_paused_queues (
    queue     TEXT NOT NULL PRIMARY KEY CHECK (length(queue) BETWEEN 1 AND 100),
    paused_at TIMESTAMPTZ NOT NULL,
    actor     TEXT NOT NULL CHECK (length(actor) >= 1),
    reason    TEXT
);

-- Who paused or resumed which queue, when and why.
CREATE TABLE mf_queue_events (
    id     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue  TEXT NOT NULL,
    at     TIMESTAMPTZ NOT NULL,
    actor  TEXT NOT NULL CHECK (length(actor) >= 1),
    action TEXT NOT NULL CHECK (action IN ('pause', 'resume')),
    reason TEXT
);
CREATE INDEX mf_queue_events_queue ON mf_queue_events (queue, id);

-- After this instant a message not yet transmitted is Refused ("expired").
ALTER TABLE mf_outbox ADD COLUMN expires_at TIMESTAMPTZ;
