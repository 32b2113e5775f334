-- A Succeeded job keeps what its handler returned: the exact JSON text the worker wrote,
-- as json like the payload, in the statement that marks the job Succeeded. NULL: the
-- handler returned None (never the JSON null), the job has not succeeded, or retention
-- compacted the row. The column is a catalog change (no default, nothing rewritten);
-- the CHECKs read every row once, under the ALTER's ACCESS EXCLUSIVE lock.
ALTER TABLE mf_jobs ADD COLUMN result json,
    ADD CONSTRAINT mf_jobs_result_json CHECK (result IS NULL OR json_typeof(result) <> 'null'),
    -- only a Succeeded job has a result
    ADD CONSTRAINT mf_jobs_result_succeeded CHECK (result IS NULL OR state = 'Succeeded'),
    -- a compacted row has given up its result, as its payload
    ADD CONSTRAINT mf_jobs_compacted_result CHECK (result IS NULL OR compacted_at IS NULL);
