//! Retention: finished messages (with their audit, check-attempt, ledger
//! and content rows) and settled alerts, deleted in short chunks. Never a
//! message an operator may still act on, never a pending alert.
//!
//! With an archive (`crate::archive`) the deletion comes in two steps with
//! the archive's write between them: [`finished_messages`] reads a batch
//! with everything that hangs off it, and once the archive holds it,
//! [`delete_archived`] deletes exactly those messages, each only if it is
//! still as it was archived (same version, same ledger rows), so nothing
//! deleted is missing from the archive.

use std::collections::HashMap;

use sqlx::Executor;
use trustmsg_verify_api::admin::AlertKind;

use super::row::{message_from_row, SqlRow, MESSAGE_COLUMNS};
use super::{audit_trails, check_attempts_of, consumptions_in, raise_alerts, stmt, Bind, Dialect};
use crate::store::{FinishedMessage, FinishedRange, Message, NewAlert, StoreResult};

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

/// The tables whose rows belong to one message (`message_id`) and go with
/// it: its audit rows, check-back calls, consumption-ledger rows, its
/// content kept apart and its key (migration 0020).
const CHILDREN: [&str; 5] = [
    "audit_log",
    "check_attempts",
    "consumptions",
    "message_payloads",
    "message_keys",
];

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
        purged += delete_messages::<D>(&mut *conn, &list).await?;
    }
    purged += purge_settled_alerts::<D>(&mut *conn, older_than, limit).await?;
    Ok(purged)
}

/// [`crate::store::HousekeepingStore::purge_settled_alerts`]: up to `limit`
/// settled alerts unchanged for longer than `older_than`.
pub(in crate::store) async fn purge_settled_alerts<D>(
    conn: &mut D::Connection,
    older_than: std::time::Duration,
    limit: u32,
) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
{
    let Some(list) = stale_ids::<D>(&mut *conn, "alerts", SETTLED, older_than, limit).await? else {
        return Ok(0);
    };
    let done = sqlx::query(stmt::<D>(format!(
        "DELETE FROM alerts WHERE id IN ({list}) AND {SETTLED}"
    )))
    .execute(&mut *conn)
    .await?;
    Ok(D::rows_affected(&done))
}

/// [`crate::store::HousekeepingStore::finished_messages`]: the finished
/// messages `range` names, lowest id first, with their audit trails,
/// check-back calls and ledger rows. Three statements after the first:
/// the candidates' ids and sizes (so the byte budget is kept without
/// reading a payload), the chosen rows in full, then each kind of child for
/// all of them at once.
pub(in crate::store) async fn finished_messages<D>(
    conn: &mut D::Connection,
    range: &FinishedRange,
) -> StoreResult<Vec<FinishedMessage>>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
{
    let end = range.ids.end.min(FinishedRange::ALL_IDS.end);
    let candidates = sqlx::query(stmt::<D>(format!(
        "SELECT id, CAST(COALESCE(payload_bytes, LENGTH(payload)) AS {}) AS size \
         FROM messages WHERE id >= ? AND id < ? AND {FINISHED} AND updated_at < {}{} \
         ORDER BY id LIMIT ?",
        D::SIGNED,
        D::NOW,
        D::MINUS_SPAN
    )))
    .bind(D::int(range.ids.start))
    .bind(D::int(end))
    .bind(D::span(range.older_than))
    .bind(i64::from(range.limit))
    .fetch_all(&mut *conn)
    .await?;
    let mut ids = Vec::with_capacity(candidates.len());
    let mut sizes = Vec::with_capacity(candidates.len());
    for row in &candidates {
        ids.push(row.unsigned::<u64>("id")?);
        sizes.push(u64::try_from(row.opt_i64("size")?.unwrap_or(0)).unwrap_or(0));
    }
    ids.truncate(range.taken(&sizes));
    let Some(list) = id_list(ids.iter().copied()) else {
        return Ok(Vec::new());
    };
    let messages = sqlx::query(stmt::<D>(format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages WHERE id IN ({list}) AND {FINISHED} ORDER BY id"
    )))
    .fetch_all(&mut *conn)
    .await?
    .iter()
    .map(message_from_row)
    .collect::<StoreResult<Vec<Message>>>()?;
    let mut audit = audit_trails::<D>(&mut *conn, &list, &messages).await?;
    let mut calls = check_attempts_of::<D>(&mut *conn, &list).await?;
    let mut ledger = consumptions_in::<D>(&mut *conn, &list, "").await?;
    Ok(messages
        .into_iter()
        .map(|message| FinishedMessage {
            audit: audit.remove(&message.id).unwrap_or_default(),
            check_attempts: calls.remove(&message.id).unwrap_or_default(),
            consumptions: ledger.remove(&message.id).unwrap_or_default(),
            message,
        })
        .collect())
}

/// [`crate::store::HousekeepingStore::delete_archived`], given a
/// transaction on the backend and what its SELECTs append to lock rows
/// (`lock`): locks the archived messages that are still finished and their
/// ledger rows, keeps those whose version and ledger rows are as archived,
/// and deletes them with their children. A message that changed since
/// (an operator's action, a consumer group's begin or finish) stays, and
/// is archived again, as it is now, by a later round.
pub(in crate::store) async fn delete_archived<D>(
    conn: &mut D::Connection,
    lock: &str,
    archived: &[FinishedMessage],
) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
{
    let Some(list) = id_list(archived.iter().map(|f| f.message.id)) else {
        return Ok(0);
    };
    let versions: HashMap<u64, u64> = sqlx::query(stmt::<D>(format!(
        "SELECT id, version FROM messages WHERE id IN ({list}) AND {FINISHED}{lock}"
    )))
    .fetch_all(&mut *conn)
    .await?
    .iter()
    .map(|row| Ok((row.unsigned("id")?, row.unsigned("version")?)))
    .collect::<StoreResult<_>>()?;
    let ledger = consumptions_in::<D>(&mut *conn, &list, lock).await?;
    let unchanged = archived.iter().filter(|f| {
        versions.get(&f.message.id) == Some(&f.message.version)
            && ledger.get(&f.message.id).map_or(&[][..], Vec::as_slice) == f.consumptions
    });
    let Some(list) = id_list(unchanged.map(|f| f.message.id)) else {
        return Ok(0);
    };
    delete_messages::<D>(conn, &list).await
}

/// [`crate::store::HousekeepingStore::raise_archive_failed`]: the
/// `archive_failed` alert about `held` (the first message of the batch the
/// archive could not take), unless one was raised about it before. Its own
/// transaction; announced once committed.
pub(in crate::store) async fn raise_archive_failed<D>(
    conn: &mut D::Connection,
    held: &Message,
    error: &str,
) -> StoreResult<Option<super::alerts::Raised>>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    String: Bind<D>,
    Option<String>: Bind<D>,
    &'static str: Bind<D>,
    i64: Bind<D>,
{
    let kind = AlertKind::ArchiveFailed;
    let before = sqlx::query(stmt::<D>(
        "SELECT id FROM alerts WHERE kind = ? AND message_id = ?",
    ))
    .bind(kind.as_str())
    .bind(D::int(held.id))
    .fetch_optional(&mut *conn)
    .await?;
    if before.is_some() {
        return Ok(None);
    }
    let alert = NewAlert {
        kind,
        message_id: held.id,
        biz_id: held.biz_id.clone(),
        message_key: held.message_key.clone(),
        attempts: 0,
        last_error: format!(
            "the archive could not take finished messages from id {} on, so retention \
             deletes none of them until it can: {error}",
            held.id
        ),
        group: None,
    };
    Ok(Some(raise_alerts::<D>(conn, vec![alert]).await?))
}

/// Deletes the messages in `list` (an SQL list of ids) that are finished,
/// with their children; returns how many messages went.
async fn delete_messages<D>(conn: &mut D::Connection, list: &str) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
{
    for table in CHILDREN {
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
    Ok(D::rows_affected(&done))
}

/// `ids` as an SQL list of numbers; None when there are none. The ids are
/// numbers, so the list is safe to splice into a statement.
fn id_list(ids: impl Iterator<Item = u64>) -> Option<String> {
    let list = ids.map(|id| id.to_string()).collect::<Vec<_>>().join(", ");
    (!list.is_empty()).then_some(list)
}

/// The ids of up to `limit` rows of `table` where `condition` holds and that
/// are unchanged for longer than `older_than` (lowest first), as an SQL list
/// of numbers; None when there are none.
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
    Ok(id_list(ids.into_iter()))
}
