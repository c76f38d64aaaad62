//! Where a row can be written ([`Target`]) and the INSERT of each dialect.
//!
//! The delivery time of a `deliver_after` delay is computed by the producer
//! database's clock in the INSERT itself, the same clock the table's
//! `gmt_create` uses; a `deliver_at` is written as given (UTC).

use std::future::Future;
use std::pin::Pin;

use sqlx::mysql::{MySql, MySqlConnection, MySqlPool};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnection, PgPool, Postgres};
use sqlx::sqlite::{Sqlite, SqliteConnection, SqlitePool};
use sqlx::{AssertSqlSafe, Connection, Transaction};

use super::row::{Due, Row};
use super::Dialect;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

mod sealed {
    use super::{BoxFuture, Dialect, Row};

    /// What [`super::Target`] does, out of the callers' reach.
    #[allow(unreachable_pub)]
    pub trait Sealed<'a>: Send {
        /// The dialect of the SQL this target runs.
        const DIALECT: Dialect;
        /// INSERTs `row` into `table`; the new row's id.
        fn insert(self, table: &str, row: Row) -> BoxFuture<'a, Result<u64, sqlx::Error>>;
        /// Runs `sql` (several statements).
        fn run_script(self, sql: String) -> BoxFuture<'a, Result<(), sqlx::Error>>;
    }
}

/// What [`enqueue`](super::enqueue) and [`create_table`](super::create_table)
/// write through: on MySQL/MariaDB, PostgreSQL or SQLite, a transaction (`&mut tx`, what
/// `pool.begin()` gives), a connection (`&mut conn`, also a pooled one), or
/// a pool (`&pool`: the row commits on its own). Implemented by this crate
/// only.
///
/// ```
/// use trustmsg_client::outbox::Target;
///
/// fn writes_rows<'a>(_: impl Target<'a>) {}
/// # async fn show(mysql: sqlx::MySqlPool, sqlite: sqlx::SqlitePool, pg: sqlx::PgPool) -> Result<(), sqlx::Error> {
/// let mut tx = mysql.begin().await?;
/// writes_rows(&mut tx);
/// writes_rows(&mut *tx);
/// writes_rows(&sqlite);
/// let mut tx = pg.begin().await?;
/// writes_rows(&mut tx);
/// let mut conn = sqlite.acquire().await?;
/// writes_rows(&mut conn);
/// # Ok(())
/// # }
/// ```
pub trait Target<'a>: sealed::Sealed<'a> {}

impl<'a, T: sealed::Sealed<'a>> Target<'a> for T {}

/// The INSERT into `table`, MySQL/MariaDB: a delay is added to
/// `UTC_TIMESTAMP(3)` (NULL for no delay: `COALESCE` keeps NULL).
fn mysql_insert(table: &str) -> String {
    format!(
        "INSERT INTO {table} (message_key, topic, record_key, payload, headers, traceparent, \
         deliver_at) VALUES (?, ?, ?, ?, ?, ?, \
         COALESCE(?, UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND))"
    )
}

/// The INSERT into `table`, SQLite: times are the table's UTC text, a delay
/// an `strftime` modifier (NULL for no delay: `strftime` gives NULL).
fn sqlite_insert(table: &str) -> String {
    format!(
        "INSERT INTO {table} (message_key, topic, record_key, payload, headers, traceparent, \
         deliver_at) VALUES (?, ?, ?, ?, ?, ?, \
         COALESCE(?, strftime('%Y-%m-%d %H:%M:%f', 'now', ?)))"
    )
}

/// The INSERT into `table`, PostgreSQL: a delay (milliseconds) is added to
/// `now()` (NULL for no delay); the headers' JSON text becomes `jsonb`.
fn postgres_insert(table: &str) -> String {
    format!(
        "INSERT INTO {table} (message_key, topic, record_key, payload, headers, traceparent, \
         deliver_at) VALUES ($1, $2, $3, $4, $5::text::jsonb, $6, \
         COALESCE($7, now() + $8::float8 * interval '1 millisecond')) RETURNING id"
    )
}

/// The row's time and delay as the MySQL INSERT binds them.
fn mysql_due(due: Option<Due>) -> (Option<chrono::NaiveDateTime>, Option<i64>) {
    match due {
        None => (None, None),
        Some(Due::At(t)) => (Some(t.naive_utc()), None),
        Some(Due::AfterMs(ms)) => (None, Some(i64::try_from(ms * 1000).unwrap_or(i64::MAX))),
    }
}

/// The row's time and delay as the SQLite INSERT binds them.
fn sqlite_due(due: Option<Due>) -> (Option<String>, Option<String>) {
    match due {
        None => (None, None),
        Some(Due::At(t)) => (Some(t.format("%Y-%m-%d %H:%M:%S%.3f").to_string()), None),
        Some(Due::AfterMs(ms)) => (
            None,
            Some(format!("+{}.{:03} seconds", ms / 1000, ms % 1000)),
        ),
    }
}

async fn insert_mysql<'e>(
    executor: impl sqlx::Executor<'e, Database = MySql>,
    table: &str,
    row: Row,
) -> Result<u64, sqlx::Error> {
    let (at, after_us) = mysql_due(row.due);
    let done = sqlx::query(AssertSqlSafe(mysql_insert(table)))
        .bind(row.message_key)
        .bind(row.topic)
        .bind(row.record_key)
        .bind(row.payload)
        .bind(row.headers)
        .bind(row.traceparent)
        .bind(at)
        .bind(after_us)
        .execute(executor)
        .await?;
    Ok(done.last_insert_id())
}

async fn insert_postgres<'e>(
    executor: impl sqlx::Executor<'e, Database = Postgres>,
    table: &str,
    row: Row,
) -> Result<u64, sqlx::Error> {
    let (at, after_ms) = match row.due {
        None => (None, None),
        Some(Due::At(t)) => (Some(t), None),
        Some(Due::AfterMs(ms)) => (None, Some(i64::try_from(ms).unwrap_or(i64::MAX))),
    };
    let id: i64 = sqlx::query_scalar(AssertSqlSafe(postgres_insert(table)))
        .bind(row.message_key)
        .bind(row.topic)
        .bind(row.record_key)
        .bind(row.payload)
        .bind(row.headers)
        .bind(row.traceparent)
        .bind(at)
        .bind(after_ms)
        .fetch_one(executor)
        .await?;
    Ok(u64::try_from(id).unwrap_or_default())
}

/// The INSERT on a PostgreSQL connection, inside a savepoint (or a
/// transaction of its own when none is open): a failed statement aborts a
/// PostgreSQL transaction, and a duplicate key must leave the caller's
/// transaction open and unchanged, as on MySQL and SQLite.
async fn insert_postgres_conn(
    conn: &mut PgConnection,
    table: &str,
    row: Row,
) -> Result<u64, sqlx::Error> {
    let mut savepoint = conn.begin().await?;
    match insert_postgres(&mut *savepoint, table, row).await {
        Ok(id) => {
            savepoint.commit().await?;
            Ok(id)
        }
        Err(e) => {
            savepoint.rollback().await?;
            Err(e)
        }
    }
}

async fn insert_sqlite<'e>(
    executor: impl sqlx::Executor<'e, Database = Sqlite>,
    table: &str,
    row: Row,
) -> Result<u64, sqlx::Error> {
    let (at, modifier) = sqlite_due(row.due);
    let done = sqlx::query(AssertSqlSafe(sqlite_insert(table)))
        .bind(row.message_key)
        .bind(row.topic)
        .bind(row.record_key)
        .bind(row.payload)
        .bind(row.headers)
        .bind(row.traceparent)
        .bind(at)
        .bind(modifier)
        .execute(executor)
        .await?;
    Ok(u64::try_from(done.last_insert_rowid()).unwrap_or_default())
}

/// `Sealed` for the transaction, the connection, the pooled connection and
/// the pool of one database, each reaching the executor its own way.
macro_rules! targets {
    ($db:ty, $conn:ty, $pool:ty, $dialect:expr, $insert:ident, $insert_conn:ident) => {
        impl<'a, 'c> sealed::Sealed<'a> for &'a mut Transaction<'c, $db> {
            const DIALECT: Dialect = $dialect;
            fn insert(self, table: &str, row: Row) -> BoxFuture<'a, Result<u64, sqlx::Error>> {
                let conn: &'a mut $conn = self;
                let table = table.to_string();
                Box::pin(async move { $insert_conn(conn, &table, row).await })
            }
            fn run_script(self, sql: String) -> BoxFuture<'a, Result<(), sqlx::Error>> {
                let conn: &'a mut $conn = self;
                Box::pin(async move {
                    sqlx::raw_sql(AssertSqlSafe(sql))
                        .execute(conn)
                        .await
                        .map(drop)
                })
            }
        }

        impl<'a> sealed::Sealed<'a> for &'a mut $conn {
            const DIALECT: Dialect = $dialect;
            fn insert(self, table: &str, row: Row) -> BoxFuture<'a, Result<u64, sqlx::Error>> {
                let table = table.to_string();
                Box::pin(async move { $insert_conn(self, &table, row).await })
            }
            fn run_script(self, sql: String) -> BoxFuture<'a, Result<(), sqlx::Error>> {
                Box::pin(async move {
                    sqlx::raw_sql(AssertSqlSafe(sql))
                        .execute(self)
                        .await
                        .map(drop)
                })
            }
        }

        impl<'a> sealed::Sealed<'a> for &'a mut PoolConnection<$db> {
            const DIALECT: Dialect = $dialect;
            fn insert(self, table: &str, row: Row) -> BoxFuture<'a, Result<u64, sqlx::Error>> {
                let conn: &'a mut $conn = self;
                conn.insert(table, row)
            }
            fn run_script(self, sql: String) -> BoxFuture<'a, Result<(), sqlx::Error>> {
                let conn: &'a mut $conn = self;
                conn.run_script(sql)
            }
        }

        impl<'a> sealed::Sealed<'a> for &'a $pool {
            const DIALECT: Dialect = $dialect;
            fn insert(self, table: &str, row: Row) -> BoxFuture<'a, Result<u64, sqlx::Error>> {
                let table = table.to_string();
                Box::pin(async move { $insert(self, &table, row).await })
            }
            fn run_script(self, sql: String) -> BoxFuture<'a, Result<(), sqlx::Error>> {
                Box::pin(async move {
                    sqlx::raw_sql(AssertSqlSafe(sql))
                        .execute(self)
                        .await
                        .map(drop)
                })
            }
        }
    };
}

targets!(
    MySql,
    MySqlConnection,
    MySqlPool,
    Dialect::MySql,
    insert_mysql,
    insert_mysql
);
targets!(
    Sqlite,
    SqliteConnection,
    SqlitePool,
    Dialect::Sqlite,
    insert_sqlite,
    insert_sqlite
);
targets!(
    Postgres,
    PgConnection,
    PgPool,
    Dialect::Postgres,
    insert_postgres,
    insert_postgres_conn
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delay_becomes_each_dialects_own_expression() {
        assert_eq!(mysql_due(Some(Due::AfterMs(1500))), (None, Some(1_500_000)));
        assert_eq!(
            sqlite_due(Some(Due::AfterMs(3_600_007))),
            (None, Some("+3600.007 seconds".to_string()))
        );
        assert_eq!(sqlite_due(None), (None, None));
    }
}
