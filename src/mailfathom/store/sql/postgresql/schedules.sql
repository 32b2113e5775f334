-- Named queries for recurring schedules (PostgreSQL).

-- name: upsert_schedule
-- Declares a schedule. An unchanged definition writes nothing; a new cron or time zone
-- starts afresh (ticks before %(now)s never run). Paused state and last_tick are kept.
-- The payload is json, its exact text: a change is a change of that text.
INSERT INTO mf_schedules (name, cron, timezone, kind, queue, payload, paused, not_before,
                          created_at, updated_at)
VALUES (%(name)s, %(cron)s, %(timezone)s, %(kind)s, %(queue)s, %(payload)s::json, FALSE,
        %(now)s, %(now)s, %(now)s)
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

-- name: list_schedules
SELECT * FROM mf_schedules ORDER BY name;

-- name: get_schedule
SELECT * FROM mf_schedules WHERE name = %(name)s;

-- name: pause_schedule
UPDATE mf_schedules
SET paused = TRUE, paused_by = %(actor)s, paused_at = %(now)s, pause_reason = %(reason)s,
    updated_at = %(now)s
WHERE name = %(name)s AND NOT paused
RETURNING *;

-- name: resume_schedule
-- Ticks that fell while paused are skipped: not_before moves to %(now)s.
UPDATE mf_schedules
SET paused = FALSE, paused_by = NULL, paused_at = NULL, pause_reason = NULL,
    not_before = %(now)s, updated_at = %(now)s
WHERE name = %(name)s AND paused
RETURNING *;

-- name: delete_schedule
DELETE FROM mf_schedules WHERE name = %(name)s RETURNING name;

-- name: advance_schedule
-- Claims %(tick)s for the caller: only one transaction can move last_tick past it, and
-- only while the definition the tick was computed from is still the stored one.
UPDATE mf_schedules SET last_tick = %(tick)s
WHERE name = %(name)s AND NOT paused AND cron = %(cron)s AND timezone = %(timezone)s
  AND kind = %(kind)s AND not_before < %(tick)s
  AND (last_tick IS NULL OR last_tick < %(tick)s)
RETURNING kind, queue, payload;

-- name: set_schedule_job
UPDATE mf_schedules SET last_job_id = %(job_id)s WHERE name = %(name)s;
