-- trustmsg's local message table, SQLite (`trustmsg dev`'s demo source and
-- single-machine producers; docs/outbox.md). Times are UTC text,
-- 'YYYY-MM-DD HH:MM:SS.SSS'. Only message_key, topic and payload must be
-- written; every other column has a default.
CREATE TABLE IF NOT EXISTS trustmsg_outbox (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    message_key       TEXT    NOT NULL,
    topic             TEXT    NOT NULL,
    record_key        TEXT    NULL,
    payload           BLOB    NOT NULL,
    headers           TEXT    NULL,
    content_type      TEXT    NULL,
    deliver_at        TEXT    NULL,
    traceparent       TEXT    NULL,
    status            INTEGER NOT NULL DEFAULT 0,
    retry_count       INTEGER NOT NULL DEFAULT 0,
    next_retry_time   TEXT    NULL,
    last_execute_time TEXT    NULL,
    fail_reason       TEXT    NULL,
    gmt_create        TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    gmt_modified      TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);
CREATE UNIQUE INDEX IF NOT EXISTS uk_trustmsg_outbox_message_key ON trustmsg_outbox (message_key);
CREATE INDEX IF NOT EXISTS idx_trustmsg_outbox_status ON trustmsg_outbox (status, id);
