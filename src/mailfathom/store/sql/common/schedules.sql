-- Named queries for recurring schedules.
-- Written once with :name parameters (translated to the driver's style when loaded);
-- a `-- per-dialect` block has no body here: each dialect's file defines it.

-- name: upsert_schedule
-- per-dialect

-- name: list_schedules
SELECT * FROM mf_schedules ORDER BY name;

-- name: get_schedule
SELECT * FROM mf_schedules WHERE name = :name;

-- name: pause_schedule
UPDATE mf_schedules
SET paused = TRUE, paused_by = :actor, paused_at = :now, pause_reason = :reason,
    updated_at = :now
WHERE name = :name AND NOT paused
RETURNING *;

-- name: resume_schedule
-- Ticks that fell while paused are skipped: not_before moves to :now.
UPDATE mf_schedules
SET paused = FALSE, paused_by = NULL, paused_at = NULL, pause_reason = NULL,
    not_before = :now, updated_at = :now
WHERE name = :name AND paused
RETURNING *;

-- name: delete_schedule
DELETE FROM mf_schedules WHERE name = :name RETURNING name;

-- name: advance_schedule
-- Claims :tick for the caller: only one transaction can move last_tick past it, and
-- only while the definition the tick was computed from is still the stored one.
UPDATE mf_schedules SET last_tick = :tick
WHERE name = :name AND NOT paused AND cron = :cron AND timezone = :timezone
  AND kind = :kind AND not_before < :tick
  AND (last_tick IS NULL OR last_tick < :tick)
RETURNING kind, queue, payload;

-- name: set_schedule_job
UPDATE mf_schedules SET last_job_id = :job_id WHERE name = :name;
