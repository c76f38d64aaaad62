-- The consumption ledger (issue 30, part 2): see mysql/0013_consumption_ledger.sql. SQLite's
-- alerts.kind has a CHECK constraint, which cannot be altered: the table is rebuilt with
-- 'consumption_failing' and 'consumption_stuck' added, and the consumer_group column.
CREATE TABLE consumer_groups (
    group_name             TEXT    NOT NULL PRIMARY KEY,
    topics                 TEXT    NOT NULL,
    token_hash             BLOB    NOT NULL,
    max_failures           INTEGER NOT NULL,
    in_progress_timeout_ms INTEGER NOT NULL,
    created_at             INTEGER NOT NULL,
    updated_at             INTEGER NOT NULL
) STRICT;

CREATE TABLE consumptions (
    group_name      TEXT    NOT NULL,
    message_id      INTEGER NOT NULL,
    state           TEXT    NOT NULL CHECK (state IN ('in_progress', 'failed', 'done')),
    attempts        INTEGER NOT NULL,
    last_error      TEXT    NULL,
    first_began_at  INTEGER NOT NULL,
    last_began_at   INTEGER NOT NULL,
    finished_at     INTEGER NULL,
    expires_at      INTEGER NULL,
    failing_alerted INTEGER NOT NULL DEFAULT 0 CHECK (failing_alerted IN (0, 1)),
    stuck_alerted   INTEGER NOT NULL DEFAULT 0 CHECK (stuck_alerted IN (0, 1)),
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (group_name, message_id)
) STRICT;

CREATE INDEX idx_consumptions_message ON consumptions (message_id);
CREATE INDEX idx_consumptions_state ON consumptions (group_name, state);
CREATE INDEX idx_consumptions_stuck ON consumptions (stuck_alerted, expires_at);

CREATE TABLE alerts_0013 (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    kind              TEXT    NOT NULL CHECK (kind IN
        ('verify_failed', 'send_failed', 'quarantined', 'send_overdue', 'verify_overdue',
         'key_blocked', 'consumption_failing', 'consumption_stuck')),
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
INSERT INTO alerts_0013 (id, kind, message_id, biz_id, message_key, attempts, last_error, state,
    next_attempt_at, delivery_attempts, delivery_error, delivered_at, created_at, updated_at,
    trace_id)
SELECT id, kind, message_id, biz_id, message_key, attempts, last_error, state, next_attempt_at,
    delivery_attempts, delivery_error, delivered_at, created_at, updated_at, trace_id FROM alerts;
-- Keep the id sequence: an id retention freed is never given to another alert.
DELETE FROM sqlite_sequence WHERE name = 'alerts_0013';
INSERT INTO sqlite_sequence (name, seq) SELECT 'alerts_0013', seq FROM sqlite_sequence WHERE name = 'alerts';
DROP TABLE alerts;
ALTER TABLE alerts_0013 RENAME TO alerts;
CREATE INDEX idx_alerts_due ON alerts (next_attempt_at);
CREATE INDEX idx_alerts_state ON alerts (state, updated_at);
CREATE INDEX idx_alerts_message ON alerts (message_id, id);

CREATE INDEX idx_messages_topic_sent ON messages (topic, sent_at);
