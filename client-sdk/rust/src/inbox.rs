//! The inbox: process each trustmsg message once, in effect, in a consumer
//! that has its own MySQL/MariaDB or PostgreSQL database.
//!
//! Delivery is at least once: a record may come again (the forwarder's
//! retry, a consumer restart before its offset commit). Every record carries
//! a stable `trustmsg-message-id` header; the inbox keeps one row per
//! `(consumer group, message id)` and writes it **in the same local
//! transaction as the consumer's work**:
//!
//! - the first delivery inserts the row, runs the work and commits both;
//! - a repeat finds the row and skips the work ([`Processed::Repeat`]);
//! - two deliveries at once (two consumers of a group during a rebalance):
//!   the second insert waits on the first one's row lock until that
//!   transaction ends, then finds the row (skip) or, if the first rolled
//!   back, takes it and runs the work. No distributed lock, just the
//!   database's unique key (InnoDB's row lock; on PostgreSQL, `ON CONFLICT
//!   DO NOTHING` waiting on the uncommitted key);
//! - a failure of the work rolls back the work and the row together, so the
//!   next delivery runs it again.
//!
//! Groups are compared byte for byte (VARBINARY on MySQL, `COLLATE "C"` on
//! PostgreSQL). The table's SQL ships with the crate as [`MIGRATION`]
//! (MySQL) and in [`POSTGRES_MIGRATION`]; [`create_table`] applies it. The
//! functions take a pool of either database ([`Database`]). With the
//! `kafka` feature, [`process`] takes an rdkafka record and reads its id.

use std::fmt;

use sqlx::Pool;

pub use crate::barrier::{BoxFuture, Database, POSTGRES_MIGRATION};

/// The inbox table's name.
///
/// ```
/// assert_eq!(trustmsg_client::inbox::TABLE, "trustmsg_inbox");
/// ```
pub const TABLE: &str = "trustmsg_inbox";

/// The SQL that creates the inbox table (idempotent: `CREATE TABLE IF NOT
/// EXISTS`). Copy it into your own migrations, or call [`create_table`].
///
/// ```
/// assert!(trustmsg_client::inbox::MIGRATION.contains("PRIMARY KEY (consumer_group, message_id)"));
/// ```
pub const MIGRATION: &str = include_str!("../migrations/0003_trustmsg_inbox.sql");

/// The longest consumer group name the table holds, in bytes.
pub const MAX_GROUP: usize = 255;

/// Creates the inbox table if it does not exist ([`MIGRATION`] on MySQL,
/// the inbox's part of [`POSTGRES_MIGRATION`] on PostgreSQL).
///
/// ```no_run
/// # async fn run(pool: sqlx::MySqlPool, pg: sqlx::PgPool) -> Result<(), sqlx::Error> {
/// trustmsg_client::inbox::create_table(&pool).await?;
/// trustmsg_client::inbox::create_table(&pg).await?;
/// # Ok(()) }
/// ```
pub async fn create_table<DB: Database>(pool: &Pool<DB>) -> Result<(), sqlx::Error> {
    DB::create_inbox(pool).await
}

/// What [`process_id`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Processed<T> {
    /// The first delivery for the group: the work ran and committed with
    /// the inbox row.
    Done(T),
    /// The group had processed this message already: the work did not run.
    Repeat,
}

/// Why a message was not processed. Nothing of the work and no inbox row
/// was kept: the next delivery runs it again.
#[derive(Debug)]
pub enum InboxError<E> {
    /// The work failed.
    Work(E),
    /// The database failed (begin, the inbox row, or the commit).
    Database(sqlx::Error),
    /// The group name is empty or longer than [`MAX_GROUP`] bytes.
    InvalidGroup(String),
    /// The record carries no valid `trustmsg-message-id` header (with the
    /// `kafka` feature): it is not one of trustmsg's.
    NoMessageId,
}

impl<E: fmt::Display> fmt::Display for InboxError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Work(e) => write!(f, "the consumer's work failed (rolled back): {e}"),
            Self::Database(e) => write!(f, "inbox database error (rolled back): {e}"),
            Self::InvalidGroup(why) => write!(f, "invalid consumer group: {why}"),
            Self::NoMessageId => f.write_str(
                "the record has no valid trustmsg-message-id header; it was not sent by trustmsg",
            ),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for InboxError<E> {}

/// Runs `work` once per `(group, message_id)`: in one local transaction with
/// the inbox row, skipped for a repeat (see the module docs).
///
/// ```no_run
/// use trustmsg_client::inbox::{self, Processed};
///
/// # async fn run(pool: sqlx::MySqlPool, message_id: u64) {
/// let done = inbox::process_id(&pool, "billing", message_id, |conn| {
///     Box::pin(async move {
///         sqlx::query("UPDATE accounts SET balance = balance - 42 WHERE id = 7")
///             .execute(&mut *conn)
///             .await?;
///         Ok::<_, sqlx::Error>(())
///     })
/// })
/// .await;
/// match done {
///     Ok(Processed::Done(())) => println!("charged"),
///     Ok(Processed::Repeat) => println!("already charged; skipped"),
///     Err(e) => eprintln!("not processed, will be retried: {e}"),
/// }
/// # }
/// ```
pub async fn process_id<DB, T, E, F>(
    pool: &Pool<DB>,
    group: &str,
    message_id: u64,
    work: F,
) -> Result<Processed<T>, InboxError<E>>
where
    DB: Database,
    F: for<'c> FnOnce(&'c mut DB::Connection) -> BoxFuture<'c, Result<T, E>>,
{
    if group.is_empty() || group.len() > MAX_GROUP {
        return Err(InboxError::InvalidGroup(format!(
            "a group is 1 to {MAX_GROUP} bytes (got {})",
            group.len()
        )));
    }
    let mut tx = pool.begin().await.map_err(InboxError::Database)?;
    // Waits for a concurrent delivery's uncommitted row, then either finds
    // it (0 rows: a repeat) or, that delivery having rolled back, takes it.
    let inserted = DB::insert_inbox(&mut tx, group, message_id)
        .await
        .map_err(InboxError::Database)?;
    if !inserted {
        let _ = tx.rollback().await;
        return Ok(Processed::Repeat);
    }
    let value = match work(&mut tx).await {
        Ok(v) => v,
        Err(e) => {
            let _ = tx.rollback().await;
            return Err(InboxError::Work(e));
        }
    };
    tx.commit().await.map_err(InboxError::Database)?;
    Ok(Processed::Done(value))
}

/// The `trustmsg-message-id` of a record trustmsg sent, if it has one.
#[cfg(feature = "kafka")]
pub fn message_id(record: &impl rdkafka::Message) -> Option<u64> {
    use rdkafka::message::Headers as _;
    let headers = record.headers()?;
    headers
        .iter()
        .find(|h| h.key == trustmsg_verify_api::kafka_headers::MESSAGE_ID)
        .and_then(|h| std::str::from_utf8(h.value?).ok())
        .and_then(|v| v.parse().ok())
}

/// [`process_id`] for a record read with any rdkafka consumer: its id is
/// its `trustmsg-message-id` header ([`InboxError::NoMessageId`] without
/// one). Commit the record's offset after this returns `Ok`.
#[cfg(feature = "kafka")]
pub async fn process<DB, T, E, F>(
    pool: &Pool<DB>,
    group: &str,
    record: &impl rdkafka::Message,
    work: F,
) -> Result<Processed<T>, InboxError<E>>
where
    DB: Database,
    F: for<'c> FnOnce(&'c mut DB::Connection) -> BoxFuture<'c, Result<T, E>>,
{
    let id = message_id(record).ok_or(InboxError::NoMessageId)?;
    process_id(pool, group, id, work).await
}
