-- The same CHECK constraints on mf_jobs, written in fewer expression nodes. PostgreSQL
-- reads and prepares a table's CHECK expressions afresh for every INSERT or UPDATE
-- statement (not once per connection), so a one-job statement (an enqueue, a claim, a
-- completion) pays for all of them however few rows it writes. A list of names is one
-- array constant instead of an ARRAY of constants, and a length bound one range test
-- instead of two comparisons. Each constraint keeps its name, its columns and what it
-- allows. One ALTER TABLE: the new constraints are validated in a single scan of mf_jobs.
ALTER TABLE mf_jobs
    DROP CONSTRAINT mf_jobs_kind_check,
    DROP CONSTRAINT mf_jobs_queue_check,
    DROP CONSTRAINT mf_jobs_state_check,
    DROP CONSTRAINT mf_jobs_failure_class_check,
    DROP CONSTRAINT mf_jobs_compacted_terminal,
    DROP CONSTRAINT mf_jobs_trace_context_check,
    DROP CONSTRAINT mf_jobs_limit_key_check,
    ADD CONSTRAINT mf_jobs_kind_check CHECK (length(kind) <@ '[1,200]'::int4range),
    ADD CONSTRAINT mf_jobs_queue_check CHECK (length(queue) <@ '[1,100]'::int4range),
    ADD CONSTRAINT mf_jobs_state_check
        CHECK (state = ANY ('{Pending,Claimed,Succeeded,DeadLettered,Dropped}'::text[])),
    ADD CONSTRAINT mf_jobs_failure_class_check
        CHECK (failure_class = ANY ('{Permanent,Transient}'::text[])),
    ADD CONSTRAINT mf_jobs_compacted_terminal
        CHECK (compacted_at IS NULL OR state = ANY ('{Succeeded,DeadLettered,Dropped}'::text[])),
    ADD CONSTRAINT mf_jobs_trace_context_check
        CHECK (trace_context IS NULL OR length(trace_context) <@ '[1,512]'::int4range),
    ADD CONSTRAINT mf_jobs_limit_key_check
        CHECK (limit_key IS NULL OR length(limit_key) <@ '[1,200]'::int4range);
