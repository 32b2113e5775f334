-- The job queue: jobs, their failed or lost attempts, and the operators' audit trail.
-- Every invariant the database can hold is a CHECK constraint, so a bug fails at the write.
CREATE TABLE mf_jobs (
    id               BIGINT  GENERATED ALWAYS AS IDENTITY (SEQUENCE NAME mf_jobs_id_seq) PRIMARY KEY,
    kind             TEXT    NOT NULL CHECK (length(kind) BETWEEN 1 AND 200),
    queue            TEXT    NOT NULL CHECK (length(queue) BETWEEN 1 AND 100),
    payload          JSONB   NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
    priority         INTEGER NOT NULL DEFAULT 0,
    state            TEXT    NOT NULL
        CHECK (state IN ('Pending', 'Claimed', 'Succeeded', 'DeadLettered', 'Dropped')),
    idempotency_key  TEXT    UNIQUE,
    available_at     TIMESTAMPTZ,              -- NULL while Pending = held until released
    attempts         INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    attempt_base     INTEGER NOT NULL DEFAULT 0 CHECK (attempt_base BETWEEN 0 AND attempts),
    max_attempts     INTEGER NOT NULL CHECK (max_attempts >= 1),
    lease_owner      TEXT,
    lease_expires_at TIMESTAMPTZ,
    claimed_by       TEXT,
    claimed_at       TIMESTAMPTZ,
    failure_class    TEXT    CHECK (failure_class IN ('Permanent', 'Transient')),
    failure_reason   TEXT,
    created_at       TIMESTAMPTZ NOT NULL,
    finished_at      TIMESTAMPTZ,
    -- terminal <=> finished
    CHECK ((state IN ('Succeeded', 'DeadLettered', 'Dropped')) = (finished_at IS NOT NULL)),
    -- Claimed <=> a lease is held
    CHECK ((state = 'Claimed') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CHECK ((lease_owner IS NULL) = (lease_expires_at IS NULL)),
    -- a dead letter always says why
    CHECK (state NOT IN ('DeadLettered', 'Dropped') OR (failure_class IS NOT NULL AND failure_reason IS NOT NULL)),
    -- a claimed job has used an attempt
    CHECK (state <> 'Claimed' OR attempts > attempt_base)
);

-- Claim order: highest priority first, then the earliest due, then the oldest.
CREATE INDEX mf_jobs_claimable ON mf_jobs (priority DESC, available_at, id)
    WHERE state = 'Pending' AND available_at IS NOT NULL;
CREATE INDEX mf_jobs_queue_claimable ON mf_jobs (queue, priority DESC, available_at, id)
    WHERE state = 'Pending' AND available_at IS NOT NULL;
CREATE INDEX mf_jobs_leases ON mf_jobs (lease_expires_at) WHERE state = 'Claimed';
CREATE INDEX mf_jobs_state ON mf_jobs (state, id);
CREATE INDEX mf_jobs_kind ON mf_jobs (kind, id);

-- Attempts that did not succeed (a success lives on the job row itself).
CREATE TABLE mf_job_attempts (
    id            BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id        BIGINT  NOT NULL REFERENCES mf_jobs (id) ON DELETE CASCADE,
    attempt       INTEGER NOT NULL CHECK (attempt >= 1),
    outcome       TEXT    NOT NULL CHECK (outcome IN
        ('Failed', 'ExecutionTimeout', 'ShutdownTimeout', 'LeaseExpired', 'UnknownKind')),
    failure_class TEXT    NOT NULL CHECK (failure_class IN ('Permanent', 'Transient')),
    error_type    TEXT,
    message       TEXT    NOT NULL,
    traceback     TEXT,
    worker        TEXT,
    started_at    TIMESTAMPTZ,
    finished_at   TIMESTAMPTZ NOT NULL,
    UNIQUE (job_id, attempt)
);

-- What operators did: who, when, why, from which state to which.
CREATE TABLE mf_job_events (
    id         BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id     BIGINT  NOT NULL REFERENCES mf_jobs (id) ON DELETE CASCADE,
    at         TIMESTAMPTZ NOT NULL,
    actor      TEXT    NOT NULL CHECK (length(actor) >= 1),
    action     TEXT    NOT NULL,
    from_state TEXT    NOT NULL,
    to_state   TEXT    NOT NULL,
    reason     TEXT
);
CREATE INDEX mf_job_events_job ON mf_job_events (job_id, id);

-- Wake idle workers when jobs arrive: delivered at commit, nothing on rollback, nothing
-- when every row of the statement was an existing key. The payload is the schema, so
-- several mailfathom schemas in one database do not wake each other's workers.
CREATE FUNCTION mf_notify_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM mf_inserted_jobs) THEN
        PERFORM pg_notify('mailfathom_jobs', TG_TABLE_SCHEMA);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER mf_jobs_notify AFTER INSERT ON mf_jobs
    REFERENCING NEW TABLE AS mf_inserted_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION mf_notify_jobs();
