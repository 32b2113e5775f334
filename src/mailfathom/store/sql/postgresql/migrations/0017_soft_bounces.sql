-- Soft bounces are kept in the suppression audit: an event with action 'soft_bounce'
-- records the bounce (its address, source and diagnostic) and suppresses nothing.
ALTER TABLE mf_suppression_events DROP CONSTRAINT mf_suppression_events_action_check;
ALTER TABLE mf_suppression_events ADD CONSTRAINT mf_suppression_events_action_check
    CHECK (action IN ('add', 'lift', 'soft_bounce'));
CREATE INDEX mf_suppression_events_action ON mf_suppression_events (action, id);
