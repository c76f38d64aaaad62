-- Tables that stay small (issue 60; docs/operations.md, "Retention and time
-- partitions"). messages and the tables that hang off it (audit_log,
-- check_attempts, consumptions, message_payloads) are partitioned by RANGE of
-- the message id, and the ids are handed out a period at a time: period n's
-- messages take ids from n << 32 on (the service moves the AUTO_INCREMENT
-- counter to the next period's first id when the period ends, see
-- store/sql/partitions.rs), so each partition holds one period's messages and
-- their children, and retention drops it whole instead of deleting its rows.
-- Every lookup by id names one partition.
--
-- A partitioned table can have no unique key without the partition column,
-- so (biz_id, message_key) is unique in message_keys instead: a row per
-- message, written by the trigger below in the statement that inserts the
-- message, which fails as a duplicate key did before (ER_DUP_ENTRY) when the
-- key is taken. Its rows go when their message goes (a dropped partition's
-- keys by message_id range, a deleted message's with it). Creating a trigger
-- takes the TRIGGER privilege and, with binary logging on, SUPER or
-- log_bin_trust_function_creators = 1.
CREATE TABLE message_keys (
    biz_id      VARBINARY(64)   NOT NULL,
    message_key VARBINARY(128)  NOT NULL,
    message_id  BIGINT UNSIGNED NOT NULL,
    PRIMARY KEY (biz_id, message_key),
    KEY idx_message_keys_message (message_id)
) ENGINE=InnoDB;

INSERT INTO message_keys (biz_id, message_key, message_id)
    SELECT biz_id, message_key, id FROM messages;

CREATE TRIGGER messages_key AFTER INSERT ON messages FOR EACH ROW
    INSERT INTO message_keys (biz_id, message_key, message_id)
    VALUES (NEW.biz_id, NEW.message_key, NEW.id);

-- The periods that have been opened: the counter moved into period n at
-- opened_at, so every message of period n was created before period n + 1's
-- opened_at. Partitions made ahead of time have no row until they open.
-- archived_through: with an archive (`--archive`), the period's messages
-- below this id are written to it and checked; its partitions are dropped
-- only once all of them are. dropped_at: the period's partitions are
-- dropped and its keys are being deleted from message_keys; the row goes
-- when none is left.
CREATE TABLE message_partitions (
    period           BIGINT UNSIGNED NOT NULL,
    opened_at        DATETIME(3)     NOT NULL,
    archived_through BIGINT UNSIGNED NULL,
    dropped_at       DATETIME(3)     NULL,
    PRIMARY KEY (period)
) ENGINE=InnoDB;

-- The rows there are now become the first partition, which also takes the
-- rest of the current period: everything below (period + 1) << 32. A table
-- that holds rows is copied by these ALTERs (docs/operations.md gives the
-- time they take); an empty one is not.
SET @trustmsg_period = (SELECT COALESCE(MAX(id), 0) >> 32 FROM messages);
SET @trustmsg_first = CONCAT(' (PARTITION p', @trustmsg_period, ' VALUES LESS THAN (',
    (@trustmsg_period + 1) << 32, '))');

SET @trustmsg_ddl = CONCAT('ALTER TABLE messages DROP INDEX uk_messages_biz_key, ',
    'ADD KEY idx_messages_biz_key (biz_id, message_key) PARTITION BY RANGE (id)', @trustmsg_first);
PREPARE trustmsg_stmt FROM @trustmsg_ddl;
EXECUTE trustmsg_stmt;

SET @trustmsg_ddl = CONCAT('ALTER TABLE audit_log DROP PRIMARY KEY, ADD PRIMARY KEY (id, message_id) ',
    'PARTITION BY RANGE (message_id)', @trustmsg_first);
PREPARE trustmsg_stmt FROM @trustmsg_ddl;
EXECUTE trustmsg_stmt;

SET @trustmsg_ddl = CONCAT('ALTER TABLE check_attempts DROP PRIMARY KEY, ADD PRIMARY KEY (id, message_id) ',
    'PARTITION BY RANGE (message_id)', @trustmsg_first);
PREPARE trustmsg_stmt FROM @trustmsg_ddl;
EXECUTE trustmsg_stmt;

SET @trustmsg_ddl = CONCAT('ALTER TABLE consumptions PARTITION BY RANGE (message_id)', @trustmsg_first);
PREPARE trustmsg_stmt FROM @trustmsg_ddl;
EXECUTE trustmsg_stmt;

SET @trustmsg_ddl = CONCAT('ALTER TABLE message_payloads PARTITION BY RANGE (message_id)', @trustmsg_first);
PREPARE trustmsg_stmt FROM @trustmsg_ddl;
EXECUTE trustmsg_stmt;
DEALLOCATE PREPARE trustmsg_stmt;

INSERT INTO message_partitions (period, opened_at) VALUES (@trustmsg_period, UTC_TIMESTAMP(3));
