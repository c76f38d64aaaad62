-- Several message databases (issue 32; docs/scaling.md). Every shard
-- records which shard it is of which deployment, written once, when
-- `trustmsg migrate` (or `serve --auto-migrate`) first sees it in a
-- shard list; start-up refuses a list that names a shard in another place
-- or a database of another deployment, since that would route keys to
-- databases that do not hold their messages. One row, id 1.
CREATE TABLE shard_identity (
    id          TINYINT UNSIGNED NOT NULL PRIMARY KEY,
    deployment  CHAR(32) NOT NULL,
    shard       SMALLINT UNSIGNED NOT NULL,
    created_at  DATETIME(3) NOT NULL
) ENGINE=InnoDB;

-- The first database's map of slots to shards: a message lives on the shard
-- of its slot, CRC32(biz_id, 0x00, message_key) mod 1024. Written once, when
-- the deployment first runs with several databases; a shard is added by
-- moving whole slots to it (docs/scaling.md). Empty in a deployment that
-- never had more than one database.
CREATE TABLE shard_slots (
    slot   SMALLINT UNSIGNED NOT NULL PRIMARY KEY,
    shard  SMALLINT UNSIGNED NOT NULL
) ENGINE=InnoDB;
