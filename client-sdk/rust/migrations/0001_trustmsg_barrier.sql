-- trustmsg barrier: one marker per (biz_id, message_key) in the PRODUCER's database.
--
-- The producer's local transaction inserts op = 'commit' (trustmsg_client::barrier::run_in_tx);
-- a check-back inserts op = 'rollback' unless a marker exists (trustmsg_client::barrier::check).
-- The primary key makes the two race-free: whichever insert gets the row first wins, and the
-- other one waits for it (row lock) and then finds it. Column sizes match trustmsg's limits
-- (biz_id <= 64 characters, message_key <= 128 bytes); utf8mb4_bin compares keys byte for byte,
-- as trustmsg does.
--
-- Apply it with your migration tool, or call trustmsg_client::barrier::create_table(&pool).
-- Requires InnoDB (MySQL >= 5.7, MariaDB >= 10.2).

CREATE TABLE IF NOT EXISTS trustmsg_barrier (
    biz_id      VARCHAR(64)  NOT NULL,
    message_key VARCHAR(128) NOT NULL,
    op          VARCHAR(8)   NOT NULL,
    created_at  TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (biz_id, message_key),
    KEY idx_trustmsg_barrier_created (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
