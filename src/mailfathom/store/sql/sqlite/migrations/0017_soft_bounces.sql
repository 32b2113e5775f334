-- Soft bounces are kept in the suppression audit: an event with action 'soft_bounce'
-- records the bounce (its address, source and diagnostic) and suppresses nothing.
-- SQLite cannot change a CHECK in place, so the events table is rebuilt (it is small:
-- one row per add, lift and bounce).
CREATE TABLE mf_suppression_events_new (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    address TEXT NOT NULL,
    at      TEXT NOT NULL,
    actor   TEXT NOT NULL CHECK (length(actor) >= 1),
    action  TEXT NOT NULL CHECK (action IN ('add', 'lift', 'soft_bounce')),
    reason  TEXT NOT NULL,
    source  TEXT NOT NULL,
    detail  TEXT
);
INSERT INTO mf_suppression_events_new (id, address, at, actor, action, reason, source, detail)
SELECT id, address, at, actor, action, reason, source, detail FROM mf_suppression_events;
DROP TABLE mf_suppression_events;
ALTER TABLE mf_suppression_events_new RENAME TO mf_suppression_events;
CREATE INDEX mf_suppression_events_address ON mf_suppression_events (address, id);
CREATE INDEX mf_suppression_events_action ON mf_suppression_events (action, id);
