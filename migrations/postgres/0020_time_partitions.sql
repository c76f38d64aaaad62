-- Tables that stay small (issue 60; mysql/0020 says why and how, and
-- docs/operations.md, "Retention and time partitions"): messages, audit_log,
-- check_attempts, consumptions and message_payloads become partitioned by
-- RANGE of the message id, each period's ids from period << 32 on. The
-- tables as they are become each one's first partition, `<table>_p<n>`,
-- holding every id below (n + 1) << 32: renamed and attached, not copied
-- (the new parent's indexes match theirs, but for messages' (biz_id,
-- message_key), which is built on the old rows during the attach).
--
-- (biz_id, message_key) is unique in message_keys, written by a BEFORE
-- INSERT trigger that skips the message row (as ON CONFLICT DO NOTHING did)
-- when the key is taken.
CREATE TABLE message_keys (
    biz_id      VARCHAR(64)  COLLATE "C" NOT NULL,
    message_key VARCHAR(128) COLLATE "C" NOT NULL,
    message_id  BIGINT       NOT NULL,
    PRIMARY KEY (biz_id, message_key)
);

CREATE INDEX idx_message_keys_message ON message_keys (message_id);

INSERT INTO message_keys (biz_id, message_key, message_id)
    SELECT biz_id, message_key, id FROM messages;

-- The periods opened, as on MySQL (mysql/0020).
CREATE TABLE message_partitions (
    period           BIGINT NOT NULL PRIMARY KEY,
    opened_at        TIMESTAMPTZ(3) NOT NULL,
    archived_through BIGINT NULL,
    dropped_at       TIMESTAMPTZ(3) NULL
);

DO $$
DECLARE
    n     BIGINT := (SELECT COALESCE(MAX(id), 0) >> 32 FROM messages);
    upper BIGINT := (n + 1) << 32;
    t     TEXT;
    i     TEXT;
BEGIN
    -- Each table and the index names it keeps: renamed to <name>_p<n> on
    -- the first partition, so the parent can take the names.
    FOREACH t IN ARRAY ARRAY['messages', 'audit_log', 'check_attempts', 'consumptions', 'message_payloads'] LOOP
        EXECUTE format('ALTER TABLE %I RENAME TO %I', t, t || '_p' || n);
        EXECUTE format('ALTER TABLE %I RENAME CONSTRAINT %I TO %I', t || '_p' || n, t || '_pkey', t || '_p' || n || '_pkey');
        FOR i IN SELECT indexname FROM pg_indexes
                 WHERE tablename = t || '_p' || n AND indexname LIKE 'idx\_%' LOOP
            EXECUTE format('ALTER INDEX %I RENAME TO %I', i, i || '_p' || n);
        END LOOP;
    END LOOP;

    EXECUTE format('CREATE TABLE messages (LIKE %I INCLUDING DEFAULTS INCLUDING IDENTITY) PARTITION BY RANGE (id)', 'messages_p' || n);
    ALTER TABLE messages ADD PRIMARY KEY (id);
    CREATE INDEX idx_messages_verify_due ON messages (next_verify_at) WHERE next_verify_at IS NOT NULL;
    CREATE INDEX idx_messages_send_due ON messages (next_send_at) WHERE next_send_at IS NOT NULL;
    CREATE INDEX idx_messages_state ON messages (status, send_status, updated_at, biz_id);
    CREATE INDEX idx_messages_topic_sent ON messages (topic, sent_at) WHERE sent_at IS NOT NULL;
    CREATE INDEX idx_messages_biz_key ON messages (biz_id, message_key);

    -- audit_log and check_attempts keep their own ids unique through their
    -- sequence; the parent's key is the (message_id, id) index they had.
    EXECUTE format('CREATE TABLE audit_log (LIKE %I INCLUDING DEFAULTS INCLUDING IDENTITY) PARTITION BY RANGE (message_id)', 'audit_log_p' || n);
    CREATE INDEX idx_audit_message ON audit_log (message_id, id);

    EXECUTE format('CREATE TABLE check_attempts (LIKE %I INCLUDING DEFAULTS INCLUDING IDENTITY) PARTITION BY RANGE (message_id)', 'check_attempts_p' || n);
    CREATE INDEX idx_check_attempts_message ON check_attempts (message_id, id);

    EXECUTE format('CREATE TABLE consumptions (LIKE %I INCLUDING DEFAULTS) PARTITION BY RANGE (message_id)', 'consumptions_p' || n);
    ALTER TABLE consumptions ADD PRIMARY KEY (group_name, message_id);
    CREATE INDEX idx_consumptions_message ON consumptions (message_id);
    CREATE INDEX idx_consumptions_state ON consumptions (group_name, state);
    CREATE INDEX idx_consumptions_stuck ON consumptions (stuck_alerted, expires_at);

    EXECUTE format('CREATE TABLE message_payloads (LIKE %I INCLUDING DEFAULTS) PARTITION BY RANGE (message_id)', 'message_payloads_p' || n);
    ALTER TABLE message_payloads ADD PRIMARY KEY (message_id);

    FOREACH t IN ARRAY ARRAY['messages', 'audit_log', 'check_attempts'] LOOP
        -- The parent's own sequence goes on from the old one (from 1 when empty).
        EXECUTE format('SELECT setval(pg_get_serial_sequence(%L, ''id''), COALESCE(MAX(id), 1), MAX(id) IS NOT NULL) FROM %I',
                       t, t || '_p' || n);
        EXECUTE format('ALTER TABLE %I ALTER COLUMN id DROP IDENTITY', t || '_p' || n);
    END LOOP;
    FOREACH t IN ARRAY ARRAY['messages', 'audit_log', 'check_attempts', 'consumptions', 'message_payloads'] LOOP
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%s)',
                       t, t || '_p' || n, upper);
    END LOOP;
    INSERT INTO message_partitions (period, opened_at) VALUES (n, statement_timestamp());
END
$$;

CREATE FUNCTION trustmsg_message_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO message_keys (biz_id, message_key, message_id)
        VALUES (NEW.biz_id, NEW.message_key, NEW.id)
        ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER messages_key BEFORE INSERT ON messages
    FOR EACH ROW EXECUTE FUNCTION trustmsg_message_key();
