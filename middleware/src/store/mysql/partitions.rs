//! Time partitions on MySQL/MariaDB (`sql::partitions` keeps them): RANGE
//! partitions `p<n>` of each partitioned table, a user lock per database for
//! the upkeep, and the AUTO_INCREMENT counter moved with an instant ALTER.

use sqlx::MySql;

use crate::store::sql::{first_id, PartitionDdl};

impl PartitionDdl for MySql {
    const DDL_WAIT_SQL: &'static str = "SET SESSION lock_wait_timeout = 2";

    // Named after the database, as the migration lock is (a user lock is
    // the server's): deployments in other databases do not wait for each other.
    const TRY_LOCK: &'static str =
        "SELECT GET_LOCK(CONCAT('trustmsg_partitions_', SHA1(COALESCE(DATABASE(), ''))), 0) AS locked";

    const UNLOCK: &'static str =
        "SELECT RELEASE_LOCK(CONCAT('trustmsg_partitions_', SHA1(COALESCE(DATABASE(), ''))))";

    const PARTITION_NAMES: &'static str = "SELECT CAST(PARTITION_NAME AS CHAR) AS name FROM \
         information_schema.PARTITIONS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? \
         AND PARTITION_NAME IS NOT NULL";

    fn add_partition(table: &str, period: u64) -> String {
        format!(
            "ALTER TABLE {table} ADD PARTITION (PARTITION p{period} VALUES LESS THAN ({}))",
            first_id(period + 1)
        )
    }

    fn drop_partition(table: &str, period: u64) -> String {
        format!("ALTER TABLE {table} DROP PARTITION p{period}")
    }

    /// Instant: InnoDB changes the counter it keeps (and, from MariaDB
    /// 10.2.4 and MySQL 8, persists it) without touching a row.
    fn move_ids(first: u64) -> String {
        format!("ALTER TABLE messages AUTO_INCREMENT = {first}")
    }

    // Exact on MariaDB; MySQL 8 may answer from its statistics cache, so a
    // shard's floor also names its period itself (`shards::setup`).
    const NEXT_ID: &'static str = "SELECT AUTO_INCREMENT AS next FROM information_schema.TABLES \
         WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'messages'";

    const DELETE_KEYS: &'static str =
        "DELETE FROM message_keys WHERE message_id >= ? AND message_id < ? LIMIT ?";
}
