//! An operator's redeliver and re-verify, for one message or set-based for
//! every message a filter matches: what each sets, and a bulk action's chunk.
//!
//! A bulk action after a big outage may cover a hundred thousand rows, far
//! more than one request deadline allows row by row. It runs as chunks of
//! rows in id order, each one transaction of three statements whatever its
//! size: lock the chunk's rows that are in the repaired state, change them
//! with one guarded UPDATE, write their audit rows with one `INSERT …
//! SELECT`. A chunk is written whole or not at all, and since only rows
//! still in the failed state are taken, running the action again changes
//! only what is left.

use sqlx::{Executor, QueryBuilder};

use super::audit::{audit_insert_select, AuditRow};
use super::listing::push_filter;
use super::row::SqlRow;
use super::{Bind, Dialect};
use crate::store::{Actor, MessageFilter, Requeue, RequeuedChunk, StoreError, StoreResult};

/// The rows `requeue` applies to, as SQL.
fn guard(requeue: Requeue) -> &'static str {
    match requeue {
        Requeue::Redeliver => "status = 'COMMITTED' AND send_status = 'SEND_FAILED'",
        Requeue::Reverify => "status = 'VERIFY_FAILED'",
    }
}

/// What `requeue` sets on a row (`now` is the dialect's clock): back in its
/// queue, due at once, attempts back to 0, version bumped (a stale claim
/// matches nothing), nobody's claim (an exactly-once owner's name left on
/// it would look like a lapsed claim), and that wait's overdue alert due
/// again, counted from now.
pub(in crate::store) fn requeue_set(requeue: Requeue, now: &str) -> String {
    match requeue {
        Requeue::Redeliver => format!(
            "send_status = 'PENDING', send_attempts = 0, next_send_at = {now}, \
             claimed_by = NULL, version = version + 1, updated_at = {now}, \
             send_overdue_alerted = FALSE, requeued_at = {now}"
        ),
        Requeue::Reverify => format!(
            "status = 'PREPARED', send_status = NULL, verify_attempts = 0, \
             next_verify_at = {now}, next_send_at = NULL, version = version + 1, \
             updated_at = {now}, verify_overdue_alerted = FALSE, requeued_at = {now}"
        ),
    }
}

/// [`crate::store::OperatorStore::redeliver`]'s UPDATE of one message (`now` is the
/// dialect's clock; binds `id`, `version`): SEND_FAILED back to PENDING as
/// [`requeue_set`] puts it.
pub(in crate::store) fn redeliver_update(now: &str) -> String {
    format!(
        "UPDATE messages SET {} \
         WHERE id = ? AND version = ? AND status = 'COMMITTED' AND send_status = 'SEND_FAILED'",
        requeue_set(Requeue::Redeliver, now)
    )
}

/// [`crate::store::OperatorStore::requeue_chunk`], given a transaction that holds
/// the rows it reads (`lock` is appended to the SELECT: `FOR UPDATE` on
/// MySQL; SQLite's `BEGIN IMMEDIATE` holds the whole database).
pub(in crate::store) async fn requeue_chunk<D>(
    conn: &mut D::Connection,
    lock: &str,
    requeue: Requeue,
    filter: &MessageFilter,
    (after_id, limit): (u64, u32),
    actor: &Actor,
    reason: &str,
) -> StoreResult<RequeuedChunk>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    String: Bind<D>,
    &'static str: Bind<D>,
    Option<&'static str>: Bind<D>,
    i64: Bind<D>,
{
    let guard = guard(requeue);
    let mut q = QueryBuilder::<D>::new(format!("SELECT id FROM messages WHERE {guard}"));
    push_filter(&mut q, filter);
    q.push(" AND id > ")
        .push_bind(D::int(after_id))
        .push(" ORDER BY id LIMIT ")
        .push_bind(i64::from(limit))
        .push(lock);
    let ids: Vec<u64> = q
        .build()
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|row| row.unsigned("id"))
        .collect::<StoreResult<_>>()?;
    let Some(&last) = ids.last() else {
        return Ok(RequeuedChunk {
            changed: 0,
            last_id: None,
        });
    };
    let mut q = QueryBuilder::<D>::new(format!(
        "UPDATE messages SET {} WHERE {guard} AND id IN (",
        requeue_set(requeue, D::NOW)
    ));
    let mut sep = q.separated(", ");
    for id in &ids {
        sep.push_bind(D::int(*id));
    }
    q.push(")");
    let changed = D::rows_affected(&q.build().execute(&mut *conn).await?);
    // The rows are locked, so this cannot differ; if it ever did, the audit
    // rows below would not match the changes: write nothing.
    if changed != ids.len() as u64 {
        return Err(StoreError::Contention("a bulk chunk's locked rows changed"));
    }
    audit_insert_select::<D>(&AuditRow::requeue(requeue, 0, actor, reason), &ids)
        .build()
        .execute(&mut *conn)
        .await?;
    Ok(RequeuedChunk {
        changed,
        last_id: Some(last),
    })
}

/// [`crate::store::OperatorStore::count_requeueable`].
pub(in crate::store) async fn count_requeueable<D>(
    pool: &sqlx::Pool<D>,
    requeue: Requeue,
    filter: &MessageFilter,
) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    String: Bind<D>,
    &'static str: Bind<D>,
{
    let mut q = QueryBuilder::<D>::new(format!(
        "SELECT COUNT(*) AS n FROM messages WHERE {}",
        guard(requeue)
    ));
    push_filter(&mut q, filter);
    let row = q.build().fetch_one(pool).await?;
    Ok(u64::try_from(row.opt_i64("n")?.unwrap_or(0)).unwrap_or(0))
}
