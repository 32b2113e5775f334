-- The suppression list: addresses never sent to again (a hard bounce, a complaint, or an
-- operator's decision), and the audit trail of every entry added and lifted.

-- One row per suppressed address, stored lower-cased (an address is matched whatever
-- its case). A delivery leaves a suppressed recipient out and records why.
CREATE TABLE mf_suppressions (
    address    TEXT NOT NULL PRIMARY KEY
                    CHECK (length(address) BETWEEN 3 AND 320 AND address = lower(address)),
    reason     TEXT NOT NULL CHECK (reason IN ('hard_bounce', 'complaint', 'manual')),
    source     TEXT NOT NULL CHECK (length(source) BETWEEN 1 AND 100),
    detail     TEXT,
    created_at TIMESTAMPTZ NOT NULL,
    actor      TEXT NOT NULL CHECK (length(actor) >= 1)
);

-- Who added or lifted which suppression, when and why.
CREATE TABLE mf_suppression_events (
    id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    address TEXT NOT NULL,
    at      TIMESTAMPTZ NOT NULL,
    actor   TEXT NOT NULL CHECK (length(actor) >= 1),
    action  TEXT NOT NULL CHECK (action IN ('add', 'lift')),
    reason  TEXT NOT NULL,
    source  TEXT NOT NULL,
    detail  TEXT
);
CREATE INDEX mf_suppression_events_address ON mf_suppression_events (address, id);
