-- W3C Trace Context of a message and its alerts' trace id: see mysql/0011_trace_context.sql.
ALTER TABLE messages ADD COLUMN traceparent TEXT;
ALTER TABLE messages ADD COLUMN tracestate TEXT;
ALTER TABLE alerts ADD COLUMN trace_id TEXT;
