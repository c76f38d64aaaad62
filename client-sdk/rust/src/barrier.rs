//! The barrier: exact check-back answers from the producer's MySQL/MariaDB or
//! PostgreSQL database.
//!
//! Answering check-back by "is my order row there?" is wrong while the local
//! transaction is still running: the row is not visible yet, the answer is
//! rollback, and then the transaction commits. The barrier closes that gap
//! with one marker row per `(biz_id, message_key)` under a primary key:
//!
//! - the local transaction inserts a `commit` marker ([`run_in_tx`] does it
//!   first thing; [`insert`] if you manage the transaction yourself);
//! - [`check`] inserts a `rollback` marker unless one exists, then reads which
//!   marker is there.
//!
//! Whoever inserts first wins, and the database makes the other wait on the
//! key: InnoDB on the row lock, PostgreSQL on the uncommitted key of the
//! unique index (its `INSERT … ON CONFLICT DO NOTHING` waits for the
//! transaction that inserted the key, then does nothing if it committed and
//! inserts if it rolled back). If the local transaction is still open when check-back arrives,
//! [`check`] blocks until it ends: it commits (the marker is `commit`, answer
//! commit) or rolls back (the `rollback` marker goes in, answer rollback). If
//! check-back came first, the local transaction's own insert fails on the key
//! and it cannot commit. The answer therefore always matches the business
//! state. (This is the "2-phase message barrier" of DTM.)
//!
//! Keys are compared byte for byte (VARBINARY columns on MySQL, `COLLATE "C"`
//! on PostgreSQL): `"A"` and `"A "` are two messages, and so are `"A"` and
//! `"a"`; the marker of one must never answer for the other.
//!
//! Every function takes the database it runs on: a pool (`&MySqlPool`,
//! `&PgPool`) for [`check`], [`run_in_tx`], [`transaction`] and
//! [`purge_older_than`], the local transaction or a connection ([`LocalTx`])
//! for [`insert`]. Which databases: [`Database`].
//!
//! The table's SQL ships with the crate: for MySQL as [`MIGRATION`] and
//! [`EXACT_KEYS_MIGRATION`] (`client-sdk/rust/migrations/`), for PostgreSQL
//! as [`POSTGRES_MIGRATION`] (the barrier and the inbox, the contract kit's
//! `client-sdk/conformance/sql/postgres.sql`); [`create_table`] applies
//! what its database needs.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::{MySql, MySqlConnection, PgConnection, Pool, Postgres, Transaction};
use trustmsg_verify_api::Decision;

mod sql;

use crate::transaction::{run, Known, TxOptions, TxOutcome, TxProducer};
use crate::Message;

/// The marker table's name.
///
/// ```
/// assert_eq!(trustmsg_client::barrier::TABLE, "trustmsg_barrier");
/// ```
pub const TABLE: &str = "trustmsg_barrier";

/// The SQL that creates the marker table (idempotent: `CREATE TABLE IF NOT EXISTS`).
/// Copy it into your own migrations, followed by [`EXACT_KEYS_MIGRATION`], or
/// call [`create_table`].
///
/// ```
/// assert!(trustmsg_client::barrier::MIGRATION.contains("PRIMARY KEY (biz_id, message_key)"));
/// ```
pub const MIGRATION: &str = include_str!("../migrations/0001_trustmsg_barrier.sql");

/// The SQL that makes the key columns of a table made by [`MIGRATION`]
/// compare byte for byte (VARBINARY). A new file rather than an edit of the
/// first, so a table created by an earlier release is upgraded too.
///
/// ```
/// assert!(trustmsg_client::barrier::EXACT_KEYS_MIGRATION.contains("VARBINARY(128)"));
/// ```
pub const EXACT_KEYS_MIGRATION: &str =
    include_str!("../migrations/0002_trustmsg_barrier_exact_keys.sql");

/// The SQL that creates the barrier's and the inbox's tables on PostgreSQL
/// ≥ 13 (idempotent), the same file every trustmsg SDK uses
/// (`client-sdk/conformance/sql/postgres.sql`). Copy it into your own
/// migrations, or call [`create_table`] (the barrier's part) and
/// [`inbox::create_table`](crate::inbox::create_table) (the inbox's).
///
/// ```
/// let sql = trustmsg_client::barrier::POSTGRES_MIGRATION;
/// assert!(sql.contains(r#"message_key VARCHAR(128) COLLATE "C" NOT NULL"#));
/// ```
pub const POSTGRES_MIGRATION: &str =
    include_str!("../migrations/postgres/trustmsg_barrier_inbox.sql");

/// Where [`POSTGRES_MIGRATION`]'s inbox part begins.
const POSTGRES_INBOX_PART: &str = "-- The consumer's inbox.";

/// [`POSTGRES_MIGRATION`]'s barrier part and its inbox part.
pub(crate) fn postgres_parts() -> (&'static str, &'static str) {
    let at = POSTGRES_MIGRATION
        .find(POSTGRES_INBOX_PART)
        .expect("the PostgreSQL SQL has an inbox part");
    POSTGRES_MIGRATION.split_at(at)
}

/// A database the barrier and the inbox work on: `sqlx::MySql` (MySQL ≥ 8.0,
/// MariaDB ≥ 10.6) or `sqlx::Postgres` (PostgreSQL ≥ 13). Implemented by
/// this crate only; a pool of either (`&MySqlPool`, `&PgPool`) is what the
/// functions take.
///
/// ```
/// fn answers_check_back<DB: trustmsg_client::barrier::Database>(_: &sqlx::Pool<DB>) {}
/// # fn show(mysql: sqlx::MySqlPool, postgres: sqlx::PgPool) {
/// answers_check_back(&mysql);
/// answers_check_back(&postgres);
/// # }
/// ```
pub trait Database: sealed::Database {}

impl Database for MySql {}
impl Database for Postgres {}

/// What [`insert`] writes the marker through: the local transaction
/// (`&mut tx`, what `pool.begin()` gives), or a connection (`&mut conn`,
/// also a pooled one, or the `&mut MySqlConnection`/`&mut PgConnection`
/// that [`run_in_tx`] hands its closure), of MySQL or PostgreSQL.
/// Implemented by this crate only.
///
/// ```
/// use trustmsg_client::barrier::LocalTx;
///
/// fn marks<'a>(_: impl LocalTx<'a>) {}
/// # async fn show(mysql: sqlx::MySqlPool, postgres: sqlx::PgPool) -> Result<(), sqlx::Error> {
/// let mut tx = mysql.begin().await?;
/// marks(&mut tx);
/// marks(&mut *tx);
/// let mut tx = postgres.begin().await?;
/// marks(&mut tx);
/// let mut conn = postgres.acquire().await?;
/// marks(&mut conn);
/// # Ok(())
/// # }
/// ```
pub trait LocalTx<'a>: sealed::LocalTx<'a> {}

impl<'a, T: sealed::LocalTx<'a>> LocalTx<'a> for T {}

pub(crate) mod sealed {
    use super::BoxFuture;

    /// Each database's statements, out of the callers' reach.
    #[allow(unreachable_pub)]
    pub trait Database: sqlx::Database {
        /// Creates the barrier's table (and upgrades it).
        fn create_barrier(pool: &sqlx::Pool<Self>) -> BoxFuture<'_, Result<(), sqlx::Error>>;
        /// Inserts the `commit` marker in the open transaction: None when it
        /// went in, the marker already there (read with a share lock) when
        /// not.
        fn insert_commit<'c>(
            conn: &'c mut Self::Connection,
            biz_id: &'c str,
            message_key: &'c str,
        ) -> BoxFuture<'c, Result<Option<Vec<u8>>, sqlx::Error>>;
        /// Inserts a `rollback` marker unless one exists (waiting for a
        /// transaction that holds the key), then reads the marker there.
        fn check<'c>(
            conn: &'c mut Self::Connection,
            biz_id: &'c str,
            message_key: &'c str,
        ) -> BoxFuture<'c, Result<Vec<u8>, sqlx::Error>>;
        /// Deletes up to 1000 markers older than `micros`; how many.
        fn purge_batch(
            pool: &sqlx::Pool<Self>,
            micros: i64,
        ) -> BoxFuture<'_, Result<u64, sqlx::Error>>;
        /// Creates the inbox's table.
        fn create_inbox(pool: &sqlx::Pool<Self>) -> BoxFuture<'_, Result<(), sqlx::Error>>;
        /// Inserts the inbox row unless one exists (waiting for a
        /// transaction that holds it): true when it went in.
        fn insert_inbox<'c>(
            conn: &'c mut Self::Connection,
            group: &'c str,
            message_id: u64,
        ) -> BoxFuture<'c, Result<bool, sqlx::Error>>;
    }

    /// What [`super::LocalTx`] does.
    #[allow(unreachable_pub)]
    pub trait LocalTx<'a>: Send {
        /// The database it is a connection of.
        type Db: super::Database;
        /// The connection.
        fn connection(self) -> &'a mut <Self::Db as sqlx::Database>::Connection;
    }
}

impl<'a, 'c, DB: Database> sealed::LocalTx<'a> for &'a mut Transaction<'c, DB> {
    type Db = DB;
    fn connection(self) -> &'a mut DB::Connection {
        self
    }
}

impl<'a, DB: Database> sealed::LocalTx<'a> for &'a mut PoolConnection<DB> {
    type Db = DB;
    fn connection(self) -> &'a mut DB::Connection {
        self
    }
}

impl<'a> sealed::LocalTx<'a> for &'a mut MySqlConnection {
    type Db = MySql;
    fn connection(self) -> &'a mut MySqlConnection {
        self
    }
}

impl<'a> sealed::LocalTx<'a> for &'a mut PgConnection {
    type Db = Postgres;
    fn connection(self) -> &'a mut PgConnection {
        self
    }
}

/// A boxed future borrowing the local transaction, as [`run_in_tx`] expects
/// from its closure (`|conn| Box::pin(async move { ... })`).
///
/// ```
/// use trustmsg_client::barrier::BoxFuture;
/// fn work(conn: &mut sqlx::MySqlConnection) -> BoxFuture<'_, Result<(), sqlx::Error>> {
///     Box::pin(async move {
///         sqlx::query("UPDATE stock SET n = n - 1").execute(&mut *conn).await?;
///         Ok(())
///     })
/// }
/// # let _ = work;
/// ```
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why the barrier marker could not be written.
///
/// ```
/// use trustmsg_client::{barrier::InsertError, Decision};
/// let e = InsertError::AlreadyDecided(Decision::Rollback);
/// assert_eq!(e.to_string(), "the barrier already holds a Rollback marker for this message");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InsertError {
    /// A marker exists: `Rollback` means check-back already answered rollback,
    /// so this transaction must not commit; `Commit` means an earlier
    /// transaction for the same key already committed.
    #[error("the barrier already holds a {0:?} marker for this message")]
    AlreadyDecided(Decision),
    /// The database failed.
    #[error("barrier: {0}")]
    Database(#[from] sqlx::Error),
}

/// Why [`run_in_tx`] did not commit (or could not tell).
///
/// ```
/// use trustmsg_client::{barrier::RunError, Decision};
/// let e: RunError<String> = RunError::Local("out of stock".into());
/// assert_eq!(e.to_string(), "local transaction failed: out of stock");
/// assert!(!RunError::<String>::AlreadyDecided(Decision::Rollback).outcome_unknown());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError<E> {
    /// The marker already existed (see [`InsertError::AlreadyDecided`]); the
    /// local work did not run.
    #[error("the barrier already holds a {0:?} marker for this message")]
    AlreadyDecided(Decision),
    /// The database failed and the transaction did not commit.
    #[error("barrier: {0}")]
    Database(sqlx::Error),
    /// The caller's work failed; the transaction was rolled back.
    #[error("local transaction failed: {0}")]
    Local(E),
    /// COMMIT failed and the barrier could not be read to learn whether it had
    /// been applied: only a later [`check`] can tell.
    #[error("local transaction outcome unknown: {0}")]
    OutcomeUnknown(sqlx::Error),
}

impl<E> RunError<E> {
    /// True when nobody can say yet whether the local transaction committed.
    ///
    /// ```
    /// use trustmsg_client::barrier::RunError;
    /// assert!(RunError::<()>::OutcomeUnknown(sqlx::Error::PoolTimedOut).outcome_unknown());
    /// ```
    pub fn outcome_unknown(&self) -> bool {
        matches!(self, Self::OutcomeUnknown(_))
    }
}

impl<E> From<InsertError> for RunError<E> {
    fn from(e: InsertError) -> Self {
        match e {
            InsertError::AlreadyDecided(d) => Self::AlreadyDecided(d),
            InsertError::Database(e) => Self::Database(e),
        }
    }
}

/// Creates the marker table if it does not exist. On MySQL: [`MIGRATION`],
/// and [`EXACT_KEYS_MIGRATION`] only while a key column is not VARBINARY yet,
/// so calling this at every start is cheap. On PostgreSQL: the barrier's
/// part of [`POSTGRES_MIGRATION`].
///
/// ```no_run
/// # async fn run() -> Result<(), sqlx::Error> {
/// let pool = sqlx::MySqlPool::connect("mysql://root@127.0.0.1:3306/shop").await?;
/// trustmsg_client::barrier::create_table(&pool).await?;
/// let pool = sqlx::PgPool::connect("postgres://shop@127.0.0.1:5432/shop").await?;
/// trustmsg_client::barrier::create_table(&pool).await?;
/// # Ok(())
/// # }
/// ```
pub async fn create_table<DB: Database>(pool: &Pool<DB>) -> Result<(), sqlx::Error> {
    DB::create_barrier(pool).await
}

/// Inserts the `commit` marker inside the caller's open transaction. Call it
/// before the business writes, so a concurrent [`check`] waits for the
/// transaction instead of racing it.
///
/// ```no_run
/// use trustmsg_client::barrier;
///
/// # async fn run(pool: sqlx::MySqlPool) -> Result<(), Box<dyn std::error::Error>> {
/// let mut tx = pool.begin().await?;
/// barrier::insert(&mut tx, "shop", "order-42").await?;
/// sqlx::query("INSERT INTO orders (id) VALUES (42)").execute(&mut *tx).await?;
/// tx.commit().await?;
/// # Ok(())
/// # }
/// ```
pub async fn insert<'a, C: LocalTx<'a>>(
    conn: C,
    biz_id: &str,
    message_key: &str,
) -> Result<(), InsertError> {
    let conn = sealed::LocalTx::connection(conn);
    match <C::Db as sealed::Database>::insert_commit(conn, biz_id, message_key).await? {
        None => Ok(()),
        Some(op) => Err(InsertError::AlreadyDecided(parse_op(&op)?)),
    }
}

/// Answers a check-back exactly: inserts a `rollback` marker unless a marker
/// exists (waiting for a local transaction that holds one), then reports which
/// marker is there. Never returns [`Decision::Unknown`].
///
/// ```no_run
/// use trustmsg_client::{barrier, check_router};
///
/// # fn app(pool: sqlx::MySqlPool) -> axum::Router {
/// check_router("whsec_c2VjcmV0", move |req| {
///     let pool = pool.clone();
///     async move { barrier::check(&pool, &req.biz_id, &req.message_key).await }
/// })
/// # }
/// ```
pub async fn check<DB: Database>(
    pool: &Pool<DB>,
    biz_id: &str,
    message_key: &str,
) -> Result<Decision, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    let op = DB::check(&mut *conn, biz_id, message_key).await?;
    parse_op(&op)
}

/// Runs `work` in a new transaction on `pool` after inserting the `commit`
/// marker, and commits. If COMMIT itself fails (a lost connection may hide a
/// COMMIT that was applied), the barrier is consulted: it tells exactly
/// whether the transaction committed, and only if it cannot be read either is
/// the result [`RunError::OutcomeUnknown`].
///
/// ```no_run
/// use trustmsg_client::barrier::{self, RunError};
///
/// # async fn run(pool: sqlx::MySqlPool) {
/// let placed = barrier::run_in_tx(&pool, "shop", "order-42", |conn| {
///     Box::pin(async move {
///         sqlx::query("INSERT INTO orders (id) VALUES (42)").execute(&mut *conn).await?;
///         Ok::<_, sqlx::Error>(42)
///     })
/// })
/// .await;
/// match placed {
///     Ok(id) => println!("order {id} committed"),
///     Err(RunError::AlreadyDecided(d)) => println!("already decided: {d:?}"),
///     Err(e) => eprintln!("not committed: {e}"),
/// }
/// # }
/// ```
pub async fn run_in_tx<DB, T, E, F>(
    pool: &Pool<DB>,
    biz_id: &str,
    message_key: &str,
    work: F,
) -> Result<T, RunError<E>>
where
    DB: Database,
    F: for<'c> FnOnce(&'c mut DB::Connection) -> BoxFuture<'c, Result<T, E>>,
{
    let mut tx = pool.begin().await.map_err(RunError::Database)?;
    insert(&mut tx, biz_id, message_key).await?;
    let value = match work(&mut tx).await {
        Ok(v) => v,
        Err(e) => {
            // Dropping the transaction rolls it back too; this just does it now.
            let _ = tx.rollback().await;
            return Err(RunError::Local(e));
        }
    };
    match tx.commit().await {
        Ok(()) => Ok(value),
        Err(commit_err) => match check(pool, biz_id, message_key).await {
            Ok(Decision::Commit) => Ok(value),
            Ok(_) => Err(RunError::Database(commit_err)),
            Err(check_err) => {
                tracing::error!(%biz_id, %message_key, %commit_err, %check_err, "local COMMIT outcome unknown");
                Err(RunError::OutcomeUnknown(commit_err))
            }
        },
    }
}

/// The transaction helper with the barrier: prepare `message`, run `work` in a
/// local transaction with the `commit` marker ([`run_in_tx`]), then commit or
/// roll back the message, reporting what happened as a [`TxOutcome`].
///
/// `work` runs only when prepare answered PREPARED and the barrier holds no
/// marker for the message yet; a retried request whose message was decided
/// before gets an `Err` and runs nothing, and what the barrier knows is sent
/// at once:
///
/// - prepare refused `already_rolled_back`, or the barrier holds the
///   `rollback` marker: [`Error::AlreadyRolledBack`](crate::Error::AlreadyRolledBack)
///   (the rollback is sent again, harmlessly): refuse the request;
/// - `work` failed: the rollback marker is written (as check-back would)
///   before the rollback is sent, so an identical request waiting on this
///   one's marker is refused instead of committing a change whose commit
///   would be refused; if that request committed first, the commit is sent
///   and the result is `AlreadyCommitted`;
/// - prepare answered COMMITTED, or the barrier holds the `commit` marker (an
///   earlier run committed locally and stopped before its commit call): the
///   commit is sent now, not left to check-back, and the result is
///   [`Error::AlreadyCommitted`](crate::Error::AlreadyCommitted): answer
///   "already done".
///
/// Only when the local COMMIT's outcome is unknown (the barrier could not be
/// read either) does the helper send no decision and return
/// [`TxOutcome::LeftToCheckBack`]; check-back, answered by [`check`], then
/// decides exactly. A commit trustmsg refuses after the local commit is
/// [`Error::CommitRejected`](crate::Error::CommitRejected).
///
/// `producer` is either way in ([`TxProducer`]): the HTTP
/// [`Producer`](crate::Producer) or, with the `kafka` feature, the
/// `submit::Submitter`.
///
/// ```no_run
/// use trustmsg_client::{barrier, Error, Message, Producer, TxOutcome};
///
/// # async fn run(producer: Producer, pool: sqlx::MySqlPool) {
/// let placed = barrier::transaction(
///     &producer,
///     &pool,
///     Message::new("order-42", "orders", r#"{"order":42}"#),
///     |conn| {
///         Box::pin(async move {
///             sqlx::query("INSERT INTO orders (id) VALUES (42)").execute(&mut *conn).await?;
///             Ok::<_, sqlx::Error>(42)
///         })
///     },
/// )
/// .await;
/// match placed {
///     Ok(TxOutcome::Committed { value, message }) => println!("order {value} placed, message {}", message.id),
///     Ok(other) => println!("{other:?}"),
///     Err(Error::AlreadyCommitted { .. }) => println!("placed before"),
///     Err(Error::AlreadyRolledBack { .. }) => println!("refused before"),
///     Err(e) => eprintln!("{e}"),
/// }
/// # }
/// ```
pub async fn transaction<P, DB, T, E, F>(
    producer: &P,
    pool: &Pool<DB>,
    message: Message,
    work: F,
) -> Result<TxOutcome<T, RunError<E>, P::Receipt>, crate::Error>
where
    P: TxProducer,
    DB: Database,
    E: std::fmt::Display,
    F: for<'c> FnOnce(&'c mut DB::Connection) -> BoxFuture<'c, Result<T, E>>,
{
    transaction_with(producer, pool, message, &TxOptions::new(), work).await
}

/// [`transaction`] with [`TxOptions`]: its `after_local_commit` hook is the
/// crash point for your tests (after the local COMMIT, before the commit call).
///
/// ```no_run
/// use trustmsg_client::{barrier, Error, Message, Producer, TxOptions};
///
/// # async fn run(producer: Producer, pool: sqlx::MySqlPool) {
/// let crash = TxOptions::new().after_local_commit(|_| Err("test: crash here".into()));
/// let placed = barrier::transaction_with(&producer, &pool, Message::new("order-42", "orders", "{}"), &crash, |conn| {
///     Box::pin(async move {
///         sqlx::query("INSERT INTO orders (id) VALUES (42)").execute(&mut *conn).await?;
///         Ok::<_, sqlx::Error>(())
///     })
/// })
/// .await;
/// assert!(matches!(placed, Err(Error::StoppedAfterLocalCommit { .. })));
/// // The order row and its commit marker are committed; the message is
/// // PREPARED. The same call again sends the commit and says AlreadyCommitted.
/// # }
/// ```
pub async fn transaction_with<P, DB, T, E, F>(
    producer: &P,
    pool: &Pool<DB>,
    message: Message,
    options: &TxOptions,
    work: F,
) -> Result<TxOutcome<T, RunError<E>, P::Receipt>, crate::Error>
where
    P: TxProducer,
    DB: Database,
    E: std::fmt::Display,
    F: for<'c> FnOnce(&'c mut DB::Connection) -> BoxFuture<'c, Result<T, E>>,
{
    let biz_id = producer.biz_id().to_string();
    let key = message.message_key().to_string();
    run(
        producer,
        message,
        options,
        |_view| async {
            match run_in_tx(pool, &biz_id, &key, work).await {
                // The work failed: before the rollback is sent, the barrier
                // records it (what check-back would write), so that an
                // identical request waiting on this one's marker finds the
                // rollback instead of committing locally a change whose
                // commit would be refused. If that request committed first,
                // its commit marker is what the barrier answers: commit.
                Err(RunError::Local(e)) => match check(pool, &biz_id, &key).await {
                    Ok(Decision::Commit) => Err(RunError::AlreadyDecided(Decision::Commit)),
                    _ => Err(RunError::Local(e)),
                },
                other => other,
            }
        },
        |e| match e {
            RunError::OutcomeUnknown(_) => Known::Unknown,
            RunError::AlreadyDecided(Decision::Commit) => Known::Committed,
            RunError::AlreadyDecided(Decision::Rollback) => Known::RolledBack,
            _ => Known::NotDecided,
        },
    )
    .await
}

/// Deletes markers older than `age`; returns how many. Keep markers well
/// beyond the longest check-back schedule (by default about an hour from
/// prepare to the last attempt) and the longest local transaction: a deleted
/// `rollback` marker no longer stops a late transaction, and a deleted
/// `commit` marker turns a late check-back into a rollback answer.
///
/// ```no_run
/// # async fn run(pool: sqlx::MySqlPool) -> Result<(), sqlx::Error> {
/// use std::time::Duration;
/// let n = trustmsg_client::barrier::purge_older_than(&pool, Duration::from_secs(7 * 24 * 3600)).await?;
/// println!("{n} old markers deleted");
/// # Ok(())
/// # }
/// ```
pub async fn purge_older_than<DB: Database>(
    pool: &Pool<DB>,
    age: Duration,
) -> Result<u64, sqlx::Error> {
    // Microseconds bound as they are: multiplying in SQL overflowed BIGINT for
    // an age past ~292,000 years. An age no date can be that far back from
    // deletes nothing (MySQL makes the cut-off NULL; PostgreSQL would refuse
    // it as out of range, so it is not asked).
    if age > OLDER_THAN_ANY_DATE {
        return Ok(0);
    }
    let micros = i64::try_from(age.as_micros()).unwrap_or(i64::MAX);
    let mut total = 0;
    loop {
        // Small batches keep each DELETE's locks short.
        let n = DB::purge_batch(pool, micros).await?;
        total += n;
        if n < 1000 {
            return Ok(total);
        }
    }
}

/// An age past which no marker can be older: 6,000 years (PostgreSQL's
/// timestamps begin in 4713 BC, MySQL's `TIMESTAMP` in 1970).
const OLDER_THAN_ANY_DATE: Duration = Duration::from_secs(6_000 * 366 * 24 * 3600);

fn parse_op(op: &[u8]) -> Result<Decision, sqlx::Error> {
    match op {
        b"commit" => Ok(Decision::Commit),
        b"rollback" => Ok(Decision::Rollback),
        other => Err(sqlx::Error::Protocol(format!(
            "unexpected barrier marker {:?} in {TABLE}",
            String::from_utf8_lossy(other)
        ))),
    }
}
