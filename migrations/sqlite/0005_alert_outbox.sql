-- The alert outbox. An alert (a message needs a person: verify_failed, send_failed,
-- quarantined, send_overdue, verify_overdue) is written in the same transaction as the
-- state change that raises it, so a crash can no longer lose it between the change and the
-- webhook. Any instance delivers it afterwards: a claim pushes next_attempt_at out by a
-- lease under SQLite's single write lock, the instance POSTs each claimed alert to
-- --alert-webhook, and marks it delivered, or pushes next_attempt_at out by a capped
-- exponential backoff.
--
-- state: 'pending' (to be POSTed; next_attempt_at set), 'delivered' (the webhook answered
-- 2xx; delivered_at set), 'no_webhook' (taken by an instance without --alert-webhook: its
-- log line and counter were its only outlets). next_attempt_at is set only while pending,
-- so the due scan is an index range scan over due rows whatever the size of the table.
-- Retention deletes settled rows (delivered, no_webhook) unchanged for its window.
CREATE TABLE alerts (
    -- AUTOINCREMENT: the id is the alert's stable id (receivers drop repeats by it), so
    -- an id retention freed is never given to another alert.
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    kind              TEXT    NOT NULL CHECK (kind IN
        ('verify_failed', 'send_failed', 'quarantined', 'send_overdue', 'verify_overdue')),
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

CREATE INDEX idx_alerts_due ON alerts (next_attempt_at);
CREATE INDEX idx_alerts_state ON alerts (state, updated_at);
CREATE INDEX idx_alerts_message ON alerts (message_id, id);
