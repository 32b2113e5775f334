-- The outbox: outgoing emails frozen at record time, their per-recipient outcomes, and
-- the operators' audit trail. The stage machine is enforced by CHECKs and a trigger, so a
-- bug fails at the write instead of sending a message twice.
CREATE TABLE mf_outbox (
    id                    BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    stage                 TEXT    NOT NULL CHECK (stage IN
        ('Recorded', 'TransmissionBegun', 'Sent', 'Refused', 'Cancelled')),
    idempotency_key       TEXT    UNIQUE,
    parent_id             BIGINT  REFERENCES mf_outbox (id),  -- split off this record
    job_id                BIGINT  REFERENCES mf_jobs (id) ON DELETE SET NULL,
    message_id            TEXT    NOT NULL CHECK (length(message_id) >= 3),
    sender                TEXT    NOT NULL,
    subject               TEXT,
    message               BYTEA   NOT NULL,
    size                  INTEGER NOT NULL,
    smtputf8              BOOLEAN NOT NULL,
    eightbit              BOOLEAN NOT NULL,
    attempts              INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_attempt_at       TIMESTAMPTZ,
    created_at            TIMESTAMPTZ NOT NULL,
    transmission_begun_at TIMESTAMPTZ,
    finished_at           TIMESTAMPTZ,
    reply_code            INTEGER CHECK (reply_code BETWEEN 100 AND 599),
    reply_text            TEXT,
    reason                TEXT,
    CHECK (size = octet_length(message)),
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
CREATE FUNCTION mf_outbox_stage_moves() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.stage <> OLD.stage AND NOT (
           (NEW.stage = 'Recorded' AND OLD.stage = 'TransmissionBegun')
        OR (NEW.stage = 'TransmissionBegun' AND OLD.stage = 'Recorded')
        OR (NEW.stage = 'Sent' AND OLD.stage = 'TransmissionBegun')
        OR (NEW.stage = 'Refused' AND OLD.stage IN ('Recorded', 'TransmissionBegun'))
        OR (NEW.stage = 'Cancelled' AND OLD.stage = 'Recorded')) THEN
        RAISE EXCEPTION 'illegal outgoing-email stage move from % to %', OLD.stage, NEW.stage
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER mf_outbox_stage_moves BEFORE UPDATE OF stage ON mf_outbox
    FOR EACH ROW EXECUTE FUNCTION mf_outbox_stage_moves();

-- Every envelope recipient, with the server's last reply to its RCPT TO.
CREATE TABLE mf_outbox_recipients (
    email_id        BIGINT  NOT NULL REFERENCES mf_outbox (id) ON DELETE CASCADE,
    position        INTEGER NOT NULL CHECK (position >= 0),
    address         TEXT    NOT NULL CHECK (length(address) >= 3),
    reply_code      INTEGER CHECK (reply_code BETWEEN 100 AND 599),
    enhanced_status TEXT,
    reply_text      TEXT,
    replied_at      TIMESTAMPTZ,
    PRIMARY KEY (email_id, position),
    UNIQUE (email_id, address),
    CHECK (reply_code IS NULL OR replied_at IS NOT NULL)
);

-- What operators did to records (cancel, resolve): who, when, why, from which stage to which.
CREATE TABLE mf_outbox_events (
    id         BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email_id   BIGINT  NOT NULL REFERENCES mf_outbox (id) ON DELETE CASCADE,
    at         TIMESTAMPTZ NOT NULL,
    actor      TEXT    NOT NULL CHECK (length(actor) >= 1),
    action     TEXT    NOT NULL,
    from_stage TEXT    NOT NULL,
    to_stage   TEXT    NOT NULL,
    reason     TEXT
);
CREATE INDEX mf_outbox_events_email ON mf_outbox_events (email_id, id);
