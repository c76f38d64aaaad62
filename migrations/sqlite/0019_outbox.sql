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

-- alerts.kind has a CHECK constraint, which cannot be altered: the table is rebuilt with
-- 'outbox_failed' added (as in 0013).
CREATE TABLE alerts_0019 (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    kind              TEXT    NOT NULL CHECK (kind IN
        ('verify_failed', 'send_failed', 'quarantined', 'send_overdue', 'verify_overdue',
         'key_blocked', 'consumption_failing', 'consumption_stuck', 'outbox_failed')),
    message_id        INTEGER NOT NULL,
    biz_id            TEXT    NOT NULL,
    message_key       TEXT    NOT NULL,
    attempts          INTEGER NOT NULL,
    last_error        TEXT    NOT NULL,
    state             TEXT    NOT NULL CHECK (state IN ('pending', 'delivered', 'no_webhook')),
    next_attempt_at   INTEGER NULL,
    delivery_attempts INTEGER NOT NULL DEFAULT 0,
    delivery_error    TEXT    NULL,
    delivered_at      INTEGER NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    trace_id          TEXT    NULL,
    consumer_group    TEXT    NULL
) STRICT;
INSERT INTO alerts_0019 (id, kind, message_id, biz_id, message_key, attempts, last_error, state,
    next_attempt_at, delivery_attempts, delivery_error, delivered_at, created_at, updated_at,
    trace_id, consumer_group)
SELECT id, kind, message_id, biz_id, message_key, attempts, last_error, state, next_attempt_at,
    delivery_attempts, delivery_error, delivered_at, created_at, updated_at, trace_id,
    consumer_group FROM alerts;
-- Keep the id sequence: an id retention freed is never given to another alert.
DELETE FROM sqlite_sequence WHERE name = 'alerts_0019';
INSERT INTO sqlite_sequence (name, seq) SELECT 'alerts_0019', seq FROM sqlite_sequence WHERE name = 'alerts';
DROP TABLE alerts;
ALTER TABLE alerts_0019 RENAME TO alerts;
CREATE INDEX idx_alerts_due ON alerts (next_attempt_at);
CREATE INDEX idx_alerts_state ON alerts (state, updated_at);
CREATE INDEX idx_alerts_message ON alerts (message_id, id);
