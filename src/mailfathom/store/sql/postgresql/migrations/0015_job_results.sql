-- A Succeeded job keeps what its handler returned: the exact JSON text the worker wrote,
-- as json like the payload (NULL: the handler returned None, the job has not succeeded,
-- or retention compacted the row). Written by the statement that marks the job Succeeded.
-- A nullable column without a default: a catalog change only, no table rewrite.
ALTER TABLE mf_jobs ADD COLUMN result json;
