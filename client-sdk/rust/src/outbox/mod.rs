//! The local message table: publish through trustmsg with one INSERT in your
//! own transaction, no call on the request path.
//!
//! A producer whose database can hold the table (`trustmsg_outbox`) writes
//! each message as a row of it **in the same local transaction as its
//! business change**: the order and its "order placed" message commit
//! together or not at all. `trustmsg serve --outbox-source BIZ_ID=URL`
//! relays every committed row as a COMMITTED message of producer `BIZ_ID`
//! and marks it relayed (status 2); from there it is sent like any other
//! message. There is no prepare, no commit call and no check-back, and the
//! producer keeps taking orders while trustmsg is down (rows wait).
//!
//! What [`enqueue`] guarantees:
//!
//! - **The same message as a prepare.** It takes the [`Message`] that
//!   [`Producer::prepare`](crate::Producer::prepare) takes: topic, record
//!   key, payload bytes, headers (the `headers` column, a JSON object of
//!   strings), delivery time and the trace context (the explicit
//!   [`Message::trace_context`] or, with the `opentelemetry` feature, the
//!   current span). A `deliver_after` delay is counted from the INSERT by
//!   the producer database's clock. The table has no `tracestate` column:
//!   a trace state is not carried this way.
//! - **Refused here, not later.** A row trustmsg would refuse is marked
//!   failed by the relay and raises an alert, after the business change is
//!   committed. So what the SDK can tell is refused before anything is
//!   written, with the HTTP API's error code ([`EnqueueError::Invalid`]):
//!   the message key, topic, record key, headers and delivery time. What
//!   only the service knows (the payload limit, the producer's topic
//!   allow-list) is checked when the row is relayed.
//! - **One row per message key.** `message_key` is the table's unique key:
//!   a second row with the same key is [`EnqueueError::Duplicate`]. The
//!   failed statement leaves the transaction open and unchanged (on
//!   PostgreSQL, where a failed statement aborts a transaction, the INSERT
//!   runs in a savepoint of its own); roll it back or go on without the
//!   message.
//! - **Nothing outside your transaction.** The row is one INSERT through the
//!   transaction (or connection) you pass: rolled back with it, invisible to
//!   the relay until it commits.
//!
//! MySQL ≥ 8.0 / MariaDB ≥ 10.6, PostgreSQL ≥ 13 and SQLite are supported
//! ([`Target`]). The table's SQL ships with the crate ([`schema`],
//! [`MYSQL_MIGRATION`], [`POSTGRES_MIGRATION`], [`SQLITE_MIGRATION`]);
//! `trustmsg outbox schema --dialect mysql` (or `postgres`, `sqlite`) prints
//! the same.
//!
//! ```no_run
//! use trustmsg_client::{outbox, Message};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let pool = sqlx::MySqlPool::connect("mysql://root@127.0.0.1:3306/shop").await?;
//! outbox::create_table(&pool).await?;
//!
//! let mut tx = pool.begin().await?;
//! sqlx::query("INSERT INTO orders (id, amount_cents) VALUES (42, 1250)")
//!     .execute(&mut *tx)
//!     .await?;
//! let message = Message::new("order-42", "orders", r#"{"order":42}"#)
//!     .key("customer-7")
//!     .header("content-type", "application/json");
//! outbox::enqueue(&mut tx, &message).await?;
//! tx.commit().await?;
//! // `trustmsg serve --outbox-source shop=mysql://…/shop` sends it to `orders`.
//! # Ok(())
//! # }
//! ```

mod row;
mod sql;

use std::fmt;

pub use sql::Target;

use crate::Message;

/// The table's name unless one is chosen (`--outbox-table` of `trustmsg serve`).
///
/// ```
/// assert_eq!(trustmsg_client::outbox::TABLE, "trustmsg_outbox");
/// ```
pub const TABLE: &str = "trustmsg_outbox";

/// The table's SQL for MySQL ≥ 8.0 / MariaDB ≥ 10.6 (idempotent: `CREATE
/// TABLE IF NOT EXISTS`), named [`TABLE`]: the repository's
/// `migrations/outbox/mysql.sql`. Copy it into your own migrations, or call
/// [`create_table`].
///
/// ```
/// use trustmsg_client::outbox::MYSQL_MIGRATION;
/// assert!(MYSQL_MIGRATION.contains("UNIQUE KEY uk_trustmsg_outbox_message_key (message_key)"));
/// ```
pub const MYSQL_MIGRATION: &str = include_str!("../../migrations/outbox/mysql.sql");

/// The table's SQL for SQLite (a table and two indexes), named [`TABLE`].
///
/// ```
/// assert!(trustmsg_client::outbox::SQLITE_MIGRATION.contains("CREATE UNIQUE INDEX"));
/// ```
pub const SQLITE_MIGRATION: &str = include_str!("../../migrations/outbox/sqlite.sql");

/// The table's SQL for PostgreSQL ≥ 13, named [`TABLE`]: the repository's
/// `migrations/outbox/postgres.sql`.
///
/// ```
/// assert!(trustmsg_client::outbox::POSTGRES_MIGRATION.contains("BYTEA"));
/// ```
pub const POSTGRES_MIGRATION: &str = include_str!("../../migrations/outbox/postgres.sql");

/// A database the table's SQL is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Dialect {
    /// MySQL ≥ 8.0 or MariaDB ≥ 10.6.
    MySql,
    /// SQLite.
    Sqlite,
    /// PostgreSQL ≥ 13.
    Postgres,
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::MySql => "mysql",
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        })
    }
}

/// Why a message was not enqueued. In every case no row was written.
///
/// ```
/// use trustmsg_client::outbox::EnqueueError;
///
/// fn explain(e: &EnqueueError) -> &'static str {
///     match e {
///         EnqueueError::Invalid { .. } => "fix the message; trustmsg would refuse it",
///         EnqueueError::Duplicate { .. } => "this message key is taken: already enqueued",
///         EnqueueError::Database(_) => "the database failed; the transaction decides",
///         _ => "unexpected",
///     }
/// }
/// let e = EnqueueError::Invalid { code: "invalid_topic".into(), message: "…".into() };
/// assert_eq!(explain(&e), "fix the message; trustmsg would refuse it");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnqueueError {
    /// trustmsg would refuse this message (or the table name is not one the
    /// relay accepts): `code` is the HTTP API's error code for the same
    /// prepare (`invalid_message_key`, `invalid_topic`, `invalid_key`,
    /// `invalid_headers`, `invalid_deliver_at`, `invalid_deliver_after_ms`),
    /// or `invalid_table`.
    #[error("invalid message ({code}): {message}")]
    Invalid {
        /// The HTTP API's error code for the same refusal.
        code: String,
        /// What is wrong, and what to do.
        message: String,
    },
    /// The table already holds a row with this `message_key`, its unique key
    /// (committed, or written by a transaction still open, which this
    /// INSERT waited for). The key names one message: enqueue another
    /// message under a key of its own.
    #[error(
        "the outbox already holds a message with message_key {message_key:?} (the table's \
         unique key): each message needs a key of its own"
    )]
    Duplicate {
        /// The key that is taken.
        message_key: String,
        /// The database's unique-key violation.
        #[source]
        source: sqlx::Error,
    },
    /// The database failed (or the table is missing).
    #[error("outbox: {0}")]
    Database(#[from] sqlx::Error),
}

/// The `CREATE TABLE` (and indexes) of the outbox table `table` in
/// `dialect`: the shipped SQL with every name derived from [`TABLE`]
/// renamed, as `trustmsg outbox schema --dialect D --table T` prints it.
/// A name the relay could not use (1 to 64 of `A-Z a-z 0-9 _`, not starting
/// with a digit) is [`EnqueueError::Invalid`] (`invalid_table`).
///
/// ```
/// use trustmsg_client::outbox::{schema, Dialect};
///
/// let sql = schema(Dialect::MySql, "orders_outbox").unwrap();
/// assert!(sql.contains("CREATE TABLE IF NOT EXISTS orders_outbox ("));
/// assert!(schema(Dialect::Sqlite, "orders; DROP TABLE orders").is_err());
/// ```
pub fn schema(dialect: Dialect, table: &str) -> Result<String, EnqueueError> {
    row::check_table(table)?;
    let sql = match dialect {
        Dialect::MySql => MYSQL_MIGRATION,
        Dialect::Sqlite => SQLITE_MIGRATION,
        Dialect::Postgres => POSTGRES_MIGRATION,
    };
    Ok(sql.replace(TABLE, table))
}

/// Creates the table [`TABLE`] if it does not exist. On MySQL/MariaDB,
/// `CREATE TABLE` commits an open transaction: call it on a pool (at
/// start-up), not inside your business transaction.
///
/// On PostgreSQL, rows made by concurrent transactions get their ids (an
/// identity) in INSERT order, not commit order, as with MySQL's
/// `AUTO_INCREMENT`; the relay never reads by an id cursor, so a row that
/// commits late is relayed when it becomes visible.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let pool = sqlx::SqlitePool::connect("sqlite://shop.db?mode=rwc").await?;
/// trustmsg_client::outbox::create_table(&pool).await?;
/// # Ok(())
/// # }
/// ```
pub async fn create_table<'a>(target: impl Target<'a>) -> Result<(), EnqueueError> {
    create_table_named(target, TABLE).await
}

/// [`create_table`] for a table named `table` (`--outbox-table`).
///
/// ```no_run
/// # async fn run(pool: sqlx::MySqlPool) -> Result<(), trustmsg_client::outbox::EnqueueError> {
/// trustmsg_client::outbox::create_table_named(&pool, "orders_outbox").await?;
/// # Ok(())
/// # }
/// ```
pub async fn create_table_named<'a, T: Target<'a>>(
    target: T,
    table: &str,
) -> Result<(), EnqueueError> {
    let mut sql = schema(T::DIALECT, table)?;
    if T::DIALECT == Dialect::Postgres {
        // One simple query is one transaction: the lock holds while the
        // table is made (or until the caller's open transaction ends).
        sql = format!("{};\n{sql}", crate::DDL_LOCK);
    }
    target.run_script(sql).await?;
    Ok(())
}

/// Writes `message` as a row of [`TABLE`] through `target`, normally your
/// open transaction (`&mut tx`), so that it commits or rolls back with your
/// business change; returns the row's id. See the [module docs](self) for
/// what is refused before anything is written and what a duplicate key
/// means.
///
/// ```no_run
/// use trustmsg_client::{outbox, Message};
///
/// # async fn run(pool: sqlx::MySqlPool) -> Result<(), Box<dyn std::error::Error>> {
/// let mut tx = pool.begin().await?;
/// sqlx::query("UPDATE stock SET n = n - 1 WHERE sku = 'X-1'").execute(&mut *tx).await?;
/// match outbox::enqueue(&mut tx, &Message::new("sale-981", "sales", "{}")).await {
///     Ok(row) => println!("row {row} commits with the sale"),
///     Err(outbox::EnqueueError::Duplicate { message_key, .. }) => {
///         println!("{message_key} was already recorded");
///         return Ok(tx.rollback().await?);
///     }
///     Err(e) => return Err(e.into()),
/// }
/// tx.commit().await?;
/// # Ok(())
/// # }
/// ```
pub async fn enqueue<'a>(target: impl Target<'a>, message: &Message) -> Result<u64, EnqueueError> {
    enqueue_into(target, TABLE, message).await
}

/// [`enqueue`] into the table named `table` (`--outbox-table` of
/// `trustmsg serve`).
///
/// ```no_run
/// use trustmsg_client::{outbox, Message};
///
/// # async fn run(pool: sqlx::SqlitePool) -> Result<(), Box<dyn std::error::Error>> {
/// let mut tx = pool.begin().await?;
/// outbox::enqueue_into(&mut tx, "orders_outbox", &Message::new("order-7", "orders", "{}")).await?;
/// tx.commit().await?;
/// # Ok(())
/// # }
/// ```
pub async fn enqueue_into<'a, T: Target<'a>>(
    target: T,
    table: &str,
    message: &Message,
) -> Result<u64, EnqueueError> {
    row::check_table(table)?;
    let row = row::Row::of(message, chrono::Utc::now())?;
    let key = row.message_key.clone();
    target.insert(table, row).await.map_err(|e| match e {
        sqlx::Error::Database(ref db) if db.is_unique_violation() => EnqueueError::Duplicate {
            message_key: key,
            source: e,
        },
        e => EnqueueError::Database(e),
    })
}
