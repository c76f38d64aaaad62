-- The local message table way (issue 44, docs/outbox.md): what trustmsg keeps about the
-- producers' own outbox tables, which live in their databases, not here.
--
-- outbox_failures: a source row the relay marked failed (3), once per (source, row,
-- attempt): the relay writes it, with its alert, in one transaction before it marks the
-- source row, and only when it is new, so a relay that crashes between the two and fails the
-- row again raises no second alert. attempt is the row's retry_count (an operator's retry
-- makes a new attempt, whose failure alerts again).
CREATE TABLE outbox_failures (
    id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    biz_id        VARBINARY(64)   NOT NULL,
    source_row_id BIGINT UNSIGNED NOT NULL,
    attempt       INT UNSIGNED    NOT NULL,
    message_key   VARCHAR(128)    NOT NULL,
    reason        VARCHAR(2048)   NOT NULL,
    created_at    DATETIME(3)     NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uq_outbox_failures_row (biz_id, source_row_id, attempt)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- outbox_actions: the audit of operators' retries and give-ups of failed source rows.
CREATE TABLE outbox_actions (
    id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    biz_id        VARBINARY(64)   NOT NULL,
    source_row_id BIGINT UNSIGNED NOT NULL,
    message_key   VARCHAR(128)    NOT NULL,
    actor         VARCHAR(128)    NOT NULL,
    action        VARCHAR(16)     NOT NULL,
    reason        VARCHAR(2048)   NOT NULL,
    created_at    DATETIME(3)     NOT NULL,
    PRIMARY KEY (id),
    KEY idx_outbox_actions_row (biz_id, source_row_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
