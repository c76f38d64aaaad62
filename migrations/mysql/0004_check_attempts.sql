-- Every check-back call, for operators (GET /v1/admin/messages/{id}): when, how long, the
-- HTTP status if there was an answer, what it decided, and a short error. Kept per message
-- up to a bound (the newest 50); deleted with its message by retention.
CREATE TABLE check_attempts (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    message_id  BIGINT UNSIGNED NOT NULL,
    attempt     INT UNSIGNED    NOT NULL,
    at          DATETIME(3)     NOT NULL,
    duration_ms INT UNSIGNED    NOT NULL,
    http_status INT             NULL,
    outcome     VARCHAR(16)     NOT NULL,
    error       VARCHAR(512)    NULL,
    PRIMARY KEY (id),
    KEY idx_check_attempts_message (message_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
