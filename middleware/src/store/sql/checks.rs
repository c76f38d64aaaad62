//! The record of check-back calls: written in one statement for many
//! messages, each message's newest kept, read back for an operator.

use std::collections::HashMap;

use sqlx::{Executor, QueryBuilder};

use super::effects::clip_to;
use super::row::SqlRow;
use super::{stmt, Bind, Dialect};
use crate::store::{CheckAttempt, CheckAttemptEntry, StoreResult, CHECK_ATTEMPTS_KEPT};

/// [`crate::store::VerifyStore::record_check_attempts`]: one multi-row INSERT, and for
/// the calls past the bound one DELETE of their messages' oldest.
pub(in crate::store) async fn record_check_attempts<D>(
    pool: &sqlx::Pool<D>,
    calls: &[CheckAttempt],
) -> StoreResult<()>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    i64: Bind<D>,
    Option<i64>: Bind<D>,
    &'static str: Bind<D>,
    Option<String>: Bind<D>,
{
    if calls.is_empty() {
        return Ok(());
    }
    let mut q = QueryBuilder::<D>::new(
        "INSERT INTO check_attempts (message_id, attempt, at, duration_ms, http_status, outcome, error) ",
    );
    q.push_values(calls, |mut b, a| {
        b.push_bind(D::int(a.message_id))
            .push_bind(i64::from(a.attempt))
            .push(D::NOW)
            .push_bind(i64::from(a.duration_ms))
            .push_bind(a.http_status.map(i64::from))
            .push_bind(a.outcome)
            .push_bind(a.error.as_deref().map(|e| clip_to(e, 500).to_string()));
    });
    q.build().execute(pool).await?;
    let old: Vec<&CheckAttempt> = calls
        .iter()
        .filter(|a| a.attempt > CHECK_ATTEMPTS_KEPT)
        .collect();
    if !old.is_empty() {
        let mut q = QueryBuilder::<D>::new("DELETE FROM check_attempts WHERE ");
        let mut sep = q.separated(" OR ");
        for a in old {
            sep.push("(message_id = ")
                .push_bind_unseparated(D::int(a.message_id))
                .push_unseparated(" AND attempt <= ")
                .push_bind_unseparated(i64::from(a.attempt - CHECK_ATTEMPTS_KEPT))
                .push_unseparated(")");
        }
        q.build().execute(pool).await?;
    }
    Ok(())
}

/// [`crate::store::VerifyStore::check_attempts`].
pub(in crate::store) async fn check_attempts<D>(
    pool: &sqlx::Pool<D>,
    message_id: u64,
) -> StoreResult<Vec<CheckAttemptEntry>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    sqlx::query(stmt::<D>(
        "SELECT attempt, at, duration_ms, http_status, outcome, error FROM check_attempts \
         WHERE message_id = ? ORDER BY id",
    ))
    .bind(D::int(message_id))
    .fetch_all(pool)
    .await?
    .iter()
    .map(check_attempt_from_row)
    .collect()
}

/// The recorded check-back calls of the messages in `list` (an SQL list of
/// ids), by message id, each oldest first: one statement for the lot.
pub(in crate::store) async fn check_attempts_of<D>(
    conn: &mut D::Connection,
    list: &str,
) -> StoreResult<HashMap<u64, Vec<CheckAttemptEntry>>>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
{
    let mut calls: HashMap<u64, Vec<CheckAttemptEntry>> = HashMap::new();
    for row in sqlx::query(stmt::<D>(format!(
        "SELECT message_id, attempt, at, duration_ms, http_status, outcome, error \
         FROM check_attempts WHERE message_id IN ({list}) ORDER BY id"
    )))
    .fetch_all(&mut *conn)
    .await?
    .iter()
    {
        let id = row.unsigned("message_id")?;
        calls
            .entry(id)
            .or_default()
            .push(check_attempt_from_row(row)?);
    }
    Ok(calls)
}

fn check_attempt_from_row(row: &impl SqlRow) -> StoreResult<CheckAttemptEntry> {
    Ok(CheckAttemptEntry {
        attempt: row.unsigned("attempt")?,
        at: row.time("at")?,
        duration_ms: row.unsigned("duration_ms")?,
        http_status: row
            .opt_i64("http_status")?
            .and_then(|s| u16::try_from(s).ok()),
        outcome: row.text("outcome")?,
        error: row.opt_text("error")?,
    })
}
