-- When a time partition's archive began (issue 60): a message or a
-- consumer's ledger row of the partition that changes after it is not in
-- the archive, so before the partition is dropped the upkeep asks whether
-- anything changed since, and archives it again if so
-- (store/sql/partitions.rs, `changed_since_archived`).
ALTER TABLE message_partitions ADD COLUMN archived_at DATETIME(3) NULL;
