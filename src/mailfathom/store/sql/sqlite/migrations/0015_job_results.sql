-- A Succeeded job keeps what its handler returned: the exact JSON text the worker wrote,
-- in the statement that marks the job Succeeded. NULL: the handler returned None (never
-- the text 'null'), the job has not succeeded, or retention compacted the row. (The
-- CHECKs are unnamed: SQLite's ADD COLUMN takes column constraints only.)
ALTER TABLE mf_jobs ADD COLUMN result TEXT
    CHECK (result IS NULL OR (json_valid(result) AND json_type(result) <> 'null'))
    -- only a Succeeded job has a result
    CHECK (result IS NULL OR state = 'Succeeded')
    -- a compacted row has given up its result, as its payload
    CHECK (result IS NULL OR compacted_at IS NULL);
