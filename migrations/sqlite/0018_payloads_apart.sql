-- A long message content in a table of its own (issue 42; the MySQL
-- schema's migration 0018 says why). SQLite rewrites a whole row, its
-- overflow pages included, on every UPDATE: a content longer than 2 KiB
-- (payload bytes plus the headers' JSON) is written here by its prepare, in
-- the transaction of its message row, which then holds an empty payload,
-- headers '{}' and payload_apart = 1. No UPDATE names this table.
CREATE TABLE message_payloads (
    message_id INTEGER PRIMARY KEY,
    payload    BLOB    NOT NULL,
    headers    TEXT    NOT NULL
) STRICT;

-- Where a row's content is: in the row (0, every row from before this
-- migration) or in message_payloads (1).
ALTER TABLE messages ADD COLUMN payload_apart INTEGER NOT NULL DEFAULT 0;

-- The background move of the long contents of rows from before this
-- migration (see the MySQL schema's 0018): the last id walked, and when the
-- walk found no row past it. One row, id 1.
CREATE TABLE payload_move (
    id            INTEGER PRIMARY KEY,
    moved_through INTEGER NOT NULL,
    finished_at   INTEGER NULL
) STRICT;

INSERT INTO payload_move (id, moved_through) VALUES (1, 0);
