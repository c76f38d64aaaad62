-- The flow of the last day, per minute (issue 30, the console's charts and
-- GET /v1/admin/flow). Every instance counts what it did in memory and adds
-- its counts to the minute's row every --flow-interval and at shutdown, one
-- INSERT … ON DUPLICATE KEY UPDATE x = x + ? per flush (nothing per message),
-- so the row holds the sum over all instances and outlives a restart.
-- failed = VERIFY_FAILED + SEND_FAILED; checks_* = check-back calls by what they
-- answered (failed: no usable answer). backlog_* are the waiting PREPARED and
-- PENDING messages as last sampled in that minute (the backlog gauges; the
-- sample taken last, at backlog_at, wins whichever instance adds it first); NULL
-- when no instance sampled them. Rows older than a day are deleted.
CREATE TABLE flow_minutes (
    minute           DATETIME(3)     NOT NULL,
    prepared         BIGINT UNSIGNED NOT NULL DEFAULT 0,
    committed        BIGINT UNSIGNED NOT NULL DEFAULT 0,
    rolled_back      BIGINT UNSIGNED NOT NULL DEFAULT 0,
    sent             BIGINT UNSIGNED NOT NULL DEFAULT 0,
    failed           BIGINT UNSIGNED NOT NULL DEFAULT 0,
    checks_commit    BIGINT UNSIGNED NOT NULL DEFAULT 0,
    checks_rollback  BIGINT UNSIGNED NOT NULL DEFAULT 0,
    checks_unknown   BIGINT UNSIGNED NOT NULL DEFAULT 0,
    checks_failed    BIGINT UNSIGNED NOT NULL DEFAULT 0,
    backlog_prepared BIGINT UNSIGNED NULL,
    backlog_pending  BIGINT UNSIGNED NULL,
    backlog_at       DATETIME(3)     NULL,
    PRIMARY KEY (minute)
) ENGINE=InnoDB;
