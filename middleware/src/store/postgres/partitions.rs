//! Time partitions on PostgreSQL (`sql::partitions` keeps them): each one a
//! table `<table>_p<n>` attached to its partitioned parent, an advisory lock
//! for the upkeep, and the ids' sequence moved with `setval`.

use sqlx::Postgres;

use crate::store::sql::{first_id, PartitionDdl};

impl PartitionDdl for Postgres {
    const DDL_WAIT_SQL: &'static str = "SET lock_timeout = '2s'";

    const TRY_LOCK: &'static str =
        "SELECT CASE WHEN pg_try_advisory_lock(hashtext('trustmsg_partitions')) THEN 1::BIGINT \
         ELSE 0::BIGINT END AS locked";

    const UNLOCK: &'static str = "SELECT pg_advisory_unlock(hashtext('trustmsg_partitions'))";

    fn partition_names(table: &str) -> String {
        format!(
            "SELECT c.relname::TEXT AS name FROM pg_inherits i \
             JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass('{table}')::OID"
        )
    }

    const PARTITION_NAMES_COLUMN: &'static str = "name";

    fn add_partition(table: &str, period: u64) -> String {
        format!(
            "CREATE TABLE IF NOT EXISTS {table}_p{period} PARTITION OF {table} \
             FOR VALUES FROM ({}) TO ({})",
            first_id(period),
            first_id(period + 1)
        )
    }

    fn drop_partition(table: &str, period: u64) -> String {
        format!("DROP TABLE IF EXISTS {table}_p{period}")
    }

    /// `setval` is not transactional and takes no lock: the next `nextval`
    /// of any session returns `first`.
    fn move_ids(first: u64) -> String {
        format!("SELECT setval(pg_get_serial_sequence('messages', 'id'), {first}, false)")
    }

    // NULL (0) before the first id or right after `move_ids`: MAX(id) says.
    const NEXT_ID: &'static str = "SELECT COALESCE(pg_sequence_last_value(\
         pg_get_serial_sequence('messages', 'id')::REGCLASS), 0) + 1 AS next";

    const DELETE_KEYS: &'static str = "DELETE FROM message_keys WHERE ctid = ANY (ARRAY(\
         SELECT ctid FROM message_keys WHERE message_id >= ? AND message_id < ? LIMIT ?))";
}
