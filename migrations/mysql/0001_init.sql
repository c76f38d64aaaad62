-- trustmsg schema for MySQL >= 8.0 / MariaDB >= 10.6.
-- Times are UTC (the connection runs with time_zone '+00:00') with millisecond precision.
-- next_verify_at is set only while a message is PREPARED and next_send_at only while its
-- send is PENDING, so the verifier and forwarder scans are index range scans over due rows
-- whatever the size of the table.

CREATE TABLE messages (
    id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    biz_id          VARCHAR(64)   NOT NULL,
    message_key     VARCHAR(128)  NOT NULL,
    topic           VARCHAR(249)  NULL,
    record_key      VARCHAR(1024) NULL,
    payload         LONGBLOB      NOT NULL,
    headers         TEXT          NOT NULL,
    content_digest  BINARY(32)    NULL,
    status          VARCHAR(16)   NOT NULL,
    send_status     VARCHAR(16)   NULL,
    tombstone       BOOLEAN       NOT NULL DEFAULT FALSE,
    version         BIGINT UNSIGNED NOT NULL DEFAULT 0,
    verify_attempts INT UNSIGNED  NOT NULL DEFAULT 0,
    send_attempts   INT UNSIGNED  NOT NULL DEFAULT 0,
    last_error      VARCHAR(2048) NULL,
    next_verify_at  DATETIME(3)   NULL,
    next_send_at    DATETIME(3)   NULL,
    kafka_partition INT           NULL,
    kafka_offset    BIGINT        NULL,
    created_at      DATETIME(3)   NOT NULL,
    updated_at      DATETIME(3)   NOT NULL,
    decided_at      DATETIME(3)   NULL,
    sent_at         DATETIME(3)   NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_messages_biz_key (biz_id, message_key),
    KEY idx_messages_verify_due (next_verify_at),
    KEY idx_messages_send_due (next_send_at),
    KEY idx_messages_status (status, send_status, updated_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE producers (
    biz_id                VARCHAR(64)   NOT NULL,
    verify_url            VARCHAR(2048) NOT NULL,
    verify_timeout_ms     INT UNSIGNED  NOT NULL,
    first_verify_after_ms INT UNSIGNED  NOT NULL,
    max_verify_attempts   INT UNSIGNED  NOT NULL,
    token_hash            BINARY(32)    NOT NULL,
    signing_secret        VARCHAR(128)  NOT NULL,
    created_at            DATETIME(3)   NOT NULL,
    updated_at            DATETIME(3)   NOT NULL,
    PRIMARY KEY (biz_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE audit_log (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    message_id  BIGINT UNSIGNED NOT NULL,
    actor       VARCHAR(128)  NOT NULL,
    action      VARCHAR(32)   NOT NULL,
    from_status VARCHAR(16)   NULL,
    to_status   VARCHAR(16)   NULL,
    from_send_status VARCHAR(16) NULL,
    to_send_status   VARCHAR(16) NULL,
    reason      VARCHAR(2048) NOT NULL,
    created_at  DATETIME(3)   NOT NULL,
    PRIMARY KEY (id),
    KEY idx_audit_message (message_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
