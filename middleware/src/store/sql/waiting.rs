//! Submitted commits waiting for their prepare (the Kafka way in,
//! `crate::submit`): the statements both backends share. Each backend claims
//! due rows its own way (MySQL locks with `SKIP LOCKED`, SQLite has one
//! writer).

use sqlx::Executor;

use super::{stmt, Dialect, SqlRow};
use crate::store::{NewWaitingCommit, StoreError, StoreResult, WaitingCommit};

/// The columns a waiting commit is read from, with the database clock as `now`.
pub(in crate::store) const WAITING_COLUMNS: &str = "id, biz_id, message_key, source_partition, \
     source_offset, record_key, headers, attempts, received_at, give_up_at, next_try_at";

/// A waiting commit from a row of [`WAITING_COLUMNS`] plus `now`.
pub(in crate::store) fn waiting_from_row<R: SqlRow>(row: &R) -> StoreResult<WaitingCommit> {
    let headers = row.text("headers")?;
    let headers: Vec<(String, String)> = serde_json::from_str(&headers)
        .map_err(|e| StoreError::Corrupt(format!("waiting commit headers: {e}")))?;
    Ok(WaitingCommit {
        id: row.unsigned("id")?,
        biz_id: row.text("biz_id")?,
        message_key: row.text("message_key")?,
        partition: row
            .opt_i32("source_partition")?
            .ok_or_else(|| StoreError::Corrupt("waiting commit without a partition".into()))?,
        offset: row
            .opt_i64("source_offset")?
            .ok_or_else(|| StoreError::Corrupt("waiting commit without an offset".into()))?,
        record_key: row.opt_bytes("record_key")?,
        headers,
        attempts: row.unsigned("attempts")?,
        received_at: row.time("received_at")?,
        give_up_at: row.time("give_up_at")?,
        next_try_at: row.time("next_try_at")?,
        now: row.time("now")?,
    })
}

/// [`crate::store::WaitingStore::park_commit`]: nothing when the key waits
/// already ([`Dialect::INSERT_IGNORE`]).
pub(in crate::store) async fn park_commit<D>(
    pool: &sqlx::Pool<D>,
    w: &NewWaitingCommit,
) -> StoreResult<bool>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    String: super::Bind<D>,
    i32: super::Bind<D>,
    i64: super::Bind<D>,
    Option<Vec<u8>>: super::Bind<D>,
{
    let headers = serde_json::to_string(&w.headers)
        .map_err(|e| StoreError::Corrupt(format!("waiting commit headers: {e}")))?;
    let done = sqlx::query(stmt::<D>(format!(
        "{insert} INTO submit_waiting (biz_id, message_key, source_partition, \
         source_offset, record_key, headers, attempts, received_at, give_up_at, next_try_at) \
         VALUES (?, ?, ?, ?, ?, ?, 0, {now}, {now}{plus}, {now}){ignored}",
        insert = D::INSERT_IGNORE,
        ignored = D::IGNORED,
        now = D::NOW,
        plus = D::PLUS_SPAN,
    )))
    .bind(w.biz_id.clone())
    .bind(w.message_key.clone())
    .bind(w.partition)
    .bind(w.offset)
    .bind(w.record_key.clone())
    .bind(headers)
    .bind(D::span(w.wait))
    .execute(pool)
    .await?;
    Ok(D::rows_affected(&done) == 1)
}

/// [`crate::store::WaitingStore::retry_waiting_commit`].
pub(in crate::store) async fn retry_waiting_commit<D>(
    pool: &sqlx::Pool<D>,
    id: u64,
    delay: std::time::Duration,
) -> StoreResult<bool>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    i64: super::Bind<D>,
{
    let done = sqlx::query(stmt::<D>(format!(
        "UPDATE submit_waiting SET attempts = attempts + 1, next_try_at = {}{} WHERE id = ?",
        D::NOW,
        D::PLUS_SPAN
    )))
    .bind(D::span(delay))
    .bind(D::int(id))
    .execute(pool)
    .await?;
    Ok(D::rows_affected(&done) == 1)
}

/// [`crate::store::WaitingStore::unpark_commit`].
pub(in crate::store) async fn unpark_commit<D>(pool: &sqlx::Pool<D>, id: u64) -> StoreResult<bool>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    let done = sqlx::query(stmt::<D>("DELETE FROM submit_waiting WHERE id = ?"))
        .bind(D::int(id))
        .execute(pool)
        .await?;
    Ok(D::rows_affected(&done) == 1)
}

/// [`crate::store::WaitingStore::list_waiting_commits`].
pub(in crate::store) async fn list_waiting_commits<D>(
    pool: &sqlx::Pool<D>,
    limit: u32,
    after: u64,
) -> StoreResult<Vec<WaitingCommit>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    i64: super::Bind<D>,
{
    sqlx::query(stmt::<D>(format!(
        "SELECT {WAITING_COLUMNS}, {} AS now FROM submit_waiting WHERE id > ? ORDER BY id LIMIT ?",
        D::NOW
    )))
    .bind(D::int(after))
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?
    .iter()
    .map(waiting_from_row)
    .collect()
}

/// How many commits wait, for the backlog.
pub(in crate::store) async fn count_waiting_commits<D>(pool: &sqlx::Pool<D>) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    let row = sqlx::query(stmt::<D>("SELECT COUNT(*) AS n FROM submit_waiting"))
        .fetch_one(pool)
        .await?;
    Ok(u64::try_from(row.opt_i64("n")?.unwrap_or(0)).unwrap_or(0))
}
