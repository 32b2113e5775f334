-- The outbox: outgoing emails frozen at record time, their per-recipient outcomes, and
-- the operators' audit trail. The stage machine is enforced by CHECKs and a trigger, so a
-- bug fails at the write instead of sending a message twice.
CREATE TABLE mf_outbox (
    id                    INTEGER PRIMARY KEY AUTOINCREMENT,
    stage                 TEXT    NOT NULL CHECK (stage IN
        ('Recorded', 'TransmissionBegun', 'Sent', 'Refused', 'Cancelled')),
    idempotency_key       TEXT    UNIQUE,
    parent_id             INTEGER REFERENCES mf_outbox (id),  -- split off this record
    job_id                INTEGER REFERENCES mf_jobs (id) ON DELETE SET NULL,
    message_id            TEXT    NOT NULL CHECK (length(message_id) >= 3),
    sender                TEXT    NOT NULL,
    subject               TEXT,
    message               BLOB    NOT NULL,
    size                  INTEGER NOT NULL,
    smtputf8              INTEGER NOT NULL CHECK (smtputf8 IN (0, 1)),
    eightbit              INTEGER NOT NULL CHECK (eightbit IN (0, 1)),
    attempts              INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_attempt_at       TEXT,
    created_at            TEXT    NOT NULL,
    transmission_begun_at TEXT,
    finished_at           TEXT,
    reply_code            INTEGER CHECK (reply_code BETWEEN 100 AND 599),
    reply_text            TEXT,
    reason                TEXT,
    CHECK (typeof(message) = 'blob' AND size = length(message)),
    -- final <=> finished
    CHECK ((stage IN ('Sent', 'Refused', 'Cancelled')) = (finished_at IS NOT NULL)),
    -- TransmissionBegun and Sent happened after a 354; Recorded and Cancelled owe a fresh start
    CHECK (stage NOT IN ('TransmissionBegun', 'Sent') OR transmission_begun_at IS NOT NULL),
    CHECK (stage NOT IN ('Recorded', 'Cancelled') OR transmission_begun_at IS NULL),
    -- a refusal always says why
    CHECK (stage <> 'Refused' OR reason IS NOT NULL)
);
CREATE INDEX mf_outbox_stage ON mf_outbox (stage, id);
CREATE INDEX mf_outbox_parent ON mf_outbox (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX mf_outbox_job ON mf_outbox (job_id);

-- Only the moves of the stage machine (delivery/stage.py) are possible.
CREATE TRIGGER mf_outbox_stage_moves BEFORE UPDATE OF stage ON mf_outbox
WHEN NEW.stage <> OLD.stage AND NOT (
       (NEW.stage = 'Recorded' AND OLD.stage = 'TransmissionBegun')
    OR (NEW.stage = 'TransmissionBegun' AND OLD.stage = 'Recorded')
    OR (NEW.stage = 'Sent' AND OLD.stage = 'TransmissionBegun')
    OR (NEW.stage = 'Refused' AND OLD.stage IN ('Recorded', 'TransmissionBegun'))
    OR (NEW.stage = 'Cancelled' AND OLD.stage = 'Recorded'))
BEGIN
    SELECT RAISE(ABORT, 'illegal outgoing-email stage move');
END;

-- Every envelope recipient, with the server's last reply to its RCPT TO.
CREATE TABLE mf_outbox_recipients (
    email_id        INTEGER NOT NULL REFERENCES mf_outbox (id) ON DELETE CASCADE,
    position        INTEGER NOT NULL CHECK (position >= 0),
    address         TEXT    NOT NULL CHECK (length(address) >= 3),
    reply_code      INTEGER CHECK (reply_code BETWEEN 100 AND 599),
    enhanced_status TEXT,
    reply_text      TEXT,
    replied_at      TEXT,
    PRIMARY KEY (email_id, position),
    UNIQUE (email_id, address),
    CHECK (reply_code IS NULL OR replied_at IS NOT NULL)
);

-- What operators did to records (cancel, resolve): who, when, why, from which stage to which.
CREATE TABLE mf_outbox_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    email_id   INTEGER NOT NULL REFERENCES mf_outbox (id) ON DELETE CASCADE,
    at         TEXT    NOT NULL,
    actor      TEXT    NOT NULL CHECK (length(actor) >= 1),
    action     TEXT    NOT NULL,
    from_stage TEXT    NOT NULL,
    to_stage   TEXT    NOT NULL,
    reason     TEXT
);
CREATE INDEX mf_outbox_events_email ON mf_outbox_events (email_id, id);
