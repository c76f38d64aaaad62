-- The Kafka way in (issue 29): a submitted commit whose prepare has not been seen yet (its
-- prepare is on another partition, or later on this one) waits here, so its record's offset
-- can be committed at once and it is neither lost nor guessed. Any instance retries it
-- (claimed through next_try_at with FOR UPDATE SKIP LOCKED and a lease): once its prepare
-- is in, it is applied and its row deleted; at give_up_at it goes to the dead-letter topic
-- (message_not_found) and its row is deleted. Operators see the rows
-- (GET /v1/admin/submit/waiting, the summary's submit_waiting, trustmsg_submit_waiting).
-- headers: the record's headers as a JSON array of [name, value], and record_key its key, so
-- a dead-lettered commit is the record as it was submitted.
CREATE TABLE submit_waiting (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    biz_id       VARBINARY(64)   NOT NULL,
    message_key  VARBINARY(128)  NOT NULL,
    source_partition INT         NOT NULL,
    source_offset    BIGINT      NOT NULL,
    record_key   BLOB            NULL,
    headers      MEDIUMTEXT      NOT NULL,
    attempts     INT UNSIGNED    NOT NULL DEFAULT 0,
    received_at  DATETIME(3)     NOT NULL,
    give_up_at   DATETIME(3)     NOT NULL,
    next_try_at  DATETIME(3)     NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uq_submit_waiting_key (biz_id, message_key),
    KEY idx_submit_waiting_due (next_try_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
