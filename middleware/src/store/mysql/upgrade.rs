//! Migration 0020 (time partitions) on a MySQL/MariaDB store that holds
//! rows, online: the file's `ALTER TABLE … PARTITION BY` copies each table
//! while writes to it wait (39.7 s for a million messages here), so instead
//! each table is copied into a partitioned twin a chunk at a time while
//! triggers carry every write made meanwhile across (the way
//! pt-online-schema-change does it), and the twins take the tables' names
//! in one atomic `RENAME TABLE`. A write waits at most for one chunk's copy,
//! and an instance of the previous release may keep serving throughout: the
//! key trigger the twin of `messages` carries keeps its prepares unique.
//!
//! Every step can be cut off and started again: a copy cut off is thrown
//! away and begun anew; once the tables are swapped, what is left is
//! finished. What it leaves is what the file makes (the same tables,
//! indexes, partition and trigger: `tests/it/store/partitions.rs` compares
//! them), so migration 0020 is then recorded with nothing left to run.

use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::{AssertSqlSafe, MySql, Row};

use super::partitions::partition_names_in;
use crate::store::sql::{
    first_id, partitions_migrated, period_of, periods, PartitionDdl, SqlRow, AHEAD,
};
use crate::store::{migrations, StoreResult};

/// Rows of the partition column's values per chunk copied: a write to the
/// rows being copied waits for at most this many.
const CHUNK: u64 = 2_000;

/// Each partitioned table: its partition column, the columns its new
/// primary key names, and what else the file's ALTER changes.
const TABLES: [(&str, &str, &[&str], &str); 5] = [
    (
        "messages",
        "id",
        &["id"],
        "DROP INDEX uk_messages_biz_key, ADD KEY idx_messages_biz_key (biz_id, message_key)",
    ),
    (
        "audit_log",
        "message_id",
        &["id", "message_id"],
        "DROP PRIMARY KEY, ADD PRIMARY KEY (id, message_id)",
    ),
    (
        "check_attempts",
        "message_id",
        &["id", "message_id"],
        "DROP PRIMARY KEY, ADD PRIMARY KEY (id, message_id)",
    ),
    (
        "consumptions",
        "message_id",
        &["group_name", "message_id"],
        "",
    ),
    ("message_payloads", "message_id", &["message_id"], ""),
];

/// The twin's name, and the old table's once swapped.
fn twin(table: &str) -> String {
    format!("{table}_0020new")
}
fn old(table: &str) -> String {
    format!("{table}_0020old")
}

/// What migration 0020's file is replaced by once the online steps ran.
pub(super) const LEFT_TO_RUN: &str = "DO 0";

/// The online upgrade, when migration 0020 is not applied and `messages`
/// holds rows: returns whether it ran (the file is then replaced by
/// [`LEFT_TO_RUN`]). Runs under the migration lock.
pub(super) async fn time_partitions_online(conn: &mut PoolConnection<MySql>) -> StoreResult<bool> {
    if partitions_migrated::<MySql>(&mut **conn).await? {
        return Ok(false);
    }
    let partitioned = partitioned(conn, "messages").await?;
    let rows = sqlx::query("SELECT id FROM messages LIMIT 1")
        .fetch_optional(&mut **conn)
        .await?
        .is_some();
    if !partitioned && !rows {
        // Empty: the file's ALTERs copy nothing.
        return Ok(false);
    }
    let started = Instant::now();
    for table in keys_and_periods() {
        exec(conn, &table).await?;
    }
    if !partitioned {
        clear_leftovers(conn).await?;
        exec(conn, "DELETE FROM message_keys").await?;
        let period: Option<u64> =
            sqlx::query_scalar("SELECT CAST(MAX(id) AS UNSIGNED) FROM messages")
                .fetch_one(&mut **conn)
                .await?;
        let period = period_of(period.unwrap_or(0));
        for (table, column, key, alter) in TABLES {
            make_twin(conn, table, column, key, alter, period).await?;
        }
        let mut copied = 0;
        for (table, column, ..) in TABLES {
            copied += copy(conn, table, column).await?;
        }
        swap(conn).await?;
        tracing::info!(
            rows = copied,
            took_ms = started.elapsed().as_millis() as u64,
            "migration 0020: the tables are copied into time partitions online"
        );
    }
    // The first partition's period opens now, as the file opens it.
    let first = periods::<MySql>(&mut **conn, "messages").await?;
    let first = first.first().copied().unwrap_or(0);
    sqlx::query(
        "INSERT IGNORE INTO message_partitions (period, opened_at) VALUES (?, UTC_TIMESTAMP(3))",
    )
    .bind(first)
    .execute(&mut **conn)
    .await?;
    for (table, ..) in TABLES {
        exec(conn, &format!("DROP TABLE IF EXISTS {}", old(table))).await?;
    }
    Ok(true)
}

/// A statement of migration 0020's file, as it is there.
fn of_the_file(head: &str) -> String {
    let all = migrations::mysql();
    migrations::statement(&all, migrations::TIME_PARTITIONS, head)
}

/// `message_keys` and `message_partitions` as the file makes them.
fn keys_and_periods() -> [String; 2] {
    [
        "CREATE TABLE message_keys",
        "CREATE TABLE message_partitions",
    ]
    .map(|head| of_the_file(head).replacen("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1))
}

/// The trigger the file puts on `messages`, here on its twin: the copied
/// rows and the ones the mirror carries fill `message_keys` as they land.
fn key_trigger() -> String {
    of_the_file("CREATE TRIGGER messages_key").replacen(" ON messages ", " ON messages_0020new ", 1)
}

async fn exec(conn: &mut PoolConnection<MySql>, sql: &str) -> StoreResult<()> {
    sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
        .execute(&mut **conn)
        .await?;
    Ok(())
}

/// Whether `table` has partitions (read as the upkeep reads them, not
/// from `information_schema.PARTITIONS`: see `MySql::partition_names`).
async fn partitioned(conn: &mut PoolConnection<MySql>, table: &str) -> StoreResult<bool> {
    let row = sqlx::query(AssertSqlSafe(MySql::partition_names(table)))
        .fetch_one(&mut **conn)
        .await?;
    let create = row.text(MySql::PARTITION_NAMES_COLUMN)?;
    Ok(!partition_names_in(&create).is_empty())
}

/// What a copy cut off left: the mirror triggers go with their twins' drop
/// (they belong to the old tables, so they are dropped by name).
async fn clear_leftovers(conn: &mut PoolConnection<MySql>) -> StoreResult<()> {
    for (table, ..) in TABLES {
        for what in ["ins", "upd", "del"] {
            exec(conn, &format!("DROP TRIGGER IF EXISTS {table}_0020{what}")).await?;
        }
        exec(conn, &format!("DROP TABLE IF EXISTS {}", twin(table))).await?;
    }
    Ok(())
}

/// The columns of `table`, in order.
async fn columns(conn: &mut PoolConnection<MySql>, table: &str) -> StoreResult<Vec<String>> {
    let rows = sqlx::query(
        "SELECT CAST(COLUMN_NAME AS CHAR) AS name FROM information_schema.COLUMNS \
         WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
    )
    .bind(table)
    .fetch_all(&mut **conn)
    .await?;
    Ok(rows.iter().map(|r| r.get::<String, _>("name")).collect())
}

/// The empty partitioned twin of `table`, as the file's ALTER leaves it,
/// with the partition of `period` (and the two ahead, so that ids handed
/// out meanwhile find one), and the triggers that carry `table`'s writes
/// across from now on.
async fn make_twin(
    conn: &mut PoolConnection<MySql>,
    table: &str,
    column: &str,
    key: &[&str],
    alter: &str,
    period: u64,
) -> StoreResult<()> {
    let new = twin(table);
    exec(conn, &format!("CREATE TABLE {new} LIKE {table}")).await?;
    let partitions = (period..=period + AHEAD)
        .map(|p| format!("PARTITION p{p} VALUES LESS THAN ({})", first_id(p + 1)))
        .collect::<Vec<_>>()
        .join(", ");
    exec(
        conn,
        &format!("ALTER TABLE {new} {alter} PARTITION BY RANGE ({column}) ({partitions})"),
    )
    .await?;
    if table == "messages" {
        exec(conn, &key_trigger()).await?;
    }
    let cols = columns(conn, table).await?;
    let list = cols.join(", ");
    let values = |row: &str| {
        cols.iter()
            .map(|c| format!("{row}.{c}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let update = cols
        .iter()
        .map(|c| format!("{c} = VALUES({c})"))
        .collect::<Vec<_>>()
        .join(", ");
    let upsert = format!(
        "INSERT INTO {new} ({list}) VALUES ({}) ON DUPLICATE KEY UPDATE {update}",
        values("NEW")
    );
    let matches = key
        .iter()
        .map(|c| format!("{c} = OLD.{c}"))
        .collect::<Vec<_>>()
        .join(" AND ");
    // A message deleted meanwhile (an older instance's retention) takes
    // its key along, as the service's own deletes do.
    let delete = match table {
        "messages" => format!(
            "BEGIN DELETE FROM {new} WHERE {matches}; DELETE FROM message_keys WHERE \
             biz_id = OLD.biz_id AND message_key = OLD.message_key AND message_id = OLD.id; END"
        ),
        _ => format!("DELETE FROM {new} WHERE {matches}"),
    };
    for (what, event, body) in [
        ("ins", "INSERT", &upsert),
        ("upd", "UPDATE", &upsert),
        ("del", "DELETE", &delete),
    ] {
        exec(
            conn,
            &format!(
                "CREATE TRIGGER {table}_0020{what} AFTER {event} ON {table} FOR EACH ROW {body}"
            ),
        )
        .await?;
    }
    Ok(())
}

/// Copies `table` into its twin, a chunk of [`CHUNK`] values of its
/// partition column at a time, each in a statement of its own; a row the
/// mirror carried across first is kept as it is (not `INSERT IGNORE`, which
/// would also pass over a row that fits no partition, silently). Returns
/// the rows copied or kept.
async fn copy(conn: &mut PoolConnection<MySql>, table: &str, column: &str) -> StoreResult<u64> {
    let list = columns(conn, table).await?.join(", ");
    let new = twin(table);
    let (mut from, mut copied) = (0u64, 0u64);
    loop {
        let to: Option<u64> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT CAST(MAX({column}) AS UNSIGNED) FROM (SELECT {column} FROM {table} \
             WHERE {column} >= ? ORDER BY {column} LIMIT {CHUNK}) chunk"
        )))
        .bind(from)
        .fetch_one(&mut **conn)
        .await?;
        let Some(to) = to else {
            return Ok(copied);
        };
        copied += sqlx::query(AssertSqlSafe(format!(
            "INSERT INTO {new} ({list}) SELECT {list} FROM {table} \
             WHERE {column} >= ? AND {column} <= ? \
             ON DUPLICATE KEY UPDATE {new}.{column} = {new}.{column}"
        )))
        .bind(from)
        .bind(to)
        .execute(&mut **conn)
        .await?
        .rows_affected();
        from = to + 1;
    }
}

/// The twins take the tables' names, all five in one atomic statement; the
/// id counters go on from the old tables' (an id is never handed out twice,
/// not even a deleted message's).
async fn swap(conn: &mut PoolConnection<MySql>) -> StoreResult<()> {
    // A rename waits for the statements under way on the tables; the
    // writes queued behind it wait as long, so it does not wait long.
    exec(conn, "SET SESSION lock_wait_timeout = 5").await?;
    for table in ["messages", "audit_log", "check_attempts"] {
        let next: Option<u64> = sqlx::query_scalar(
            "SELECT CAST(AUTO_INCREMENT AS UNSIGNED) FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
        )
        .bind(table)
        .fetch_one(&mut **conn)
        .await?;
        if let Some(next) = next {
            exec(
                conn,
                &format!("ALTER TABLE {} AUTO_INCREMENT = {next}", twin(table)),
            )
            .await?;
        }
    }
    let renames = TABLES
        .iter()
        .map(|(t, ..)| format!("{t} TO {}, {} TO {t}", old(t), twin(t)))
        .collect::<Vec<_>>()
        .join(", ");
    let mut tries = 0;
    loop {
        match exec(conn, &format!("RENAME TABLE {renames}")).await {
            Ok(()) => break,
            Err(e) if tries < 12 => {
                tries += 1;
                tracing::warn!(error = %e, "migration 0020: the tables are busy; trying the swap again");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => return Err(e),
        }
    }
    exec(conn, "SET SESSION lock_wait_timeout = DEFAULT").await
}
