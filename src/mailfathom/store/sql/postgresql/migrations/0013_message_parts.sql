-- One message, however many records it became: every record split off another one (a
-- recipient domain's part, recipients a server deferred, a record recorded again) names
-- the message's first record as root_id (NULL on that first record itself). And what the
-- message was recorded with, kept on each record so that every record derived from it
-- inherits it: the delivery's priority and queue (NULL: the configured delivery queue).
ALTER TABLE mf_outbox ADD COLUMN root_id BIGINT;
ALTER TABLE mf_outbox ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE mf_outbox ADD COLUMN queue TEXT;
CREATE INDEX mf_outbox_root ON mf_outbox (root_id, id) WHERE root_id IS NOT NULL;
WITH RECURSIVE chain (id, root) AS (
    SELECT id, id FROM mf_outbox WHERE parent_id IS NULL
    UNION ALL
    SELECT o.id, chain.root FROM mf_outbox AS o JOIN chain ON o.parent_id = chain.id
)
UPDATE mf_outbox AS o SET root_id = chain.root
FROM chain WHERE chain.id = o.id AND o.parent_id IS NOT NULL;
UPDATE mf_outbox AS o SET priority = j.priority, queue = j.queue
FROM mf_jobs AS j WHERE j.id = o.job_id;
