-- trustmsg's local message table, MySQL >= 8.0 / MariaDB >= 10.6 (docs/outbox.md).
-- Create it in the producer's own database. A producer inserts one row in the
-- same transaction as its business change; `trustmsg serve --outbox-source
-- BIZ_ID=mysql://…` relays it to Kafka. Only message_key, topic and payload
-- must be written; every other column has a default.
CREATE TABLE IF NOT EXISTS trustmsg_outbox (
    -- Rows are relayed oldest first by id among those visible at once.
    id                BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    -- The business idempotency key: the message's message_key in trustmsg
    -- (1 to 128 bytes of UTF-8, no control characters).
    message_key       VARCHAR(128)  NOT NULL,
    -- The Kafka topic (1 to 249 of A-Z a-z 0-9 . _ -).
    topic             VARCHAR(249)  NOT NULL,
    -- The Kafka record key; NULL lets Kafka's partitioner choose. An ordered
    -- producer's rows of one key reach Kafka in order.
    record_key        VARCHAR(1024) NULL,
    -- The record value, as bytes.
    payload           LONGBLOB      NOT NULL,
    -- Extra record headers: a JSON object of strings, e.g. {"source":"orders"}.
    headers           JSON          NULL,
    -- Sent as the record header content-type when set.
    content_type      VARCHAR(255)  NULL,
    -- Send no earlier than this time, in UTC (UTC_TIMESTAMP(3) + INTERVAL …).
    deliver_at        DATETIME(3)   NULL,
    -- A W3C traceparent to continue the producer's trace (an invalid one is ignored).
    traceparent       VARCHAR(55)   NULL,
    -- 0 pending, 2 relayed, 3 failed (fail_reason says why; an operator acts).
    status            TINYINT       NOT NULL DEFAULT 0,
    -- Times an operator asked for the row to be relayed again.
    retry_count       INT           NOT NULL DEFAULT 0,
    -- The relay leaves a pending row alone until then (NULL: at once).
    next_retry_time   DATETIME(3)   NULL,
    -- When the relay last relayed or failed the row.
    last_execute_time DATETIME(3)   NULL,
    fail_reason       VARCHAR(1024) NULL,
    gmt_create        DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    gmt_modified      DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (id),
    UNIQUE KEY uk_trustmsg_outbox_message_key (message_key),
    -- The relay's scan (pending rows by id) and retention's (relayed rows by id).
    KEY idx_trustmsg_outbox_status (status, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
