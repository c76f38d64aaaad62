//! A producer's database holding its outbox table: the statements the relay,
//! the source's gauges, retention and the operators' actions run on it,
//! in each dialect a source may be (MySQL/MariaDB, PostgreSQL, SQLite).
//!
//! The relay's claim is a transaction on one connection of its own: it
//! selects pending rows `FOR UPDATE SKIP LOCKED` (READ COMMITTED, so no gap
//! lock ever blocks a producer's INSERT), keeps them locked while their
//! messages are written to trustmsg, then marks them relayed or failed and
//! commits. A relay that dies mid-batch leaves nothing behind: its
//! connection closes, the transaction rolls back, the rows are pending again
//! and whoever relays them next finds their messages already in trustmsg
//! (same key, same content: nothing is created twice). No lease to wait
//! out, no claim column to write.
//!
//! One instance relays a source at a time: the relay's connection holds a
//! named lock (`GET_LOCK` on MySQL; on PostgreSQL a session advisory lock,
//! `pg_try_advisory_lock`, on a key derived from the database's and the
//! table's names) for as long as it lives; the others wait as standbys and
//! take over within a second of its connection closing. The row locks keep
//! two relays apart even if the named lock were lost.
//!
//! PostgreSQL's claim is the same as MySQL's: READ COMMITTED (its default,
//! made explicit), `FOR UPDATE OF o SKIP LOCKED`. Its planner locks rows as
//! the LIMIT takes them, so no index needs naming. Its text columns are
//! read as their UTF-8 bytes (`convert_to`) and its `timestamptz` columns
//! in UTC, so the rows come out as from MySQL.

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection, MySqlPool, MySqlPoolOptions};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqlitePool, SqlitePoolOptions};
use sqlx::Row;

use crate::store::{Backend, DatabaseUrl};

/// A row as the relay reads it.
#[derive(Debug, Clone)]
pub(crate) struct SourceRow {
    pub(crate) id: u64,
    /// The columns as bytes: text that is not UTF-8 fails the row, it does
    /// not stop the batch.
    pub(crate) message_key: Vec<u8>,
    pub(crate) topic: Vec<u8>,
    pub(crate) record_key: Option<Vec<u8>>,
    pub(crate) payload: Vec<u8>,
    pub(crate) headers: Option<Vec<u8>>,
    pub(crate) content_type: Option<Vec<u8>>,
    pub(crate) deliver_at: Option<DateTime<Utc>>,
    pub(crate) traceparent: Option<Vec<u8>>,
    pub(crate) retry_count: u32,
}

/// A row as operators see it (no payload).
#[derive(Debug, Clone)]
pub(crate) struct ListedRow {
    pub(crate) id: u64,
    pub(crate) message_key: String,
    pub(crate) topic: String,
    pub(crate) record_key: Option<String>,
    pub(crate) status: i64,
    pub(crate) retry_count: u32,
    pub(crate) fail_reason: Option<String>,
    pub(crate) last_execute_time: Option<DateTime<Utc>>,
    pub(crate) created: Option<NaiveDateTime>,
}

/// The source's gauges.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SourceStats {
    pub(crate) pending: u64,
    /// How long the oldest pending row (lowest id) has waited.
    pub(crate) oldest_pending_age: Option<Duration>,
    pub(crate) failed: u64,
}

/// Rows counted at most, so that a huge backlog costs a bounded scan.
const COUNT_CAP: u64 = 1_000_000;

/// Lanes relaying one source at once, for a producer that is not ordered
/// (a source's pool holds a connection for each, and two more).
pub(crate) const LANES: usize = 4;

/// The statuses of the table (seed 001's numbering, plus 4 for a row an
/// operator gave up).
pub(crate) mod status {
    pub(crate) const PENDING: i64 = 0;
    pub(crate) const RELAYED: i64 = 2;
    pub(crate) const FAILED: i64 = 3;
    pub(crate) const GIVEN_UP: i64 = 4;

    /// The name of a status, for operators.
    pub(crate) fn name(s: i64) -> &'static str {
        match s {
            PENDING => "pending",
            RELAYED => "relayed",
            FAILED => "failed",
            GIVEN_UP => "given_up",
            _ => "unknown",
        }
    }
}

/// A source database: a small pool (the relay's connections are taken out
/// of it for good; the gauges and operators' actions share the rest).
#[derive(Debug, Clone)]
pub(crate) enum SourceDb {
    MySql { pool: MySqlPool, table: String },
    Postgres { pool: PgPool, table: String },
    Sqlite { pool: SqlitePool, table: String },
}

/// The relay's own connection, holding the source's named lock and, between
/// [`RelayConn::claim`] and [`RelayConn::finish`], its batch's row locks.
///
/// Detached from the pool: dropped, it closes, and the server rolls back its
/// transaction and frees its lock. (Given back to the pool it would keep
/// both while it waits there: the named lock with nobody relaying.)
pub(crate) enum RelayConn {
    MySql {
        conn: MySqlConnection,
        table: String,
    },
    Postgres {
        conn: PgConnection,
        table: String,
    },
    Sqlite {
        conn: SqliteConnection,
        table: String,
    },
}

fn utc(t: Option<NaiveDateTime>) -> Option<DateTime<Utc>> {
    t.map(|t| t.and_utc())
}

/// The columns the relay reads (`headers` as text: a JSON column comes as
/// its own type otherwise).
fn claim_columns(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::MySql => {
            "CAST(id AS SIGNED) AS id, message_key, topic, record_key, payload, \
             CAST(headers AS CHAR) AS headers, content_type, deliver_at, traceparent, \
             CAST(retry_count AS SIGNED) AS retry_count"
        }
        Dialect::Postgres => {
            "o.id, convert_to(o.message_key, 'UTF8'), convert_to(o.topic, 'UTF8'), \
             convert_to(o.record_key, 'UTF8'), o.payload, convert_to(o.headers::text, 'UTF8'), \
             convert_to(o.content_type, 'UTF8'), o.deliver_at AT TIME ZONE 'UTC', \
             convert_to(o.traceparent, 'UTF8'), o.retry_count::bigint"
        }
        Dialect::Sqlite => {
            "id, message_key, topic, record_key, CAST(payload AS BLOB) AS payload, headers, \
             content_type, deliver_at, traceparent, retry_count"
        }
    }
}

/// Which SQL a statement is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    MySql,
    Postgres,
    Sqlite,
}

fn source_row<R: Row>(r: &R) -> Result<SourceRow, sqlx::Error>
where
    for<'a> i64: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    for<'a> Vec<u8>: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    for<'a> Option<Vec<u8>>: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    for<'a> Option<NaiveDateTime>: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    usize: sqlx::ColumnIndex<R>,
{
    let id: i64 = r.try_get(0)?;
    let retry: i64 = r.try_get(9)?;
    Ok(SourceRow {
        id: u64::try_from(id).unwrap_or_default(),
        message_key: r.try_get(1)?,
        topic: r.try_get(2)?,
        record_key: r.try_get(3)?,
        payload: r.try_get(4)?,
        headers: r.try_get(5)?,
        content_type: r.try_get(6)?,
        deliver_at: utc(r.try_get(7)?),
        traceparent: r.try_get(8)?,
        retry_count: u32::try_from(retry).unwrap_or(u32::MAX),
    })
}

fn text(b: Vec<u8>) -> String {
    String::from_utf8_lossy(&b).into_owned()
}

fn listed_row<R: Row>(r: &R) -> Result<ListedRow, sqlx::Error>
where
    for<'a> i64: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    for<'a> Vec<u8>: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    for<'a> Option<Vec<u8>>: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    for<'a> Option<NaiveDateTime>: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    usize: sqlx::ColumnIndex<R>,
{
    let id: i64 = r.try_get(0)?;
    let retry: i64 = r.try_get(5)?;
    Ok(ListedRow {
        id: u64::try_from(id).unwrap_or_default(),
        message_key: text(r.try_get(1)?),
        topic: text(r.try_get(2)?),
        record_key: r.try_get::<Option<Vec<u8>>, _>(3)?.map(text),
        status: r.try_get(4)?,
        retry_count: u32::try_from(retry).unwrap_or(u32::MAX),
        fail_reason: r.try_get::<Option<Vec<u8>>, _>(6)?.map(text),
        last_execute_time: utc(r.try_get(7)?),
        created: r.try_get(8)?,
    })
}

const LIST_COLUMNS: &str =
    "CAST(id AS SIGNED) AS id, message_key, topic, record_key, CAST(status AS SIGNED) AS status, \
     CAST(retry_count AS SIGNED) AS retry_count, fail_reason, last_execute_time, gmt_create";
const LIST_COLUMNS_SQLITE: &str = "id, message_key, topic, record_key, status, retry_count, \
     fail_reason, last_execute_time, gmt_create";
const LIST_COLUMNS_POSTGRES: &str = "id, convert_to(message_key, 'UTF8'), \
     convert_to(topic, 'UTF8'), convert_to(record_key, 'UTF8'), status::bigint, \
     retry_count::bigint, convert_to(fail_reason, 'UTF8'), last_execute_time AT TIME ZONE 'UTC', \
     gmt_create AT TIME ZONE 'UTC'";

impl SourceDb {
    /// A pool on `url` (connections are made when first needed, so a source
    /// that is down now does not stop the start).
    pub(crate) fn new(url: &DatabaseUrl, table: &str) -> Result<Self, sqlx::Error> {
        let table = table.to_string();
        Ok(match url.backend() {
            Backend::MySql => {
                let opts = MySqlConnectOptions::from_str(url.expose_for_driver())?;
                let pool = MySqlPoolOptions::new()
                    .max_connections(LANES as u32 + 2)
                    .min_connections(0)
                    .acquire_timeout(Duration::from_secs(5))
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            // READ COMMITTED: the claim's locking read takes no
                            // gap locks, so producers' INSERTs never wait on it.
                            // A lock wait (a row another relay holds, which
                            // SKIP LOCKED avoids anyway) gives up in 5 s.
                            sqlx::query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                                .execute(&mut *conn)
                                .await?;
                            sqlx::query("SET SESSION innodb_lock_wait_timeout = 5")
                                .execute(&mut *conn)
                                .await?;
                            Ok(())
                        })
                    })
                    .connect_lazy_with(opts);
                Self::MySql { pool, table }
            }
            Backend::Postgres => {
                // TLS (`sslmode=verify-full&sslrootcert=…`) is read from the
                // URL by sqlx, as for MySQL.
                let opts = PgConnectOptions::from_str(url.expose_for_driver())?;
                let pool = PgPoolOptions::new()
                    .max_connections(LANES as u32 + 2)
                    .min_connections(0)
                    .acquire_timeout(Duration::from_secs(5))
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            // As on MySQL: READ COMMITTED whatever the
                            // server's default, and a lock wait (which SKIP
                            // LOCKED avoids) gives up in 5 s.
                            sqlx::raw_sql(
                                "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL \
                                 READ COMMITTED; SET lock_timeout = '5s'",
                            )
                            .execute(&mut *conn)
                            .await?;
                            Ok(())
                        })
                    })
                    .connect_lazy_with(opts);
                Self::Postgres { pool, table }
            }
            Backend::Sqlite => {
                let opts = SqliteConnectOptions::from_str(url.expose_for_driver())?
                    .busy_timeout(Duration::from_secs(5));
                let pool = SqlitePoolOptions::new()
                    .max_connections(LANES as u32 + 2)
                    .min_connections(0)
                    .acquire_timeout(Duration::from_secs(5))
                    .connect_lazy_with(opts);
                Self::Sqlite { pool, table }
            }
        })
    }

    /// Takes a connection out of the pool for the relay, for good.
    pub(crate) async fn relay_conn(&self) -> Result<RelayConn, sqlx::Error> {
        Ok(match self {
            Self::MySql { pool, table } => RelayConn::MySql {
                conn: pool.acquire().await?.detach(),
                table: table.clone(),
            },
            Self::Postgres { pool, table } => RelayConn::Postgres {
                conn: pool.acquire().await?.detach(),
                table: table.clone(),
            },
            Self::Sqlite { pool, table } => RelayConn::Sqlite {
                conn: pool.acquire().await?.detach(),
                table: table.clone(),
            },
        })
    }

    /// The source's gauges: pending rows (counted up to a cap), the age of
    /// the oldest, failed rows.
    pub(crate) async fn stats(&self) -> Result<SourceStats, sqlx::Error> {
        match self {
            Self::MySql { pool, table } => {
                let (pending, failed): (i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM {table} WHERE status = 0 \
                     LIMIT {COUNT_CAP}) p), (SELECT COUNT(*) FROM {table} WHERE status = 3)"
                )))
                .fetch_one(pool)
                .await?;
                let age: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                    "SELECT TIMESTAMPDIFF(MICROSECOND, gmt_create, NOW(3)) FROM {table} \
                     WHERE status = 0 ORDER BY id LIMIT 1"
                )))
                .fetch_optional(pool)
                .await?
                .flatten();
                Ok(stats(pending, failed, age.map(|us| us / 1000)))
            }
            Self::Postgres { pool, table } => {
                let (pending, failed): (i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM {table} WHERE status = 0 \
                     LIMIT {COUNT_CAP}) p), (SELECT COUNT(*) FROM {table} WHERE status = 3)"
                )))
                .fetch_one(pool)
                .await?;
                let age: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                    "SELECT (EXTRACT(EPOCH FROM now() - gmt_create) * 1000)::bigint FROM {table} \
                     WHERE status = 0 ORDER BY status, id LIMIT 1"
                )))
                .fetch_optional(pool)
                .await?
                .flatten();
                Ok(stats(pending, failed, age))
            }
            Self::Sqlite { pool, table } => {
                let (pending, failed): (i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                    "SELECT (SELECT COUNT(*) FROM (SELECT 1 FROM {table} WHERE status = 0 \
                     LIMIT {COUNT_CAP})), (SELECT COUNT(*) FROM {table} WHERE status = 3)"
                )))
                .fetch_one(pool)
                .await?;
                let age: Option<f64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                    "SELECT (julianday('now') - julianday(gmt_create)) * 86400000.0 FROM {table} \
                     WHERE status = 0 ORDER BY id LIMIT 1"
                )))
                .fetch_optional(pool)
                .await?
                .flatten();
                #[allow(clippy::cast_possible_truncation)]
                Ok(stats(pending, failed, age.map(|ms| ms as i64)))
            }
        }
    }

    /// Up to `limit` rows of `status` with ids above `after`, by id.
    pub(crate) async fn list(
        &self,
        status: i64,
        after: u64,
        limit: u32,
    ) -> Result<Vec<ListedRow>, sqlx::Error> {
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        match self {
            Self::MySql { pool, table } => {
                let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {LIST_COLUMNS} FROM {table} o FORCE INDEX ({}) WHERE status = ? \
                     AND o.id > ? ORDER BY o.status, o.id LIMIT ?",
                    status_index(table)
                )))
                .bind(status)
                .bind(after)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?;
                rows.iter().map(listed_row).collect()
            }
            Self::Postgres { pool, table } => {
                let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {LIST_COLUMNS_POSTGRES} FROM {table} o WHERE status = $1 \
                     AND o.id > $2 ORDER BY o.status, o.id LIMIT $3"
                )))
                .bind(status)
                .bind(after)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?;
                rows.iter().map(listed_row).collect()
            }
            Self::Sqlite { pool, table } => {
                let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {LIST_COLUMNS_SQLITE} FROM {table} o WHERE status = ? AND o.id > ? \
                     ORDER BY o.status, o.id LIMIT ?"
                )))
                .bind(status)
                .bind(after)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?;
                rows.iter().map(listed_row).collect()
            }
        }
    }

    /// One row by id.
    pub(crate) async fn row(&self, id: u64) -> Result<Option<ListedRow>, sqlx::Error> {
        let id = i64::try_from(id).unwrap_or(i64::MAX);
        match self {
            Self::MySql { pool, table } => {
                let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {LIST_COLUMNS} FROM {table} WHERE id = ?"
                )))
                .bind(id)
                .fetch_optional(pool)
                .await?;
                row.as_ref().map(listed_row).transpose()
            }
            Self::Postgres { pool, table } => {
                let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {LIST_COLUMNS_POSTGRES} FROM {table} WHERE id = $1"
                )))
                .bind(id)
                .fetch_optional(pool)
                .await?;
                row.as_ref().map(listed_row).transpose()
            }
            Self::Sqlite { pool, table } => {
                let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {LIST_COLUMNS_SQLITE} FROM {table} WHERE id = ?"
                )))
                .bind(id)
                .fetch_optional(pool)
                .await?;
                row.as_ref().map(listed_row).transpose()
            }
        }
    }

    /// An operator's retry of a failed row: pending again as a new attempt
    /// (`retry_count` + 1). False when the row is not failed (any more).
    pub(crate) async fn retry_failed(&self, id: u64) -> Result<bool, sqlx::Error> {
        let id = i64::try_from(id).unwrap_or(i64::MAX);
        let sql = |table: &str| {
            format!(
                "UPDATE {table} SET status = 0, retry_count = retry_count + 1, \
                 fail_reason = NULL, next_retry_time = NULL WHERE id = ? AND status = 3"
            )
        };
        let done = match self {
            Self::MySql { pool, table } => sqlx::query(sqlx::AssertSqlSafe(sql(table)))
                .bind(id)
                .execute(pool)
                .await?
                .rows_affected(),
            Self::Postgres { pool, table } => sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE {table} SET status = 0, retry_count = retry_count + 1, \
                 fail_reason = NULL, next_retry_time = NULL, gmt_modified = now() \
                 WHERE id = $1 AND status = 3"
            )))
            .bind(id)
            .execute(pool)
            .await?
            .rows_affected(),
            Self::Sqlite { pool, table } => sqlx::query(sqlx::AssertSqlSafe(sql(table)))
                .bind(id)
                .execute(pool)
                .await?
                .rows_affected(),
        };
        Ok(done == 1)
    }

    /// An operator's give-up of a failed row: status 4, never relayed, and
    /// deleted by retention like a relayed row. False when it is not failed.
    pub(crate) async fn give_up_failed(&self, id: u64) -> Result<bool, sqlx::Error> {
        let id = i64::try_from(id).unwrap_or(i64::MAX);
        let done = match self {
            Self::MySql { pool, table } => sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE {table} SET status = 4, last_execute_time = UTC_TIMESTAMP(3) \
                 WHERE id = ? AND status = 3"
            )))
            .bind(id)
            .execute(pool)
            .await?
            .rows_affected(),
            Self::Postgres { pool, table } => sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE {table} SET status = 4, last_execute_time = now(), gmt_modified = now() \
                 WHERE id = $1 AND status = 3"
            )))
            .bind(id)
            .execute(pool)
            .await?
            .rows_affected(),
            Self::Sqlite { pool, table } => sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE {table} SET status = 4, last_execute_time = {SQLITE_NOW} \
                 WHERE id = ? AND status = 3"
            )))
            .bind(id)
            .execute(pool)
            .await?
            .rows_affected(),
        };
        Ok(done == 1)
    }
}

fn stats(pending: i64, failed: i64, age_ms: Option<i64>) -> SourceStats {
    SourceStats {
        pending: u64::try_from(pending).unwrap_or_default(),
        failed: u64::try_from(failed).unwrap_or_default(),
        oldest_pending_age: age_ms.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
    }
}

/// The claim's condition for an ordered producer: no failed row of the same
/// record key before this one (failed rows are few: a short range of the
/// `(status, id)` index per candidate).
fn behind_failed(table: &str, ordered: bool) -> String {
    if !ordered {
        return String::new();
    }
    format!(
        " AND (o.record_key IS NULL OR NOT EXISTS (SELECT 1 FROM {table} f WHERE f.status = 3 \
         AND f.record_key = o.record_key AND f.id < o.id))"
    )
}

/// The `(status, id)` index of the table (`idx_<table>_status`, as the
/// schema names it), named in the MySQL scans: with most rows pending, the
/// optimizer would rather read the whole table and sort it, which for a
/// locking claim locks every pending row and leaves the other lanes and
/// relays nothing to claim.
fn status_index(table: &str) -> String {
    format!("idx_{table}_status")
}

/// SQLite's clock in the table's text form (UTC).
const SQLITE_NOW: &str = "strftime('%Y-%m-%d %H:%M:%f', 'now')";

/// The placeholders of `n` values: `?, ?, …`, or on PostgreSQL `$first,
/// $first+1, …` (numbered from `first`).
fn marks(dialect: Dialect, first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| mark(dialect, i))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The placeholder of the `i`th value (from 1).
fn mark(dialect: Dialect, i: usize) -> String {
    match dialect {
        Dialect::Postgres => format!("${i}"),
        Dialect::MySql | Dialect::Sqlite => "?".to_string(),
    }
}

/// `body` for the relay connection of any dialect, with `conn` its
/// connection, `table` the table's name, `dialect` its SQL (for
/// placeholders) and `touched` what a mark sets besides the status: when
/// the relay last acted on the row (and, on SQLite and PostgreSQL, which
/// have no `ON UPDATE`, `gmt_modified`).
macro_rules! on_conn {
    ($self:expr, |$conn:ident, $table:ident, $dialect:ident, $touched:ident| $body:expr) => {
        match $self {
            RelayConn::MySql {
                conn: $conn,
                table: $table,
            } => {
                let $dialect = Dialect::MySql;
                let $touched = "last_execute_time = UTC_TIMESTAMP(3)";
                $body
            }
            RelayConn::Postgres {
                conn: $conn,
                table: $table,
            } => {
                let $dialect = Dialect::Postgres;
                let $touched = "last_execute_time = now(), gmt_modified = now()";
                $body
            }
            RelayConn::Sqlite {
                conn: $conn,
                table: $table,
            } => {
                let $dialect = Dialect::Sqlite;
                let $touched = concat!(
                    "last_execute_time = strftime('%Y-%m-%d %H:%M:%f', 'now'), ",
                    "gmt_modified = strftime('%Y-%m-%d %H:%M:%f', 'now')"
                );
                $body
            }
        }
    };
}

impl RelayConn {
    /// Takes the source's named lock, which this connection then holds
    /// until it closes: true when this instance is now the source's relay,
    /// false when another holds it. (SQLite has no such lock: a source file
    /// belongs to one machine, and `BEGIN IMMEDIATE` keeps relays apart.)
    pub(crate) async fn try_lock(&mut self) -> Result<bool, sqlx::Error> {
        match self {
            Self::MySql { conn, table } => {
                let got: Option<i64> = sqlx::query_scalar(
                    "SELECT GET_LOCK(LEFT(CONCAT('trustmsg.outbox.', COALESCE(DATABASE(), ''), \
                     '.', ?), 64), 0)",
                )
                .bind(table.clone())
                .fetch_one(&mut *conn)
                .await?;
                Ok(got == Some(1))
            }
            Self::Postgres { conn, table } => {
                // A session lock: held by this connection until it closes
                // (a transaction's end does not release it). The key is a
                // 64-bit hash of the names, as GET_LOCK's is the name.
                let got: bool = sqlx::query_scalar(
                    "SELECT pg_try_advisory_lock(hashtextextended(\
                     'trustmsg.outbox.' || current_database() || '.' || $1, 0))",
                )
                .bind(table.clone())
                .fetch_one(&mut *conn)
                .await?;
                Ok(got)
            }
            Self::Sqlite { .. } => Ok(true),
        }
    }

    /// Begins the batch's transaction and locks up to `limit` pending rows
    /// that are due, oldest id first, skipping rows another transaction
    /// holds; for an `ordered` producer, not the rows behind a failed row
    /// of their record key (they wait for an operator's retry or give-up).
    /// Empty: nothing to do (the transaction is rolled back).
    pub(crate) async fn claim(
        &mut self,
        limit: u32,
        ordered: bool,
    ) -> Result<Vec<SourceRow>, sqlx::Error> {
        let (begin, sql) = match &*self {
            Self::MySql { table, .. } => (
                "BEGIN",
                format!(
                    "SELECT {} FROM {table} o FORCE INDEX ({}) WHERE status = 0 AND \
                     (next_retry_time IS NULL OR next_retry_time <= UTC_TIMESTAMP(3)){} \
                     ORDER BY o.status, o.id LIMIT ? FOR UPDATE SKIP LOCKED",
                    claim_columns(Dialect::MySql),
                    status_index(table),
                    behind_failed(table, ordered),
                ),
            ),
            Self::Postgres { table, .. } => (
                "BEGIN ISOLATION LEVEL READ COMMITTED",
                format!(
                    "SELECT {} FROM {table} o WHERE status = 0 AND \
                     (next_retry_time IS NULL OR next_retry_time <= now()){} \
                     ORDER BY o.status, o.id LIMIT $1 FOR UPDATE OF o SKIP LOCKED",
                    claim_columns(Dialect::Postgres),
                    behind_failed(table, ordered),
                ),
            ),
            Self::Sqlite { table, .. } => (
                "BEGIN IMMEDIATE",
                format!(
                    "SELECT {} FROM {table} o WHERE status = 0 AND (next_retry_time IS NULL \
                     OR next_retry_time <= {SQLITE_NOW}){} ORDER BY o.status, o.id LIMIT ?",
                    claim_columns(Dialect::Sqlite),
                    behind_failed(table, ordered),
                ),
            ),
        };
        let rows = on_conn!(self, |conn, _table, _dialect, _touched| {
            sqlx::query(begin).execute(&mut *conn).await?;
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(i64::from(limit))
                .fetch_all(&mut *conn)
                .await?
                .iter()
                .map(source_row)
                .collect::<Result<Vec<_>, _>>()?
        });
        if rows.is_empty() {
            self.rollback().await?;
        }
        Ok(rows)
    }

    /// Ends a claimed batch: `relayed` rows marked 2 (or deleted, when
    /// relayed rows are not kept), `failed` rows marked 3 with their reason,
    /// then the commit that releases them.
    pub(crate) async fn finish(
        &mut self,
        relayed: &[u64],
        failed: &[(u64, String)],
        keep_relayed: bool,
    ) -> Result<(), sqlx::Error> {
        let ids: Vec<i64> = relayed
            .iter()
            .map(|&id| i64::try_from(id).unwrap_or(i64::MAX))
            .collect();
        on_conn!(self, |conn, table, dialect, touched| {
            for chunk in ids.chunks(1000) {
                let sql = if keep_relayed {
                    format!(
                        "UPDATE {table} SET status = 2, {touched} WHERE id IN ({})",
                        marks(dialect, 1, chunk.len())
                    )
                } else {
                    format!(
                        "DELETE FROM {table} WHERE id IN ({})",
                        marks(dialect, 1, chunk.len())
                    )
                };
                let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
                for id in chunk {
                    q = q.bind(*id);
                }
                q.execute(&mut *conn).await?;
            }
            for (id, reason) in failed {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "UPDATE {table} SET status = 3, fail_reason = {}, {touched} WHERE id = {}",
                    mark(dialect, 1),
                    mark(dialect, 2)
                )))
                .bind(clip(reason))
                .bind(i64::try_from(*id).unwrap_or(i64::MAX))
                .execute(&mut *conn)
                .await?;
            }
            sqlx::query("COMMIT").execute(&mut *conn).await?;
        });
        Ok(())
    }

    /// Gives a claimed batch back untouched.
    pub(crate) async fn rollback(&mut self) -> Result<(), sqlx::Error> {
        on_conn!(self, |conn, _table, _dialect, _touched| {
            sqlx::query("ROLLBACK").execute(&mut *conn).await?;
        });
        Ok(())
    }

    /// Deletes up to `limit` relayed or given-up rows whose last relay is
    /// older than `retention`, oldest id first: returns how many. It looks
    /// at the first `limit` such rows by id only, and deletes the old ones
    /// among them up to the first that is not old yet, so a round costs one
    /// short index range whatever the table holds.
    pub(crate) async fn purge(
        &mut self,
        retention: Duration,
        limit: u32,
    ) -> Result<u64, sqlx::Error> {
        let retention_ms = i64::try_from(retention.as_millis()).unwrap_or(i64::MAX);
        let mut deleted = 0;
        for st in [status::RELAYED, status::GIVEN_UP] {
            let ids: Vec<i64> = match self {
                Self::MySql { conn, table } => {
                    let rows: Vec<(i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                        "SELECT CAST(o.id AS SIGNED), CAST(COALESCE(last_execute_time, gmt_modified) \
                         < UTC_TIMESTAMP(3) - INTERVAL ? * 1000 MICROSECOND AS SIGNED) \
                         FROM {table} o FORCE INDEX ({}) WHERE status = ? ORDER BY o.status, o.id \
                         LIMIT ?",
                        status_index(table)
                    )))
                    .bind(retention_ms)
                    .bind(st)
                    .bind(i64::from(limit))
                    .fetch_all(&mut *conn)
                    .await?;
                    old_prefix(rows)
                }
                Self::Postgres { conn, table } => {
                    let rows: Vec<(i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                        "SELECT o.id, (COALESCE(last_execute_time, gmt_modified) \
                         < now() - $1::float8 * interval '1 millisecond')::int::int8 \
                         FROM {table} o WHERE status = $2 ORDER BY o.status, o.id LIMIT $3"
                    )))
                    .bind(retention_ms)
                    .bind(st)
                    .bind(i64::from(limit))
                    .fetch_all(&mut *conn)
                    .await?;
                    old_prefix(rows)
                }
                Self::Sqlite { conn, table } => {
                    let rows: Vec<(i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                        "SELECT o.id, (julianday('now') - julianday(COALESCE(last_execute_time, \
                         gmt_modified))) * 86400000.0 > ? FROM {table} o WHERE status = ? \
                         ORDER BY o.status, o.id LIMIT ?"
                    )))
                    .bind(retention_ms)
                    .bind(st)
                    .bind(i64::from(limit))
                    .fetch_all(&mut *conn)
                    .await?;
                    old_prefix(rows)
                }
            };
            if ids.is_empty() {
                continue;
            }
            let done = on_conn!(self, |conn, table, dialect, _touched| {
                let mut q = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DELETE FROM {table} WHERE status = {st} AND id IN ({})",
                    marks(dialect, 1, ids.len())
                )));
                for id in &ids {
                    q = q.bind(*id);
                }
                q.execute(&mut *conn).await?.rows_affected()
            });
            deleted += done;
        }
        Ok(deleted)
    }
}

/// The ids of `rows` (id, old?) up to the first that is not old.
fn old_prefix(rows: Vec<(i64, i64)>) -> Vec<i64> {
    rows.into_iter()
        .take_while(|(_, old)| *old != 0)
        .map(|(id, _)| id)
        .collect()
}

/// A reason clipped to the column (1024 characters).
fn clip(reason: &str) -> String {
    reason.chars().take(1024).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purge_stops_at_the_first_row_not_old_enough() {
        assert_eq!(old_prefix(vec![(1, 1), (2, 1), (3, 0), (4, 1)]), vec![1, 2]);
        assert!(old_prefix(vec![(1, 0), (2, 1)]).is_empty());
    }

    #[test]
    fn a_reason_is_clipped_to_its_column() {
        assert_eq!(clip(&"é".repeat(2000)).chars().count(), 1024);
    }
}
