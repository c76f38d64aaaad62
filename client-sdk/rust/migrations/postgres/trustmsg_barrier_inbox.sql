-- The producer's own tables every trustmsg SDK uses, PostgreSQL >= 13.
-- Idempotent. Same tables, same meaning as sql/mysql.sql. The local message
-- table is separate: `trustmsg outbox schema --dialect postgres`.

-- The barrier. Keys compare byte for byte (COLLATE "C"; PostgreSQL's text
-- equality never ignores trailing spaces or case). The check-back's
-- `INSERT … ON CONFLICT DO NOTHING` of a 'rollback' marker waits while a local
-- transaction that inserted the same key is open, then answers what it did.
CREATE TABLE IF NOT EXISTS trustmsg_barrier (
    biz_id      VARCHAR(64)  COLLATE "C" NOT NULL,
    message_key VARCHAR(128) COLLATE "C" NOT NULL,
    op          VARCHAR(8)   NOT NULL CHECK (op IN ('commit', 'rollback')),
    created_at  TIMESTAMPTZ  NOT NULL DEFAULT now(),
    PRIMARY KEY (biz_id, message_key)
);
CREATE INDEX IF NOT EXISTS idx_trustmsg_barrier_created ON trustmsg_barrier (created_at);

-- The consumer's inbox. A trustmsg-message-id is an unsigned 64-bit integer
-- (vectors/record-headers.json has 18446744073709551615): BIGINT stops at
-- 2^63 - 1, so the id is a NUMERIC(20, 0) held to the u64 range.
CREATE TABLE IF NOT EXISTS trustmsg_inbox (
    consumer_group VARCHAR(255)   COLLATE "C" NOT NULL,
    message_id     NUMERIC(20, 0) NOT NULL CHECK (message_id > 0 AND message_id <= 18446744073709551615),
    processed_at   TIMESTAMPTZ  NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, message_id)
);
CREATE INDEX IF NOT EXISTS idx_trustmsg_inbox_processed ON trustmsg_inbox (processed_at);
