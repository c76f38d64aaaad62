//! Retention: finished messages (with their audit, check-attempt, ledger
//! and content rows) and settled alerts, deleted in short chunks. Never a
//! message an operator may still act on, never a pending alert.

use sqlx::Executor;

use super::row::SqlRow;
use super::{stmt, Bind, Dialect};
use crate::store::StoreResult;

/// What retention may delete, as SQL: finished rows only, SENT or
/// ROLLED_BACK (tombstones included).
const FINISHED: &str =
    "((status = 'COMMITTED' AND send_status = 'SENT') OR status = 'ROLLED_BACK')";

/// What an operator may still act on, as SQL, as the status index's ranges:
/// PREPARED, VERIFY_FAILED, and committed but PENDING or SEND_FAILED.
/// Never deleted, never dropped.
pub(in crate::store) const WAITING: &str = "(status IN ('PREPARED', 'VERIFY_FAILED') \
     OR (status = 'COMMITTED' AND send_status IN ('PENDING', 'SEND_FAILED')))";

/// Where an alert is settled (delivered, or without a webhook): only those
/// are ever deleted.
const SETTLED: &str = "state IN ('delivered', 'no_webhook')";

/// [`crate::store::HousekeepingStore::purge_finished`], given a transaction
/// on the backend: up to `limit` finished messages with their audit,
/// check-attempt and ledger rows, their content kept apart and their key,
/// then up to `limit` settled alerts unchanged for longer than `older_than`
/// (a pending alert is never deleted, however old: it has not reached
/// anyone yet). With `below`, only messages whose id is below it: on a
/// partitioned store, those of the partitions held past retention (see
/// `sql::partitions`); the others go whole, with their partition.
pub(in crate::store) async fn purge_finished<D>(
    conn: &mut D::Connection,
    older_than: std::time::Duration,
    limit: u32,
    below: Option<u64>,
) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
{
    let mut purged = 0;
    let finished = match below {
        Some(below) => format!("{FINISHED} AND id < {below}"),
        None => FINISHED.to_owned(),
    };
    if let Some(list) = stale_ids::<D>(&mut *conn, "messages", &finished, older_than, limit).await?
    {
        // A message's consumption ledger rows go with it, as its audit rows,
        // its content kept apart and its key (migration 0020) do.
        for table in [
            "audit_log",
            "check_attempts",
            "consumptions",
            "message_payloads",
            "message_keys",
        ] {
            sqlx::query(stmt::<D>(format!(
                "DELETE FROM {table} WHERE message_id IN ({list})"
            )))
            .execute(&mut *conn)
            .await?;
        }
        let done = sqlx::query(stmt::<D>(format!(
            "DELETE FROM messages WHERE id IN ({list}) AND {FINISHED}"
        )))
        .execute(&mut *conn)
        .await?;
        purged += D::rows_affected(&done);
    }
    if let Some(list) = stale_ids::<D>(&mut *conn, "alerts", SETTLED, older_than, limit).await? {
        let done = sqlx::query(stmt::<D>(format!(
            "DELETE FROM alerts WHERE id IN ({list}) AND {SETTLED}"
        )))
        .execute(&mut *conn)
        .await?;
        purged += D::rows_affected(&done);
    }
    Ok(purged)
}

/// The ids of up to `limit` rows of `table` where `condition` holds and that
/// are unchanged for longer than `older_than` (lowest first), as an SQL list
/// of numbers; None when there are none. The ids are numbers this query
/// read, so the list is safe to splice into the DELETEs that follow.
async fn stale_ids<D>(
    conn: &mut D::Connection,
    table: &str,
    condition: &str,
    older_than: std::time::Duration,
    limit: u32,
) -> StoreResult<Option<String>>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
{
    let ids: Vec<u64> = sqlx::query(stmt::<D>(format!(
        "SELECT id FROM {table} WHERE {condition} AND updated_at < {}{} ORDER BY id LIMIT ?",
        D::NOW,
        D::MINUS_SPAN
    )))
    .bind(D::span(older_than))
    .bind(i64::from(limit))
    .fetch_all(&mut *conn)
    .await?
    .iter()
    .map(|row| row.unsigned("id"))
    .collect::<StoreResult<_>>()?;
    Ok((!ids.is_empty()).then(|| {
        ids.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }))
}
