-- The alert outbox. An alert (a message needs a person: verify_failed, send_failed,
-- quarantined, send_overdue, verify_overdue) is written in the same transaction as the
-- state change that raises it, so a crash can no longer lose it between the change and the
-- webhook. Any instance delivers it afterwards: it claims due rows (next_attempt_at, with
-- FOR UPDATE SKIP LOCKED and a lease), POSTs each to --alert-webhook, and marks it
-- delivered, or pushes next_attempt_at out by a capped exponential backoff.
--
-- state: 'pending' (to be POSTed; next_attempt_at set), 'delivered' (the webhook answered
-- 2xx; delivered_at set), 'no_webhook' (taken by an instance without --alert-webhook: its
-- log line and counter were its only outlets). next_attempt_at is set only while pending,
-- so the due scan is an index range scan over due rows whatever the size of the table.
-- Retention deletes settled rows (delivered, no_webhook) unchanged for its window.
CREATE TABLE alerts (
    id                BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    kind              VARCHAR(32)     NOT NULL,
    message_id        BIGINT UNSIGNED NOT NULL,
    biz_id            VARCHAR(64)     NOT NULL,
    message_key       VARCHAR(128)    NOT NULL,
    attempts          INT UNSIGNED    NOT NULL,
    last_error        VARCHAR(2048)   NOT NULL,
    state             VARCHAR(16)     NOT NULL,
    next_attempt_at   DATETIME(3)     NULL,
    delivery_attempts INT UNSIGNED    NOT NULL DEFAULT 0,
    delivery_error    VARCHAR(512)    NULL,
    delivered_at      DATETIME(3)     NULL,
    created_at        DATETIME(3)     NOT NULL,
    updated_at        DATETIME(3)     NOT NULL,
    PRIMARY KEY (id),
    KEY idx_alerts_due (next_attempt_at),
    KEY idx_alerts_state (state, updated_at),
    KEY idx_alerts_message (message_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
