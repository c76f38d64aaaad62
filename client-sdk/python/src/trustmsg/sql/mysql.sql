-- The producer's own tables every trustmsg SDK uses, MySQL >= 8.0 / MariaDB >= 10.6.
-- Idempotent. The same tables whatever the SDK's language: a Python producer
-- and a Go consumer can share them. The Rust SDK ships the same as its
-- migrations 0001-0003 (client-sdk/rust/migrations/). The local message
-- table is separate: `trustmsg outbox schema --dialect mysql`.

-- The barrier: one marker per (biz_id, message_key). The local transaction
-- inserts op 'commit'; check-back inserts op 'rollback' unless a marker
-- exists (waiting on the row lock while the local transaction is open), then
-- answers whichever marker is there. Keys compare byte for byte (VARBINARY):
-- 'A' and 'A ' are two messages, and so are 'A' and 'a'.
CREATE TABLE IF NOT EXISTS trustmsg_barrier (
    biz_id      VARBINARY(64)  NOT NULL,
    message_key VARBINARY(128) NOT NULL,
    op          VARCHAR(8)     NOT NULL,
    created_at  TIMESTAMP(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (biz_id, message_key),
    KEY idx_trustmsg_barrier_created (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The consumer's inbox: one row per (consumer group, trustmsg-message-id)
-- processed, inserted in the same transaction as the work.
CREATE TABLE IF NOT EXISTS trustmsg_inbox (
    consumer_group VARBINARY(255)  NOT NULL,
    message_id     BIGINT UNSIGNED NOT NULL,
    processed_at   TIMESTAMP(3)    NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (consumer_group, message_id),
    KEY idx_trustmsg_inbox_processed (processed_at)
) ENGINE=InnoDB;
