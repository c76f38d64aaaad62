-- The operator summary (console overview, GET /v1/admin/summary) counts the
-- messages that finished recently per producer. With biz_id at the end of the
-- state index that count reads only the index range of the recent window,
-- never a row, and every earlier use of the index (state, then updated_at) is
-- unchanged. Built online (InnoDB adds a secondary index without blocking writes).
ALTER TABLE messages
    ADD KEY idx_messages_state (status, send_status, updated_at, biz_id),
    DROP KEY idx_messages_status,
    ALGORITHM = INPLACE, LOCK = NONE;
