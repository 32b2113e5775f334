-- Named queries for recurring schedules (PostgreSQL).
-- Only what differs from common/schedules.sql: each block overrides the common one of
-- its name (`-- dialect-only`: a statement the other dialect does without).

-- name: upsert_schedule
-- Declares a schedule. An unchanged definition writes nothing; a new cron or time zone
-- starts afresh (ticks before :now never run). Paused state and last_tick are kept.
-- The payload is json, its exact text: a change is a change of that text.
INSERT INTO mf_schedules (name, cron, timezone, kind, queue, payload, paused, not_before,
                          created_at, updated_at)
VALUES (:name, :cron, :timezone, :kind, :queue, :payload::json, FALSE,
        :now, :now, :now)
ON CONFLICT (name) DO UPDATE
SET cron = excluded.cron, timezone = excluded.timezone, kind = excluded.kind,
    queue = excluded.queue, payload = excluded.payload, updated_at = excluded.updated_at,
    not_before = CASE WHEN mf_schedules.cron <> excluded.cron
                        OR mf_schedules.timezone <> excluded.timezone
                      THEN excluded.not_before ELSE mf_schedules.not_before END
WHERE mf_schedules.cron <> excluded.cron OR mf_schedules.timezone <> excluded.timezone
   OR mf_schedules.kind <> excluded.kind OR mf_schedules.queue <> excluded.queue
   OR mf_schedules.payload::text <> excluded.payload::text
RETURNING name;
