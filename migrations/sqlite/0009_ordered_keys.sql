-- In order per key: see mysql/0009_ordered_keys.sql. SQLite's alerts.kind has a CHECK
-- constraint, which cannot be altered: the table is rebuilt with 'key_blocked' added.
ALTER TABLE producers ADD COLUMN ordered INTEGER NOT NULL DEFAULT 0 CHECK (ordered IN (0, 1));

ALTER TABLE messages ADD COLUMN order_key BLOB NULL;
ALTER TABLE messages ADD COLUMN order_seq INTEGER NULL;

CREATE TABLE ordered_keys (
    order_key    BLOB    NOT NULL PRIMARY KEY,
    last_seq     INTEGER NOT NULL,
    sent_through INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
) STRICT;

CREATE TABLE ordered_seqs (
    order_key  BLOB    NOT NULL,
    seq        INTEGER NOT NULL,
    message_id INTEGER NOT NULL,
    PRIMARY KEY (order_key, seq)
) STRICT;

CREATE TABLE alerts_0009 (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    kind              TEXT    NOT NULL CHECK (kind IN
        ('verify_failed', 'send_failed', 'quarantined', 'send_overdue', 'verify_overdue',
         'key_blocked')),
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
    updated_at        INTEGER NOT NULL
) STRICT;
INSERT INTO alerts_0009 SELECT * FROM alerts;
DROP TABLE alerts;
ALTER TABLE alerts_0009 RENAME TO alerts;
CREATE INDEX idx_alerts_due ON alerts (next_attempt_at);
CREATE INDEX idx_alerts_state ON alerts (state, updated_at);
CREATE INDEX idx_alerts_message ON alerts (message_id, id);
