-- Named queries for recurring schedules (SQLite).

-- name: upsert_schedule
-- Declares a schedule. An unchanged definition writes nothing; a new cron or time zone
-- starts afresh (ticks before :now never run). Paused state and last_tick are kept.
INSERT INTO mf_schedules (name, cron, timezone, kind, queue, payload, paused, not_before,
                          created_at, updated_at)
VALUES (:name, :cron, :timezone, :kind, :queue, :payload, 0, :now, :now, :now)
ON CONFLICT (name) DO UPDATE
SET cron = excluded.cron, timezone = excluded.timezone, kind = excluded.kind,
    queue = excluded.queue, payload = excluded.payload, updated_at = excluded.updated_at,
    not_before = CASE WHEN mf_schedules.cron <> excluded.cron
                        OR mf_schedules.timezone <> excluded.timezone
                      THEN excluded.not_before ELSE mf_schedules.not_before END
WHERE mf_schedules.cron <> excluded.cron OR mf_schedules.timezone <> excluded.timezone
   OR mf_schedules.kind <> excluded.kind OR mf_schedules.queue <> excluded.queue
   OR json(mf_schedules.payload) <> json(excluded.payload)
RETURNING name;

-- name: list_schedules
SELECT * FROM mf_schedules ORDER BY name;

-- name: get_schedule
SELECT * FROM mf_schedules WHERE name = :name;

-- name: pause_schedule
UPDATE mf_schedules
SET paused = 1, paused_by = :actor, paused_at = :now, pause_reason = :reason, updated_at = :now
WHERE name = :name AND paused = 0
RETURNING *;

-- name: resume_schedule
-- Ticks that fell while paused are skipped: not_before moves to :now.
UPDATE mf_schedules
SET paused = 0, paused_by = NULL, paused_at = NULL, pause_reason = NULL, not_before = :now,
    updated_at = :now
WHERE name = :name AND paused = 1
RETURNING *;

-- name: delete_schedule
DELETE FROM mf_schedules WHERE name = :name RETURNING name;

-- name: advance_schedule
-- Claims :tick for the caller: only one transaction can move last_tick past it, and
-- only while the definition the tick was computed from is still the stored one.
UPDATE mf_schedules SET last_tick = :tick
WHERE name = :name AND paused = 0 AND cron = :cron AND timezone = :timezone AND kind = :kind
  AND not_before < :tick AND (last_tick IS NULL OR last_tick < :tick)
RETURNING kind, queue, payload;

-- name: set_schedule_job
UPDATE mf_schedules SET last_job_id = :job_id WHERE name = :name;
