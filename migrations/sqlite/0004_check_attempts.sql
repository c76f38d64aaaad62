-- Every check-back call, for operators (GET /v1/admin/messages/{id}): when, how long, the
-- HTTP status if there was an answer, what it decided, and a short error. Kept per message
-- up to a bound (the newest 50); deleted with its message by retention.
CREATE TABLE check_attempts (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id  INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,
    http_status INTEGER NULL,
    outcome     TEXT    NOT NULL CHECK (outcome IN ('commit', 'rollback', 'unknown', 'failed')),
    error       TEXT    NULL
) STRICT;

CREATE INDEX idx_check_attempts_message ON check_attempts (message_id, id);
