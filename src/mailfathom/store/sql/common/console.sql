-- The web console's session key and sessions (migration 0007).
-- Written once with :name parameters (translated to the driver's style when loaded);
-- a `-- per-dialect` block has no body here: each dialect's file defines it.

-- name: console_secret
SELECT secret, token_fingerprint FROM mf_console_secrets WHERE name = :name;

-- name: console_secret_create
INSERT INTO mf_console_secrets (name, secret, token_fingerprint, created_at)
VALUES (:name, :secret, :fingerprint, :now)
ON CONFLICT (name) DO NOTHING;

-- name: console_secret_rotate
-- Compare-and-swap: only the process that saw the old key replaces it.
UPDATE mf_console_secrets SET secret = :secret, token_fingerprint = :fingerprint, created_at = :now
WHERE name = :name AND secret = :old_secret;

-- name: console_sessions_end_all
DELETE FROM mf_console_sessions;

-- name: console_session_start
INSERT INTO mf_console_sessions (id, operator, created_at, last_seen_at)
VALUES (:id, :operator, :now, :now);

-- name: console_session_get
SELECT operator, created_at, last_seen_at FROM mf_console_sessions WHERE id = :id;

-- name: console_session_touch
UPDATE mf_console_sessions SET last_seen_at = :now WHERE id = :id AND last_seen_at < :now;

-- name: console_session_end
DELETE FROM mf_console_sessions WHERE id = :id;

-- name: console_sessions_expire
DELETE FROM mf_console_sessions WHERE created_at < :born_after OR last_seen_at < :seen_after;
