//! MySQL (≥ 8.0) / MariaDB (≥ 10.6) backend: the production store.
//!
//! Claims use `SELECT … FOR UPDATE SKIP LOCKED` so concurrent instances split
//! the due rows between them instead of queueing on each other's locks. All
//! times come from `UTC_TIMESTAMP(3)`, the database clock.
//!
//! One file per concern, one `impl` of a [`crate::store`] sub-trait in
//! each; this file holds the store itself, its connection (READ COMMITTED,
//! and whether the server takes `INSERT … RETURNING`), the dialect
//! (`sql::Dialect`, `sql::SqlRow`) and the
//! few reads the concerns share. `claims.rs`, `prepare.rs` and
//! `transitions.rs` hold the statements more than one concern builds on.

mod claims;
mod committed;
mod lifecycle;
mod messages;
mod operator;
mod partitions;
mod prepare;
mod sends;
mod transitions;
mod upgrade;
mod verifies;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions, MySqlRow};
use sqlx::{Connection, MySql, MySqlPool, QueryBuilder, Row};

use crate::store::db_clock::DbClock;
use crate::store::sql::{self, message_from_row, Dialect, SqlRow, MESSAGE_COLUMNS};
use crate::store::{Message, StoreError, StoreResult};

/// The MySQL/MariaDB store.
#[derive(Debug, Clone)]
pub struct MySqlStore {
    pool: MySqlPool,
    /// The server takes `INSERT … RETURNING` (MariaDB ≥ 10.5; MySQL does
    /// not): a prepare then needs no read-back.
    returning: bool,
    /// The database clock for the producers' decision batches.
    clock: DbClock,
    /// Where retention's row purge stops: the end of the newest partition
    /// held past retention, as the last upkeep this instance led found it
    /// (`sql::partitions`).
    held_below: Arc<AtomicU64>,
}

impl MySqlStore {
    /// Connects a pool to `url` (`mysql://user:pass@host:port/db`).
    pub async fn connect(url: &crate::store::DatabaseUrl) -> StoreResult<Self> {
        let opts: MySqlConnectOptions = url.expose_for_driver().parse()?;
        let pool = MySqlPoolOptions::new()
            .max_connections(32)
            .acquire_timeout(Duration::from_secs(10))
            // READ COMMITTED: claims scan due rows with FOR UPDATE SKIP LOCKED;
            // under REPEATABLE READ that scan also takes gap locks, which block
            // concurrent prepares' INSERTs and deadlock with them. No statement
            // here needs a repeatable snapshot: every write is a guarded UPDATE.
            .after_connect(|conn, _| {
                Box::pin(async move {
                    sqlx::query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                        .execute(conn)
                        .await?;
                    Ok(())
                })
            })
            // A connection a worker abandoned mid-statement may never answer
            // again; right after one was, close what comes back instead of
            // testing it with a ping that would wait behind the lost statement.
            .after_release(|conn, _| {
                // A statement with large payloads grows the connection's
                // buffers to its size, and they stay that size: up to 32
                // connections would each keep the largest batch they ever
                // carried. Back to 8 KiB (a no-op for a small statement).
                conn.shrink_buffers();
                Box::pin(async { Ok(crate::store::deadline::reuse_released()) })
            })
            .connect_with(opts)
            .await?;
        let version: String = sqlx::query_scalar("SELECT CAST(VERSION() AS CHAR)")
            .fetch_one(&pool)
            .await?;
        Ok(Self {
            pool,
            returning: takes_insert_returning(&version),
            clock: DbClock::default(),
            held_below: Arc::default(),
        })
    }

    /// The same store without `INSERT … RETURNING`, as on MySQL (for tests
    /// that hold both paths to the same outcomes on one server).
    pub fn without_insert_returning(self) -> Self {
        Self {
            returning: false,
            ..self
        }
    }

    /// The underlying pool.
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }
}

/// Whether a server of this `VERSION()` takes `INSERT … RETURNING`: MariaDB
/// from 10.5 on (`10.11.19-MariaDB-…`); MySQL never.
fn takes_insert_returning(version: &str) -> bool {
    if !version.contains("MariaDB") {
        return false;
    }
    let mut parts = version
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (10, 5)
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

sql::outbox_store!(MySqlStore);
sql::housekeeping_store!(MySqlStore, MySql, partitioned);
sql::alert_store!(MySqlStore);
sql::waiting_store!(MySqlStore, MySql);
sql::send_store!(MySqlStore, MySql);
sql::verify_store!(MySqlStore);
sql::registry_store!(MySqlStore);
sql::ledger_store!(MySqlStore, MySql);
sql::operator_store!(MySqlStore, MySql);

/// What the concerns written once ([`sql::backend`]) take from this backend.
impl MySqlStore {
    /// What a SELECT appends to lock the rows it reads: row locks until the transaction ends.
    const LOCK: &'static str = " FOR UPDATE";

    /// What a consumption's INSERT ends with: the upsert X-locks an existing row as the INSERT locks a new one.
    const LEDGER_KEEP: &'static str = "ON DUPLICATE KEY UPDATE attempts = attempts";

    /// Whether a failed statement lost a deadlock (and may be tried again).
    fn lost_a_deadlock(e: &sqlx::Error) -> bool {
        is_lock_conflict(e)
    }

    /// A transaction that will write: a plain `BEGIN`.
    async fn write_tx(&self) -> sqlx::Result<sqlx::Transaction<'_, MySql>> {
        self.pool.begin().await
    }
}

impl Dialect for MySql {
    const NOW: &'static str = "UTC_TIMESTAMP(3)";
    type Int = u64;

    fn int(v: u64) -> u64 {
        v
    }

    fn rows_affected(done: &sqlx::mysql::MySqlQueryResult) -> u64 {
        done.rows_affected()
    }

    fn last_insert_id(done: &sqlx::mysql::MySqlQueryResult) -> u64 {
        done.last_insert_id()
    }

    const RETURNING_ID: &'static str = "";
    const NUMBERED_PLACEHOLDERS: bool = false;
    const INSERT_IGNORE: &'static str = "INSERT IGNORE";
    const IGNORED: &'static str = "";
    const NO_BYTES: &'static str = "X''";
    const SIGNED: &'static str = "SIGNED";

    const MINUS_SPAN: &'static str = " - INTERVAL ? MICROSECOND";
    const GREATEST: &'static str = "GREATEST";
    const PLUS_SPAN: &'static str = " + INTERVAL ? MICROSECOND";

    fn span(d: Duration) -> i64 {
        micros(d)
    }

    type Time = DateTime<Utc>;

    fn time(t: DateTime<Utc>) -> DateTime<Utc> {
        t
    }

    fn on_duplicate(_key: &str) -> String {
        "ON DUPLICATE KEY UPDATE".into()
    }

    fn proposed(c: &str) -> String {
        format!("VALUES({c})")
    }

    const UPSERT_RETURNS: bool = false;

    /// `information_schema.TABLES`, which sums a partitioned table's
    /// partitions itself. InnoDB's row count there is its statistics'
    /// estimate; MySQL 8 also caches these columns for
    /// `information_schema_stats_expiry` (a day by default; MariaDB does
    /// not cache them): set it lower for fresher figures.
    fn table_sizes(tables: &str) -> String {
        format!(
            "SELECT TABLE_NAME AS name, CAST(COALESCE(TABLE_ROWS, 0) AS SIGNED) AS row_estimate, \
             CAST(COALESCE(DATA_LENGTH, 0) + COALESCE(INDEX_LENGTH, 0) AS SIGNED) AS bytes \
             FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ({tables})"
        )
    }
}

impl SqlRow for MySqlRow {
    /// Text columns use a binary collation (keys compare byte for byte), which
    /// the MySQL protocol reports as binary: read them as bytes, check the UTF-8.
    fn opt_text(&self, col: &str) -> StoreResult<Option<String>> {
        self.opt_bytes(col)?
            .map(|b| {
                String::from_utf8(b).map_err(|_| StoreError::Corrupt(format!("{col} is not UTF-8")))
            })
            .transpose()
    }

    fn opt_bytes(&self, col: &str) -> StoreResult<Option<Vec<u8>>> {
        self.try_get(col).map_err(|e| sql::column_error(col, e))
    }

    fn opt_u64(&self, col: &str) -> StoreResult<Option<u64>> {
        self.try_get(col).map_err(|e| sql::column_error(col, e))
    }

    fn opt_i64(&self, col: &str) -> StoreResult<Option<i64>> {
        self.try_get(col).map_err(|e| sql::column_error(col, e))
    }

    fn opt_time(&self, col: &str) -> StoreResult<Option<DateTime<Utc>>> {
        self.try_get(col).map_err(|e| sql::column_error(col, e))
    }
}

async fn select_messages_by_ids<'e, E>(exec: E, ids: &[u64]) -> StoreResult<Vec<Message>>
where
    E: sqlx::Executor<'e, Database = MySql>,
{
    select_rows_by_ids(exec, MESSAGE_COLUMNS, ids)
        .await?
        .iter()
        .map(message_from_row)
        .collect()
}

/// The undecoded rows of `ids` (`columns` of each), in id order.
async fn select_rows_by_ids<'e, E>(
    exec: E,
    columns: &str,
    ids: &[u64],
) -> StoreResult<Vec<MySqlRow>>
where
    E: sqlx::Executor<'e, Database = MySql>,
{
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut q = QueryBuilder::<MySql>::new(format!("SELECT {columns} FROM messages WHERE id IN ("));
    let mut sep = q.separated(", ");
    for id in ids {
        sep.push_bind(*id);
    }
    q.push(") ORDER BY id");
    Ok(q.build().fetch_all(exec).await?)
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// A lost lock race is not an error for a guarded write: the guard simply did not win.
fn is_lock_conflict(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if matches!(db.code().as_deref(), Some("40001") | Some("HY000"))
        && (db.message().contains("Deadlock") || db.message().contains("Lock wait timeout")))
}

#[cfg(test)]
mod tests {
    use super::takes_insert_returning;

    #[test]
    fn insert_returning_is_used_on_mariadb_from_10_5_only() {
        assert!(takes_insert_returning("10.11.19-MariaDB-0+deb12u1"));
        assert!(takes_insert_returning("11.4.2-MariaDB"));
        assert!(takes_insert_returning("10.5.0-MariaDB-log"));
        assert!(!takes_insert_returning("10.4.34-MariaDB"));
        assert!(!takes_insert_returning("8.0.36"));
        assert!(!takes_insert_returning("8.4.0-0ubuntu0.24.04.1"));
    }
}
