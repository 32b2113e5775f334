-- Payloads keep the exact JSON text the application wrote. jsonb normalises it: numbers
-- lose their form (1e16 and 1.5e20 came back as integers, -0.0 as 0.0) and object keys
-- are reordered. json stores the text as given (and checks only that it is JSON), so a
-- payload decodes to exactly what was enqueued; it is also cheaper to insert than jsonb.
-- Rows written before this migration keep jsonb's rendering (the original is gone).
-- Each ALTER rewrites its table once, holding an ACCESS EXCLUSIVE lock meanwhile.
ALTER TABLE mf_jobs
    DROP CONSTRAINT mf_jobs_payload_check,
    ALTER COLUMN payload TYPE json USING payload::json,
    ADD CONSTRAINT mf_jobs_payload_check CHECK (json_typeof(payload) = 'object');

ALTER TABLE mf_schedules
    DROP CONSTRAINT mf_schedules_payload_check,
    ALTER COLUMN payload TYPE json USING payload::json,
    ADD CONSTRAINT mf_schedules_payload_check CHECK (json_typeof(payload) = 'object');
