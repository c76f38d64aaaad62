-- The local message table way (issue 44): see mysql/0019_outbox.sql.
CREATE TABLE outbox_failures (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    biz_id        TEXT    NOT NULL,
    source_row_id INTEGER NOT NULL,
    attempt       INTEGER NOT NULL,
    message_key   TEXT    NOT NULL,
    reason        TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    UNIQUE (biz_id, source_row_id, attempt)
) STRICT;

CREATE TABLE outbox_actions (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    biz_id        TEXT    NOT NULL,
    source_row_id INTEGER NOT NULL,
    message_key   TEXT    NOT NULL,
    actor         TEXT    NOT NULL,
    action        TEXT    NOT NULL,
    reason        TEXT    NOT NULL,
    created_at    INTEGER NOT NULL
) STRICT;

CREATE INDEX idx_outbox_actions_row ON outbox_actions (biz_id, source_row_id, id);
