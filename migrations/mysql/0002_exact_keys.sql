-- Keys must be unique and found byte for byte (DESIGN §3: (biz_id, message_key) names one
-- message). utf8mb4_bin is a PAD SPACE collation on MariaDB (and for MySQL's legacy _bin
-- collations), so 'k' and 'k ' compared equal: a prepare of 'k ' was answered with the
-- row of 'k', and a rollback of one could block the other. VARBINARY compares every byte
-- on MySQL 8 and MariaDB alike; the code already reads these columns as bytes.
ALTER TABLE messages
    MODIFY biz_id      VARBINARY(64)  NOT NULL,
    MODIFY message_key VARBINARY(128) NOT NULL;

ALTER TABLE producers
    MODIFY biz_id VARBINARY(64) NOT NULL;
