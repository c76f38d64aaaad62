-- The Kafka way in (issue 29): a submitted commit whose prepare has not been seen yet waits
-- here, so its record's offset can be committed at once and it is neither lost nor guessed.
-- It is retried until its prepare is in (then applied and deleted) or give_up_at (then
-- dead-lettered with message_not_found and deleted). See mysql/0012_submit_waiting.sql.
CREATE TABLE submit_waiting (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    biz_id           TEXT    NOT NULL,
    message_key      TEXT    NOT NULL,
    source_partition INTEGER NOT NULL,
    source_offset    INTEGER NOT NULL,
    record_key       BLOB    NULL,
    headers          TEXT    NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    received_at      INTEGER NOT NULL,
    give_up_at       INTEGER NOT NULL,
    next_try_at      INTEGER NOT NULL,
    UNIQUE (biz_id, message_key)
) STRICT;

CREATE INDEX idx_submit_waiting_due ON submit_waiting (next_try_at);
