-- The web console's session secret and its live sessions (see docs/console.md, Security).
--
-- mf_console_secrets holds the random key that signs session cookies, so every console
-- process and every restart agrees on it. token_fingerprint is an HMAC of the console
-- token under that key: a console started with another token sees the mismatch and
-- rotates the key (ending every session). The key is random, never derived from the
-- token, so a cookie is no oracle for guessing the token.
CREATE TABLE mf_console_secrets (
    name              TEXT PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 100),
    secret            TEXT NOT NULL CHECK (length(secret) >= 32),
    token_fingerprint TEXT NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL
);

-- One row per logged-in browser session; id is the SHA-256 of the session id in the
-- cookie. A request is authenticated only while its row exists, was created less than
-- the absolute lifetime ago and was seen less than the idle timeout ago. Logout deletes
-- the row, so a copy of the cookie is worthless afterwards.
CREATE TABLE mf_console_sessions (
    id           TEXT PRIMARY KEY CHECK (length(id) = 64),
    operator     TEXT NOT NULL CHECK (length(operator) <= 200),  -- "" when none was given
    created_at   TIMESTAMPTZ NOT NULL,
    last_seen_at TIMESTAMPTZ NOT NULL CHECK (last_seen_at >= created_at)
);
CREATE INDEX mf_console_sessions_seen ON mf_console_sessions (last_seen_at);
