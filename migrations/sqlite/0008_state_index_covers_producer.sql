-- The operator summary counts the messages that finished recently per
-- producer from this index alone (see mysql/0008).
CREATE INDEX idx_messages_state ON messages (status, send_status, updated_at, biz_id);
DROP INDEX idx_messages_status;
