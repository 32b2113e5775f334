-- A Succeeded job keeps what its handler returned: the exact JSON text the worker wrote
-- (NULL: the handler returned None, the job has not succeeded, or retention compacted
-- the row). Written by the statement that marks the job Succeeded.
ALTER TABLE mf_jobs ADD COLUMN result TEXT CHECK (result IS NULL OR json_valid(result));
