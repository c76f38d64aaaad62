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

    /// Not `information_schema.PARTITIONS`: MariaDB 10.11 materialises it
    /// in an on-disk temporary table, and dropping that table crashed the
    /// whole server (signal 11 in `ha_maria::drop_table`, from
    /// `free_tmp_table`) under the test suite's concurrent DDL. `SHOW CREATE
    /// TABLE` reads the table's definition, nothing else.
    fn partition_names(table: &str) -> String {
        format!("SHOW CREATE TABLE {table}")
    }

    const PARTITION_NAMES_COLUMN: &'static str = "Create Table";

    fn partition_names_in(text: &str) -> Vec<String> {
        partition_names_in(text)
    }

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

/// The partitions a `SHOW CREATE TABLE` names: each `PARTITION <name>
/// VALUES …` after its `PARTITION BY` (MariaDB quotes the name, MySQL does
/// not); none for a table without partitions.
pub(super) fn partition_names_in(create_table: &str) -> Vec<String> {
    let Some((_, partitions)) = create_table.split_once("PARTITION BY ") else {
        return Vec::new();
    };
    partitions
        .split("PARTITION ")
        .skip(1)
        .filter_map(|rest| {
            let (name, after) = rest.split_once(char::is_whitespace)?;
            after
                .starts_with("VALUES")
                .then(|| name.trim_matches('`').to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::partition_names_in;

    #[test]
    fn the_partitions_of_a_create_table_are_found_in_mariadbs_and_mysqls_forms() {
        let mariadb =
            "CREATE TABLE `messages` (\n  `id` bigint(20) unsigned NOT NULL AUTO_INCREMENT,\n  \
            PRIMARY KEY (`id`)\n) ENGINE=InnoDB\n PARTITION BY RANGE (`id`)\n\
            (PARTITION `p0` VALUES LESS THAN (1000) ENGINE = InnoDB,\n \
            PARTITION `p20260` VALUES LESS THAN (2000) ENGINE = InnoDB)";
        assert_eq!(partition_names_in(mariadb), ["p0", "p20260"]);
        let mysql = "CREATE TABLE `messages` (\n  `id` bigint unsigned NOT NULL\n) ENGINE=InnoDB\n\
            /*!50100 PARTITION BY RANGE (`id`)\n(PARTITION p7 VALUES LESS THAN (1000) ENGINE = InnoDB,\n \
            PARTITION p8 VALUES LESS THAN (2000) ENGINE = InnoDB) */";
        assert_eq!(partition_names_in(mysql), ["p7", "p8"]);
        let plain = "CREATE TABLE `messages` (\n  `id` bigint unsigned NOT NULL\n) ENGINE=InnoDB";
        assert!(partition_names_in(plain).is_empty());
    }
}
