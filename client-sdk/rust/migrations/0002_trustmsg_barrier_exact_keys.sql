-- trustmsg barrier: compare keys byte for byte.
--
-- 0001 declared the key columns VARCHAR ... utf8mb4_bin, which is a PAD SPACE collation on
-- MariaDB (and for MySQL's legacy _bin collations): 'A' and 'A ' compared equal, so the
-- `commit` marker of key 'A' answered check-back for key 'A ' with commit, and a message
-- with no local transaction behind it was delivered. VARBINARY compares every byte on
-- MySQL 8 and MariaDB alike, as trustmsg's own tables do. Existing markers are kept (two
-- keys that compared equal could never both have had a row).
--
-- Apply it after 0001 with your migration tool, or call trustmsg_client::barrier::create_table(&pool),
-- which applies both and runs this one only while the columns are not VARBINARY yet.

ALTER TABLE trustmsg_barrier
    MODIFY biz_id      VARBINARY(64)  NOT NULL,
    MODIFY message_key VARBINARY(128) NOT NULL;
