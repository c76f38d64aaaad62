-- W3C Trace Context of a message (issue 28): the `traceparent` and `tracestate` the prepare
-- request carried, validated, stored so check-back and the Kafka record carry them on. NULL: the
-- prepare carried none (or an invalid one). A traceparent is stored in its version-00 form (55
-- characters); a tracestate is at most 512 characters (longer ones are dropped at prepare).
-- An alert keeps its message's trace id (32 hex), copied when it is raised, so it outlives the
-- message's retention.
ALTER TABLE messages ADD COLUMN traceparent VARCHAR(55) NULL, ADD COLUMN tracestate VARCHAR(512) NULL;
ALTER TABLE alerts ADD COLUMN trace_id CHAR(32) NULL;
