//! The one seam between the bench's phases and the kind of server under
//! them (MySQL/MariaDB or PostgreSQL): connecting, creating and dropping
//! the bench's databases, the clock expression, the durability settings,
//! the server's own counters and its processes on this machine. The phases
//! hold a [`Db`] and ask it; the few statements whose SQL differs (the
//! ceiling's table, rows written behind the service's back) match on it
//! where they are written, in `phases.rs` and `outbox.rs`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;
use sqlx::mysql::MySqlPoolOptions;
use sqlx::postgres::PgPoolOptions;
use sqlx::{AssertSqlSafe, MySqlPool, PgPool, Row};

use trustmsg::store::{Backend, DatabaseUrl};

use super::cost::{DatabaseProcess, DbCounters};

/// A pool to one database of the server, and what its kind needs.
#[derive(Debug, Clone)]
pub(crate) enum Db {
    /// MySQL or MariaDB.
    Mysql(MySqlPool),
    /// PostgreSQL: `scope` is the prefix of the bench's databases, whose
    /// statistics its counters sum (PostgreSQL keeps them per database).
    Postgres { pool: PgPool, scope: String },
}

/// The database the bench signs in to on a PostgreSQL server to create and
/// drop its own: the one every cluster has.
const PG_MAINTENANCE_DB: &str = "postgres";

/// The server's URL with database `name` (None: the server itself, to
/// create and drop databases there).
pub(crate) fn url_of(server: &DatabaseUrl, name: Option<&str>) -> anyhow::Result<DatabaseUrl> {
    let name = match (server.backend(), name) {
        (Backend::Postgres, None) => Some(PG_MAINTENANCE_DB),
        (_, name) => name,
    };
    server
        .with_database(name)
        .map_err(|e| anyhow::anyhow!("the bench needs a MySQL, MariaDB or PostgreSQL server: {e}"))
}

impl Db {
    /// Connects at most `max` connections to `url`; `scope` names the
    /// bench's databases (their common prefix), for PostgreSQL's counters.
    pub(crate) async fn connect(url: &DatabaseUrl, max: u32, scope: &str) -> anyhow::Result<Self> {
        let context = || format!("connecting to {url}");
        Ok(match url.backend() {
            Backend::MySql => Self::Mysql(
                MySqlPoolOptions::new()
                    .max_connections(max)
                    .connect(url.expose_for_driver())
                    .await
                    .with_context(context)?,
            ),
            Backend::Postgres => Self::Postgres {
                pool: PgPoolOptions::new()
                    .max_connections(max)
                    .connect(url.expose_for_driver())
                    .await
                    .with_context(context)?,
                scope: scope.to_string(),
            },
            Backend::Sqlite => {
                anyhow::bail!("the bench needs a MySQL, MariaDB or PostgreSQL server, not {url}")
            }
        })
    }

    /// The SQL of the current time as the service writes it (UTC, ms).
    pub(crate) fn now(&self) -> &'static str {
        match self {
            Self::Mysql(_) => "UTC_TIMESTAMP(3)",
            Self::Postgres { .. } => "date_trunc('milliseconds', statement_timestamp())",
        }
    }

    /// `n` seconds as an interval to add to [`Db::now`].
    pub(crate) fn seconds(&self, n: i64) -> String {
        match self {
            Self::Mysql(_) => format!("INTERVAL {n} SECOND"),
            Self::Postgres { .. } => format!("INTERVAL '{n} seconds'"),
        }
    }

    /// Runs `sql` (no parameters); returns the rows it changed.
    pub(crate) async fn execute(&self, sql: &str) -> anyhow::Result<u64> {
        let sql = AssertSqlSafe(sql.to_string());
        Ok(match self {
            Self::Mysql(pool) => sqlx::query(sql).execute(pool).await?.rows_affected(),
            Self::Postgres { pool, .. } => sqlx::query(sql).execute(pool).await?.rows_affected(),
        })
    }

    /// The single number `sql` (no parameters) returns.
    pub(crate) async fn count(&self, sql: &str) -> anyhow::Result<i64> {
        let sql = AssertSqlSafe(sql.to_string());
        Ok(match self {
            Self::Mysql(pool) => sqlx::query_scalar(sql).fetch_one(pool).await?,
            Self::Postgres { pool, .. } => sqlx::query_scalar(sql).fetch_one(pool).await?,
        })
    }

    /// The ids of `biz_id`'s messages, in order.
    pub(crate) async fn ids(&self, biz_id: &str) -> anyhow::Result<Vec<u64>> {
        Ok(match self {
            Self::Mysql(pool) => {
                sqlx::query_scalar("SELECT id FROM messages WHERE biz_id = ? ORDER BY id")
                    .bind(biz_id)
                    .fetch_all(pool)
                    .await?
            }
            Self::Postgres { pool, .. } => {
                let ids: Vec<i64> =
                    sqlx::query_scalar("SELECT id FROM messages WHERE biz_id = $1 ORDER BY id")
                        .bind(biz_id)
                        .fetch_all(pool)
                        .await?;
                ids.into_iter().map(|id| id as u64).collect()
            }
        })
    }

    /// Creates database `name` (a name the bench made: letters, digits, `_`).
    pub(crate) async fn create_database(&self, name: &str) -> anyhow::Result<()> {
        match self {
            Self::Mysql(_) => self.execute(&format!("CREATE DATABASE `{name}`")).await?,
            Self::Postgres { .. } => self.execute(&format!("CREATE DATABASE \"{name}\"")).await?,
        };
        Ok(())
    }

    /// Drops database `name` if it exists. On PostgreSQL the connections
    /// still open to it (a service that did not stop) are ended first:
    /// PostgreSQL refuses to drop a database in use.
    pub(crate) async fn drop_database(&self, name: &str) -> anyhow::Result<()> {
        match self {
            Self::Mysql(_) => {
                self.execute(&format!("DROP DATABASE IF EXISTS `{name}`"))
                    .await?
            }
            Self::Postgres { .. } => {
                self.execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                    .await?
            }
        };
        Ok(())
    }

    /// Closes the pool's connections (PostgreSQL drops no database with a
    /// connection open to it).
    pub(crate) async fn close(&self) {
        match self {
            Self::Mysql(pool) => pool.close().await,
            Self::Postgres { pool, .. } => pool.close().await,
        }
    }

    /// How durable a commit is on this server, and its version: the
    /// settings that decide what a commit waits for.
    pub(crate) async fn durability(&self) -> anyhow::Result<serde_json::Value> {
        match self {
            Self::Mysql(pool) => {
                let row = sqlx::query(
                    "SELECT CAST(@@innodb_flush_log_at_trx_commit AS CHAR) AS flush, \
                     CAST(@@sync_binlog AS CHAR) AS sync_binlog, CAST(@@log_bin AS CHAR) AS log_bin, \
                     CAST(VERSION() AS CHAR) AS version",
                )
                .fetch_one(pool)
                .await?;
                let get = |c: &str| -> anyhow::Result<String> {
                    let b: Vec<u8> = row.try_get(c)?;
                    Ok(String::from_utf8_lossy(&b).into_owned())
                };
                Ok(json!({
                    "innodb_flush_log_at_trx_commit": get("flush")?,
                    "sync_binlog": get("sync_binlog")?,
                    "log_bin": get("log_bin")?,
                    "version": get("version")?,
                }))
            }
            Self::Postgres { pool, .. } => {
                let row = sqlx::query(
                    "SELECT current_setting('synchronous_commit') AS synchronous_commit, \
                     current_setting('fsync') AS fsync, \
                     current_setting('wal_sync_method') AS wal_sync_method, \
                     current_setting('full_page_writes') AS full_page_writes, \
                     current_setting('server_version') AS version",
                )
                .fetch_one(pool)
                .await?;
                let get = |c: &str| -> anyhow::Result<String> { Ok(row.try_get(c)?) };
                Ok(json!({
                    "synchronous_commit": get("synchronous_commit")?,
                    "fsync": get("fsync")?,
                    "wal_sync_method": get("wal_sync_method")?,
                    "full_page_writes": get("full_page_writes")?,
                    "version": get("version")?,
                }))
            }
        }
    }

    /// Prepares counting statements: on PostgreSQL, `pg_stat_statements`
    /// in the bench's database when the server preloads it (it counts
    /// every statement; without it the report says statements were not
    /// counted). Nothing to do on MySQL.
    pub(crate) async fn count_statements(&self) -> anyhow::Result<bool> {
        let Self::Postgres { pool, .. } = self else {
            return Ok(true);
        };
        let preloaded: bool = sqlx::query_scalar(
            "SELECT 'pg_stat_statements' = ANY(string_to_array(\
             replace(current_setting('shared_preload_libraries'), ' ', ''), ','))",
        )
        .fetch_one(pool)
        .await?;
        if preloaded {
            sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                .execute(pool)
                .await
                .context("creating pg_stat_statements in the bench's database")?;
        }
        Ok(preloaded)
    }

    /// The server's counters now (see [`DbCounters`]).
    pub(crate) async fn counters(&self) -> anyhow::Result<DbCounters> {
        match self {
            Self::Mysql(pool) => {
                let rows: Vec<(String, String)> =
                    sqlx::query_as("SHOW GLOBAL STATUS").fetch_all(pool).await?;
                Ok(DbCounters::mysql(
                    rows.into_iter()
                        .filter_map(|(name, v)| Some((name, v.parse().ok()?))),
                ))
            }
            Self::Postgres { pool, scope } => pg_counters(pool, scope).await,
        }
    }

    /// Waits (at most 30 s) until the server has done in the background
    /// what earlier phases left it, so that work is not charged to the next
    /// phase. InnoDB purges old row versions after many small
    /// transactions and can take a core for a while; PostgreSQL's own
    /// cleanup (autovacuum) runs on a schedule of its own, not waited for.
    pub(crate) async fn settle(&self) -> anyhow::Result<()> {
        let Self::Mysql(pool) = self else {
            return Ok(());
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // MySQL 8 and MariaDB both keep this metric, enabled by default (a
            // disabled one reads 0: no wait).
            let history: Option<i64> = sqlx::query_scalar(
                "SELECT CAST(COUNT AS SIGNED) FROM information_schema.INNODB_METRICS \
                 WHERE NAME = 'trx_rseg_history_len'",
            )
            .fetch_optional(pool)
            .await?;
            match history {
                Some(n) if n > 1000 && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                _ => return Ok(()),
            }
        }
    }

    /// The server's processes on this machine, if it runs here: MySQL's
    /// one process, found by name; PostgreSQL's postmaster, the parent of
    /// the backend serving this pool (checked to be a `postgres` process).
    pub(crate) async fn process(&self) -> anyhow::Result<Option<DatabaseProcess>> {
        match self {
            Self::Mysql(_) => Ok(DatabaseProcess::mysql()),
            Self::Postgres { pool, .. } => {
                let backend: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
                    .fetch_one(pool)
                    .await?;
                Ok(DatabaseProcess::postgres(&backend.to_string()))
            }
        }
    }
}

/// PostgreSQL's counters: the cumulative statistics of the bench's
/// databases (`pg_stat_database`: transactions, rows, blocks), the WAL's
/// (`pg_stat_wal`, server-wide: records, full-page images, writes,
/// fsyncs), the WAL's position (its bytes, exact), the next transaction id
/// (write transactions, exact) and, when loaded, `pg_stat_statements`'
/// calls by first keyword.
///
/// The statistics a backend gathers reach these views when it flushes
/// them: at the end of a transaction at most once a second, and within
/// 10 s once it is idle. A phase's figures from them can miss the last
/// second of its work and hold a previous phase's; the WAL bytes and the
/// write transactions come from the server's positions, which are exact.
async fn pg_counters(pool: &PgPool, scope: &str) -> anyhow::Result<DbCounters> {
    let mut values: BTreeMap<String, u64> = BTreeMap::new();
    let db = sqlx::query(
        "SELECT COALESCE(SUM(xact_commit), 0)::BIGINT AS xact_commit, \
         COALESCE(SUM(xact_rollback), 0)::BIGINT AS xact_rollback, \
         COALESCE(SUM(tup_inserted), 0)::BIGINT AS tup_inserted, \
         COALESCE(SUM(tup_updated), 0)::BIGINT AS tup_updated, \
         COALESCE(SUM(tup_deleted), 0)::BIGINT AS tup_deleted, \
         COALESCE(SUM(tup_returned), 0)::BIGINT AS tup_returned, \
         COALESCE(SUM(tup_fetched), 0)::BIGINT AS tup_fetched, \
         COALESCE(SUM(blks_hit), 0)::BIGINT AS blks_hit, \
         COALESCE(SUM(blks_read), 0)::BIGINT AS blks_read, \
         (pg_current_wal_lsn() - '0/0'::pg_lsn)::BIGINT AS wal_lsn_bytes, \
         pg_snapshot_xmax(pg_current_snapshot())::TEXT::BIGINT AS xids \
         FROM pg_stat_database WHERE starts_with(datname::TEXT, $1)",
    )
    .bind(scope)
    .fetch_one(pool)
    .await?;
    for name in [
        "xact_commit",
        "xact_rollback",
        "tup_inserted",
        "tup_updated",
        "tup_deleted",
        "tup_returned",
        "tup_fetched",
        "blks_hit",
        "blks_read",
        "wal_lsn_bytes",
        "xids",
    ] {
        values.insert(name.to_string(), db.try_get::<i64, _>(name)?.max(0) as u64);
    }
    // PostgreSQL 14 and later.
    let wal = sqlx::query(
        "SELECT wal_records::BIGINT AS wal_records, wal_fpi::BIGINT AS wal_fpi, \
         wal_write::BIGINT AS wal_write, wal_sync::BIGINT AS wal_sync FROM pg_stat_wal",
    )
    .fetch_optional(pool)
    .await
    .ok()
    .flatten();
    if let Some(wal) = wal {
        for name in ["wal_records", "wal_fpi", "wal_write", "wal_sync"] {
            values.insert(name.to_string(), wal.try_get::<i64, _>(name)?.max(0) as u64);
        }
    }
    // Present only where `count_statements` created the extension.
    let statements: Option<Vec<(String, i64)>> = sqlx::query_as(
        "SELECT lower(split_part(btrim(s.query, E' \\n\\t('), ' ', 1)), SUM(s.calls)::BIGINT \
         FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid \
         WHERE starts_with(d.datname::TEXT, $1) GROUP BY 1",
    )
    .bind(scope)
    .fetch_all(pool)
    .await
    .ok();
    let statements = statements.map(|rows| {
        rows.into_iter()
            .map(|(kind, calls)| (kind, calls.max(0) as u64))
            .collect()
    });
    Ok(DbCounters::postgres(values, statements))
}
