-- The flow of the last day, per minute: see mysql/0014_flow.sql. minute is
-- INTEGER milliseconds since the epoch, as every time here.
CREATE TABLE flow_minutes (
    minute           INTEGER NOT NULL PRIMARY KEY,
    prepared         INTEGER NOT NULL DEFAULT 0,
    committed        INTEGER NOT NULL DEFAULT 0,
    rolled_back      INTEGER NOT NULL DEFAULT 0,
    sent             INTEGER NOT NULL DEFAULT 0,
    failed           INTEGER NOT NULL DEFAULT 0,
    checks_commit    INTEGER NOT NULL DEFAULT 0,
    checks_rollback  INTEGER NOT NULL DEFAULT 0,
    checks_unknown   INTEGER NOT NULL DEFAULT 0,
    checks_failed    INTEGER NOT NULL DEFAULT 0,
    backlog_prepared INTEGER NULL,
    backlog_pending  INTEGER NULL,
    backlog_at       INTEGER NULL
) STRICT;
