//! What the campaign reads from the database (and the outbox shop writes),
//! in the dialect of the server it runs on: one function per question,
//! each with its MariaDB and its PostgreSQL statement side by side, so the
//! rest of the campaign asks the same questions of either.

use std::collections::HashMap;
use std::time::Duration;

use sqlx::mysql::MySqlPoolOptions;
use sqlx::postgres::PgPoolOptions;
use sqlx::{MySqlPool, PgPool, QueryBuilder};
use trustmsg_client::{outbox, Message};
use trustmsg_tests::{Database, PrivateDb};

use crate::ledger::Fate;

/// Connections to one database of the campaign's server.
#[derive(Clone)]
pub(crate) enum Pool {
    MySql(MySqlPool),
    Postgres(PgPool),
}

/// A message row as the judge reads it: key, id, status, send status.
pub(crate) type Row = (String, u64, String, Option<String>);

impl Pool {
    /// A few connections to `database` on `server`, with a short wait for
    /// one (the server is killed and frozen under them).
    pub(crate) async fn connect(server: &PrivateDb, database: &str) -> Self {
        let url = server.url(database);
        let wait = Duration::from_secs(5);
        match server.database() {
            Database::MariaDb => Self::MySql(
                MySqlPoolOptions::new()
                    .max_connections(4)
                    .acquire_timeout(wait)
                    .connect(&url)
                    .await
                    .expect("connect to the campaign's MariaDB"),
            ),
            Database::Postgres => Self::Postgres(
                PgPoolOptions::new()
                    .max_connections(4)
                    .acquire_timeout(wait)
                    .connect(&url)
                    .await
                    .expect("connect to the campaign's PostgreSQL"),
            ),
        }
    }

    /// The database's clock now (the one `sent_at` is written by), as
    /// text [`Pool::sent_between`] takes back.
    pub(crate) async fn now(&self) -> sqlx::Result<String> {
        match self {
            Self::MySql(p) => {
                sqlx::query_scalar("SELECT CAST(UTC_TIMESTAMP(3) AS CHAR)")
                    .fetch_one(p)
                    .await
            }
            Self::Postgres(p) => {
                sqlx::query_scalar("SELECT CAST(clock_timestamp() AS TEXT)")
                    .fetch_one(p)
                    .await
            }
        }
    }

    /// Messages marked SENT from 5 s before `from` to `to` (times of
    /// [`Pool::now`]).
    pub(crate) async fn sent_between(&self, from: &str, to: &str) -> sqlx::Result<Vec<u64>> {
        match self {
            Self::MySql(p) => {
                sqlx::query_scalar(
                    "SELECT id FROM messages WHERE send_status = 'SENT' AND sent_at \
                     BETWEEN CAST(? AS DATETIME(3)) - INTERVAL 5 SECOND AND CAST(? AS DATETIME(3))",
                )
                .bind(from)
                .bind(to)
                .fetch_all(p)
                .await
            }
            Self::Postgres(p) => {
                let ids: Vec<i64> = sqlx::query_scalar(
                    "SELECT id FROM messages WHERE send_status = 'SENT' AND sent_at \
                     BETWEEN CAST($1 AS TIMESTAMPTZ) - INTERVAL '5 seconds' \
                     AND CAST($2 AS TIMESTAMPTZ)",
                )
                .bind(from)
                .bind(to)
                .fetch_all(p)
                .await?;
                Ok(ids.into_iter().map(|id| id as u64).collect())
            }
        }
    }

    /// The status of each of `ids` that exists.
    pub(crate) async fn statuses(&self, ids: &[u64]) -> sqlx::Result<Vec<(u64, String)>> {
        match self {
            Self::MySql(p) => {
                let mut q = QueryBuilder::new(
                    "SELECT id, CAST(status AS CHAR) FROM messages WHERE id IN (",
                );
                let mut list = q.separated(", ");
                for id in ids {
                    list.push_bind(*id);
                }
                q.push(")");
                q.build_query_as().fetch_all(p).await
            }
            Self::Postgres(p) => {
                let ids: Vec<i64> = ids.iter().map(|id| *id as i64).collect();
                let rows: Vec<(i64, String)> =
                    sqlx::query_as("SELECT id, status FROM messages WHERE id = ANY($1)")
                        .bind(ids)
                        .fetch_all(p)
                        .await?;
                Ok(rows.into_iter().map(|(id, s)| (id as u64, s)).collect())
            }
        }
    }

    /// Sends due for more than a second plus PREPARED rows more than a
    /// second past their check-back.
    pub(crate) async fn backlog(&self) -> sqlx::Result<i64> {
        match self {
            Self::MySql(p) => {
                sqlx::query_scalar(
                    "SELECT (SELECT COUNT(*) FROM messages WHERE send_status = 'PENDING' \
                             AND next_send_at <= UTC_TIMESTAMP(3) - INTERVAL 1 SECOND) \
                          + (SELECT COUNT(*) FROM messages WHERE status = 'PREPARED' \
                             AND next_verify_at <= UTC_TIMESTAMP(3) - INTERVAL 1 SECOND)",
                )
                .fetch_one(p)
                .await
            }
            Self::Postgres(p) => {
                sqlx::query_scalar(
                    "SELECT (SELECT COUNT(*) FROM messages WHERE send_status = 'PENDING' \
                             AND next_send_at <= clock_timestamp() - INTERVAL '1 second') \
                          + (SELECT COUNT(*) FROM messages WHERE status = 'PREPARED' \
                             AND next_verify_at <= clock_timestamp() - INTERVAL '1 second')",
                )
                .fetch_one(p)
                .await
            }
        }
    }

    /// Messages not at an end yet: PREPARED, or COMMITTED and not sent.
    pub(crate) async fn waiting(&self) -> sqlx::Result<i64> {
        const SQL: &str = "SELECT COUNT(*) FROM messages WHERE status = 'PREPARED' \
                           OR (status = 'COMMITTED' AND send_status = 'PENDING')";
        match self {
            Self::MySql(p) => sqlx::query_scalar(SQL).fetch_one(p).await,
            Self::Postgres(p) => sqlx::query_scalar(SQL).fetch_one(p).await,
        }
    }

    /// Every message row.
    pub(crate) async fn rows(&self) -> sqlx::Result<Vec<Row>> {
        match self {
            Self::MySql(p) => {
                let rows: Vec<(Vec<u8>, u64, String, Option<String>)> = sqlx::query_as(
                    "SELECT message_key, id, CAST(status AS CHAR), CAST(send_status AS CHAR) \
                     FROM messages",
                )
                .fetch_all(p)
                .await?;
                Ok(rows
                    .into_iter()
                    .map(|(k, id, st, ss)| (String::from_utf8(k).expect("a UTF-8 key"), id, st, ss))
                    .collect())
            }
            Self::Postgres(p) => {
                let rows: Vec<(String, i64, String, Option<String>)> =
                    sqlx::query_as("SELECT message_key, id, status, send_status FROM messages")
                        .fetch_all(p)
                        .await?;
                Ok(rows
                    .into_iter()
                    .map(|(k, id, st, ss)| (k, id as u64, st, ss))
                    .collect())
            }
        }
    }

    /// The audit rows of entries into VERIFY_FAILED or SEND_FAILED of
    /// messages with ids up to `up_to`: (message id, to status, to send
    /// status).
    pub(crate) async fn failures(
        &self,
        up_to: u64,
    ) -> sqlx::Result<Vec<(u64, Option<String>, Option<String>)>> {
        match self {
            Self::MySql(p) => {
                sqlx::query_as(
                    "SELECT message_id, CAST(to_status AS CHAR), CAST(to_send_status AS CHAR) \
                     FROM audit_log WHERE message_id <= ? \
                     AND (to_status = 'VERIFY_FAILED' OR to_send_status = 'SEND_FAILED')",
                )
                .bind(up_to)
                .fetch_all(p)
                .await
            }
            Self::Postgres(p) => {
                let rows: Vec<(i64, Option<String>, Option<String>)> = sqlx::query_as(
                    "SELECT message_id, to_status, to_send_status FROM audit_log \
                     WHERE message_id <= $1 \
                     AND (to_status = 'VERIFY_FAILED' OR to_send_status = 'SEND_FAILED')",
                )
                .bind(i64::try_from(up_to).unwrap_or(i64::MAX))
                .fetch_all(p)
                .await?;
                Ok(rows
                    .into_iter()
                    .map(|(id, st, ss)| (id as u64, st, ss))
                    .collect())
            }
        }
    }

    /// The outbox shop's rows by message key: their status (0 pending,
    /// 2 relayed, 3 failed).
    pub(crate) async fn outbox_rows(&self) -> sqlx::Result<HashMap<String, i64>> {
        match self {
            Self::MySql(p) => {
                let rows: Vec<(Vec<u8>, i64)> = sqlx::query_as(
                    "SELECT message_key, CAST(status AS SIGNED) FROM trustmsg_outbox",
                )
                .fetch_all(p)
                .await?;
                Ok(rows
                    .into_iter()
                    .map(|(k, s)| (String::from_utf8(k).expect("a UTF-8 key"), s))
                    .collect())
            }
            Self::Postgres(p) => {
                let rows: Vec<(String, i16)> =
                    sqlx::query_as("SELECT message_key, status FROM trustmsg_outbox")
                        .fetch_all(p)
                        .await?;
                Ok(rows.into_iter().map(|(k, s)| (k, i64::from(s))).collect())
            }
        }
    }

    /// Creates the local message table, as the shop's own migrations would.
    pub(crate) async fn create_outbox_table(&self) {
        match self {
            Self::MySql(p) => outbox::create_table(p).await,
            Self::Postgres(p) => outbox::create_table(p).await,
        }
        .expect("create the outbox shop's table");
    }

    /// One business transaction of the outbox shop: `message` as a row of
    /// its local message table, committed (`commit`) or rolled back, each
    /// statement given `deadline`. What the writer was told decides the
    /// row's fate; a COMMIT that failed or timed out is ambiguous, and the
    /// source table tells once the database is back. The database killed
    /// or frozen under it is expected: nothing panics here.
    pub(crate) async fn outbox_transaction(
        &self,
        message: &Message,
        commit: bool,
        deadline: Duration,
    ) -> Fate {
        macro_rules! transaction {
            ($pool:expr) => {{
                let written = tokio::time::timeout(deadline, async {
                    let mut tx = $pool.begin().await.map_err(|e| e.to_string())?;
                    outbox::enqueue(&mut *tx, message)
                        .await
                        .map_err(|e| e.to_string())?;
                    Ok::<_, String>(tx)
                })
                .await;
                let Ok(Ok(tx)) = written else {
                    // Never reached its COMMIT: the transaction is rolled
                    // back (or its connection is gone with it).
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    return Fate::OutboxRolledBack;
                };
                if !commit {
                    let _ = tokio::time::timeout(deadline, tx.rollback()).await;
                    return Fate::OutboxRolledBack;
                }
                match tokio::time::timeout(deadline, tx.commit()).await {
                    Ok(Ok(())) => Fate::OutboxCommitted,
                    _ => Fate::OutboxAmbiguous,
                }
            }};
        }
        match self {
            Self::MySql(p) => transaction!(p),
            Self::Postgres(p) => transaction!(p),
        }
    }
}
