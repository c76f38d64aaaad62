-- trustmsg schema for SQLite (the bundled library, >= 3.37 for STRICT, >= 3.35 for RETURNING).
--
-- Times are INTEGER milliseconds since the Unix epoch (UTC), always computed by SQLite
-- itself from julianday('now'), so the database clock is the clock and precision is
-- exactly one millisecond. Integers compare and add exactly, which keeps the due-time
-- scans simple range scans and "now + lease" plain arithmetic.
--
-- Text compares with SQLite's default BINARY collation (memcmp), so (biz_id, message_key)
-- is unique byte for byte: no case folding and no trailing-space padding.
--
-- next_verify_at is set only while a message is PREPARED and next_send_at only while its
-- send is PENDING, so the verifier and forwarder scans are index range scans over due rows
-- whatever the size of the table.

CREATE TABLE messages (
    -- AUTOINCREMENT: ids of deleted (retention) rows are never reused, so a message id
    -- (the consumers' de-duplication key) names one message forever.
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    biz_id          TEXT    NOT NULL,
    message_key     TEXT    NOT NULL,
    topic           TEXT    NULL,
    record_key      TEXT    NULL,
    payload         BLOB    NOT NULL,
    headers         TEXT    NOT NULL,
    content_digest  BLOB    NULL,
    status          TEXT    NOT NULL
        CHECK (status IN ('PREPARED', 'COMMITTED', 'ROLLED_BACK', 'VERIFY_FAILED')),
    send_status     TEXT    NULL
        CHECK (send_status IN ('PENDING', 'SENT', 'SEND_FAILED')),
    tombstone       INTEGER NOT NULL DEFAULT 0 CHECK (tombstone IN (0, 1)),
    version         INTEGER NOT NULL DEFAULT 0,
    verify_attempts INTEGER NOT NULL DEFAULT 0,
    send_attempts   INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT    NULL,
    next_verify_at  INTEGER NULL,
    next_send_at    INTEGER NULL,
    kafka_partition INTEGER NULL,
    kafka_offset    INTEGER NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    decided_at      INTEGER NULL,
    sent_at         INTEGER NULL,
    UNIQUE (biz_id, message_key)
) STRICT;

CREATE INDEX idx_messages_verify_due ON messages (next_verify_at);
CREATE INDEX idx_messages_send_due ON messages (next_send_at);
CREATE INDEX idx_messages_status ON messages (status, send_status, updated_at);

CREATE TABLE producers (
    biz_id                TEXT    NOT NULL PRIMARY KEY,
    verify_url            TEXT    NOT NULL,
    verify_timeout_ms     INTEGER NOT NULL,
    first_verify_after_ms INTEGER NOT NULL,
    max_verify_attempts   INTEGER NOT NULL,
    token_hash            BLOB    NOT NULL,
    signing_secret        TEXT    NOT NULL,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
) STRICT;

CREATE TABLE audit_log (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id       INTEGER NOT NULL,
    actor            TEXT    NOT NULL,
    action           TEXT    NOT NULL,
    from_status      TEXT    NULL,
    to_status        TEXT    NULL,
    from_send_status TEXT    NULL,
    to_send_status   TEXT    NULL,
    reason           TEXT    NOT NULL,
    created_at       INTEGER NOT NULL
) STRICT;

CREATE INDEX idx_audit_message ON audit_log (message_id, id);
