-- Time partitions (issue 60, mysql/0020) are for MySQL/MariaDB and
-- PostgreSQL; a SQLite store (dev mode) keeps its unique (biz_id,
-- message_key) and retention deletes its rows. message_keys exists empty so
-- that retention's shared DELETEs name the same tables everywhere.
CREATE TABLE message_keys (
    biz_id      TEXT    NOT NULL,
    message_key TEXT    NOT NULL,
    message_id  INTEGER NOT NULL,
    PRIMARY KEY (biz_id, message_key)
);
