-- The W3C traceparent of the span that enqueued a job (OpenTelemetry), kept beside the
-- payload, never in it: the attempt's span is its child. NULL when tracing was off.
ALTER TABLE mf_jobs ADD COLUMN trace_context TEXT
    CHECK (trace_context IS NULL OR length(trace_context) BETWEEN 1 AND 512);
