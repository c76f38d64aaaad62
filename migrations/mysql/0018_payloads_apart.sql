-- A long message content in a table of its own (issue 42). InnoDB keeps a
-- value too long for its record's page on pages of its own and reads it
-- whole for every UPDATE of the row, whatever the UPDATE sets: a commit, a
-- claim or a SENT mark of 300 messages of 900 kB took 0.7 to 1.8 s, against
-- 0.01 s for 256-byte payloads, so the marks of big messages missed their
-- deadline and the messages were sent again and again.
--
-- From this migration on, a prepare whose content (payload bytes plus the
-- headers' JSON) is longer than 2 KiB writes it here, in the transaction
-- that writes its message row, which then holds an empty payload, headers
-- '{}' and payload_apart = TRUE. No UPDATE ever names this table: the send
-- claim and the views read it, retention deletes from it with the message.
-- A shorter content stays in its row, on the row's own page, where an
-- UPDATE reads it at no extra cost. Never changed after the prepare.
CREATE TABLE message_payloads (
    message_id BIGINT UNSIGNED NOT NULL,
    payload    LONGBLOB        NOT NULL,
    headers    TEXT            NOT NULL,
    PRIMARY KEY (message_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Where a row's content is: in the row (FALSE, every row written before
-- this migration) or in message_payloads (TRUE). Instant on MySQL >= 8.0.12
-- and MariaDB >= 10.3 (a column with a constant default, at the end).
ALTER TABLE messages ADD COLUMN payload_apart BOOLEAN NOT NULL DEFAULT FALSE;

-- The move of the long contents of rows written before this migration,
-- done by every instance in the background (`serve`), never by this
-- migration, so that the upgrade takes no lock on a large table: the rows
-- are walked in id order, a short transaction per chunk, from
-- moved_through on (the last id walked); finished_at is set when a walk
-- finds no row past it. Until its row is moved, a content is read from
-- the row as before. One row, id 1.
CREATE TABLE payload_move (
    id            TINYINT UNSIGNED NOT NULL,
    moved_through BIGINT UNSIGNED  NOT NULL,
    finished_at   DATETIME(3)      NULL,
    PRIMARY KEY (id)
) ENGINE=InnoDB;

INSERT INTO payload_move (id, moved_through) VALUES (1, 0);
