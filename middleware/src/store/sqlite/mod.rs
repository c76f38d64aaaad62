//! SQLite backend: the embedded store for development and single-instance use.
//!
//! Same guarantees as the MySQL backend (see the [`super`] module docs), met the
//! SQLite way:
//! - SQLite has one writer at a time, so there is no SKIP LOCKED: a claim is one
//!   `UPDATE … WHERE id IN (SELECT … LIMIT ?) RETURNING …` statement, which selects
//!   the due rows and pushes their due-time out under the write lock, so two
//!   claimers can never take the same row and a claimer never waits on a half-done
//!   claim.
//! - Multi-statement writes (a decision plus its audit row) run in `BEGIN
//!   IMMEDIATE` transactions: they take the write lock up front, so they queue
//!   behind `busy_timeout` instead of failing on a read-to-write upgrade.
//! - Times are INTEGER milliseconds since the Unix epoch, computed by SQLite from
//!   `julianday('now')` (see [`NOW_MS`]), so the database clock is the clock and
//!   precision is exactly one millisecond, as with MySQL's `DATETIME(3)`.
//! - Files run in WAL mode (readers never block the writer) with `synchronous =
//!   FULL`, because an acknowledged prepare or commit must survive a power cut.
//!   `sqlite::memory:` uses one connection held for the life of the pool, since an
//!   in-memory database lives and dies with its connection.
//!
//! One file per concern, one `impl` of a [`crate::store`] sub-trait in
//! each; this file holds the store itself, its connection, the clock
//! expression and the dialect (`sql::Dialect`, `sql::SqlRow`). `claims.rs`
//! runs the claim every claiming concern builds on (its statements are
//! `sql::returning_claim`'s, shared with PostgreSQL); an operator's guarded
//! change, a tombstone and the one-by-one check-back release are
//! `sql::returning`'s.

mod claims;
mod lifecycle;
mod messages;
mod sends;

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{Row, Sqlite, SqlitePool};

use crate::store::sql::{self, message_from_row, Dialect, SqlRow};
use crate::store::{Message, StoreError, StoreResult};

/// The database clock as INTEGER ms since the epoch. `julianday('now')` holds
/// whole milliseconds, so rounding (not truncating) the float product gives the
/// exact value; 'now' is fixed for the whole statement, so every time a single
/// statement writes is the same instant.
const NOW_MS: &str = "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)";

/// How long a writer waits for the write lock before the call fails (and is retried
/// by its caller as a transient error).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The SQLite store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

/// `sqlite::memory:`, `sqlite://:memory:` or `…?mode=memory`.
fn is_in_memory(url: &str) -> bool {
    let rest = url.trim_start_matches("sqlite:").trim_start_matches("//");
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    path == ":memory:" || query.split('&').any(|kv| kv == "mode=memory")
}

use crate::store::sql::millis;

impl SqliteStore {
    /// Opens (creating if missing) the database at `url`: `sqlite://path.db`,
    /// `sqlite://path.db?mode=rwc` or `sqlite::memory:`.
    pub async fn connect(url: &crate::store::DatabaseUrl) -> StoreResult<Self> {
        let url = url.expose_for_driver();
        let opts = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        let pool = if is_in_memory(url) {
            // One connection, never closed for idleness or age: closing it would
            // drop the database.
            SqlitePoolOptions::new()
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                .acquire_timeout(BUSY_TIMEOUT)
                .connect_with(opts)
                .await?
        } else {
            SqlitePoolOptions::new()
                .max_connections(8)
                .acquire_timeout(BUSY_TIMEOUT)
                .connect_with(
                    opts.journal_mode(SqliteJournalMode::Wal)
                        .synchronous(SqliteSynchronous::Full),
                )
                .await?
        };
        Ok(Self { pool })
    }

    /// The underlying pool.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}

/// SQLite integers are signed; an id or version beyond i64 cannot be stored, so it
/// cannot match anything either.
fn sql_int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(-1)
}

sql::outbox_store!(SqliteStore);
sql::housekeeping_store!(SqliteStore, Sqlite);
sql::alert_store!(SqliteStore);
sql::waiting_store!(SqliteStore, Sqlite);
sql::send_store!(SqliteStore, Sqlite);
sql::verify_store!(SqliteStore, Sqlite, each);
sql::registry_store!(SqliteStore);
sql::ledger_store!(SqliteStore, Sqlite);
sql::operator_store!(SqliteStore, Sqlite, returning);

/// What the concerns written once ([`sql::backend`]) take from this backend.
impl SqliteStore {
    /// What a SELECT appends to lock the rows it reads: nothing: SQLite's one writer holds the whole database.
    const LOCK: &'static str = "";

    /// What a consumption's INSERT ends with: an existing row is left as it is (the write lock holds the database).
    const LEDGER_KEEP: &'static str = "ON CONFLICT (group_name, message_id) DO NOTHING";

    /// Whether a failed statement lost a deadlock (and may be tried again).
    fn lost_a_deadlock(_e: &sqlx::Error) -> bool {
        false
    }

    /// A transaction that will write: `BEGIN IMMEDIATE`: the one writer is taken at the start, not at the first write, so a reader-turned-writer never fails busy.
    async fn write_tx(&self) -> sqlx::Result<sqlx::Transaction<'_, Sqlite>> {
        self.pool.begin_with("BEGIN IMMEDIATE").await
    }
}

impl Dialect for Sqlite {
    const NOW: &'static str = NOW_MS;
    type Int = i64;

    fn int(v: u64) -> i64 {
        sql_int(v)
    }

    fn rows_affected(done: &sqlx::sqlite::SqliteQueryResult) -> u64 {
        done.rows_affected()
    }

    fn last_insert_id(done: &sqlx::sqlite::SqliteQueryResult) -> u64 {
        u64::try_from(done.last_insert_rowid()).unwrap_or(0)
    }

    const RETURNING_ID: &'static str = "";
    const NUMBERED_PLACEHOLDERS: bool = false;
    const INSERT_IGNORE: &'static str = "INSERT OR IGNORE";
    const IGNORED: &'static str = "";
    const NO_BYTES: &'static str = "X''";
    const SIGNED: &'static str = "INTEGER";

    const MINUS_SPAN: &'static str = " - ?";
    const GREATEST: &'static str = "MAX";
    const PLUS_SPAN: &'static str = " + ?";

    fn span(d: Duration) -> i64 {
        millis(d)
    }

    type Time = i64;

    fn time(t: DateTime<Utc>) -> i64 {
        t.timestamp_millis()
    }

    /// From `dbstat`, the pages of each table and its indexes (dev mode:
    /// it reads every page, which a small database makes cheap): the
    /// cells of a table's leaf pages are its rows, exactly.
    fn table_sizes(tables: &str) -> String {
        format!(
            "SELECT m.tbl_name AS name, \
             SUM(CASE WHEN m.type = 'table' AND s.pagetype = 'leaf' THEN s.ncell ELSE 0 END) \
             AS row_estimate, SUM(s.pgsize) AS bytes \
             FROM dbstat AS s JOIN sqlite_master AS m ON m.name = s.name \
             WHERE m.tbl_name IN ({tables}) GROUP BY m.tbl_name"
        )
    }
}

impl SqlRow for SqliteRow {
    fn opt_text(&self, col: &str) -> StoreResult<Option<String>> {
        self.try_get(col).map_err(|e| sql::column_error(col, e))
    }

    fn opt_bytes(&self, col: &str) -> StoreResult<Option<Vec<u8>>> {
        self.try_get(col).map_err(|e| sql::column_error(col, e))
    }

    fn opt_i64(&self, col: &str) -> StoreResult<Option<i64>> {
        self.try_get(col).map_err(|e| sql::column_error(col, e))
    }

    /// Times are INTEGER milliseconds since the epoch.
    fn opt_time(&self, col: &str) -> StoreResult<Option<DateTime<Utc>>> {
        self.opt_i64(col)?
            .map(|ms| {
                DateTime::from_timestamp_millis(ms)
                    .ok_or_else(|| StoreError::Corrupt(format!("{col} = {ms} is not a time")))
            })
            .transpose()
    }
}

/// The first row of a RETURNING statement. The whole statement runs to completion
/// (`fetch_all`), so it never stays half-stepped holding the write lock.
fn first_message(rows: &[SqliteRow]) -> StoreResult<Option<Message>> {
    rows.first().map(message_from_row).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_memory_urls_are_recognised() {
        assert!(is_in_memory("sqlite::memory:"));
        assert!(is_in_memory("sqlite://:memory:"));
        assert!(is_in_memory("sqlite://x.db?mode=memory"));
        assert!(!is_in_memory("sqlite://x.db?mode=rwc"));
        assert!(!is_in_memory("sqlite:memory.db"));
    }
}
