-- When a time partition's archive began (issue 60; mysql/0021 says why).
ALTER TABLE message_partitions ADD COLUMN archived_at TIMESTAMPTZ(3) NULL;
