-- The suppression list (migration 0016): addresses never sent to again, and their audit.

-- name: add_suppression
-- A new entry; nothing (no row returned) when the address is already suppressed.
INSERT INTO mf_suppressions (address, reason, source, detail, created_at, actor)
VALUES (:address, :reason, :source, :detail, :now, :actor)
ON CONFLICT (address) DO NOTHING
RETURNING *;

-- name: lift_suppression
-- The entry removed; no row returned when the address was not suppressed.
DELETE FROM mf_suppressions WHERE address = :address
RETURNING *;

-- name: insert_suppression_event
INSERT INTO mf_suppression_events (address, at, actor, action, reason, source, detail)
VALUES (:address, :now, :actor, :action, :reason, :source, :detail);

-- name: get_suppression
SELECT * FROM mf_suppressions WHERE address = :address;

-- name: list_suppressions
-- Entries by address, keyset-paginated (after :after), those matching the LIKE :pattern
-- (a search, its wildcards escaped with a backslash) when given.
SELECT * FROM mf_suppressions
WHERE (CAST(:after AS text) IS NULL OR address > CAST(:after AS text))
  AND (CAST(:pattern AS text) IS NULL OR address LIKE CAST(:pattern AS text) ESCAPE '\')
ORDER BY address
LIMIT :limit;

-- name: count_suppressions
-- How many addresses are suppressed, by reason.
SELECT reason, COUNT(*) AS n FROM mf_suppressions GROUP BY reason;

-- name: suppression_events
-- The audit trail of one address, oldest first.
SELECT * FROM mf_suppression_events WHERE address = :address ORDER BY id;

-- name: suppressed_among
-- per-dialect

-- name: count_suppression_events
-- How many audit events there are, by action (add, lift, soft_bounce).
SELECT action, COUNT(*) AS n FROM mf_suppression_events GROUP BY action;

-- name: recent_suppression_events
-- The newest events of one action, newest first, keyset-paginated (before :before_id).
SELECT * FROM mf_suppression_events
WHERE action = :action AND (CAST(:before_id AS bigint) IS NULL OR id < CAST(:before_id AS bigint))
ORDER BY id DESC
LIMIT :limit;

-- name: insert_suppression_receipt
-- Mark a notification applied (migration 0018); no row returned when it already was.
INSERT INTO mf_suppression_receipts (receipt, received_at)
VALUES (:receipt, :now)
ON CONFLICT (receipt) DO NOTHING
RETURNING receipt;
