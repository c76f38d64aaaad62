-- trustmsg inbox: one row per (consumer group, message id) in the CONSUMER's database, written in
-- the same local transaction as the consumer's work (trustmsg_client::inbox::process_id).
--
-- The primary key makes repeats and concurrent deliveries safe without a distributed lock: the
-- first delivery's insert takes the row; a repeat finds it and skips the work; a concurrent
-- delivery waits on the row lock until the first ends, then finds the row (it committed: skip)
-- or takes it (it rolled back: run the work). VARBINARY compares groups byte for byte.
--
-- Apply it with your migration tool, or call trustmsg_client::inbox::create_table(&pool).
-- Requires InnoDB (MySQL >= 5.7, MariaDB >= 10.2).

CREATE TABLE IF NOT EXISTS trustmsg_inbox (
    consumer_group VARBINARY(255)  NOT NULL,
    message_id     BIGINT UNSIGNED NOT NULL,
    processed_at   TIMESTAMP(3)    NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (consumer_group, message_id),
    KEY idx_trustmsg_inbox_processed (processed_at)
) ENGINE=InnoDB;
