//! In order per key (issue 28): the statements both backends share.
//!
//! An ordered producer's keyed message carries its key's order group
//! (`order_key`, set at prepare). Every write that makes such a row
//! COMMITTED calls [`order_commits`] in its own transaction: it locks the
//! key's `ordered_keys` row (an upsert that bumps `last_seq`) and gives the
//! message the next seq, so the order of a key's commits is the order in
//! which the database serialised them on that row lock, and a key's seqs
//! are gap-free. The message with seq `sent_through + 1` is the key's head,
//! the only one that may be due: any other committed message of the key
//! gets `next_send_at = NULL` (it waits; no sweep sees it, and the commit
//! hands it to no forwarder). The SENT mark of a head ([`mark_sent_ordered`])
//! and an operator's skip ([`skip`]) move `sent_through` past it under the
//! same row lock and make the next message due ([`promote`]).
//!
//! Lock order, both backends: the message row (its guarded UPDATE) first,
//! then the key row, then the successor's row. A commit never waits for a
//! successor's row, and the promotion finds its successor through
//! `ordered_seqs`, which holds only seqs a commit has already written, so
//! the two never wait for each other in opposite orders.
//!
//! Nothing here runs for an unordered message: the callers look at
//! `order_key` (which the row they already hold carries) first.

use sqlx::Executor;
use trustmsg_verify_api::admin::AlertKind;
use trustmsg_verify_api::{MessageStatus, SendStatus};

use super::audit::{insert_audits, AuditRow};
use super::row::{message_from_row, SqlRow, MESSAGE_COLUMNS};
use super::{stmt, Bind, Dialect};
use crate::store::{Actor, Message, NewAlert, OrderPos, SentMark, StoreResult};

/// What the SET of a promotion makes of the next message's due-time: due at
/// once, or at its `deliver_at` if that is later (a delayed message behind
/// its key's head waits for both). The one place that decides when a key's
/// next message may go.
pub(in crate::store) fn promoted_due<D: Dialect>() -> String {
    format!(
        "next_send_at = {greatest}({now}, COALESCE(deliver_at, {now}))",
        greatest = D::GREATEST,
        now = D::NOW
    )
}

/// Gives each row of `rows` that has just become COMMITTED and is ordered
/// its seq, on `conn` (the commit's transaction); a row that is not its
/// key's head gets `next_send_at = NULL`, in the database and in `rows`.
/// `upsert` is the dialect's `INSERT INTO ordered_keys … ` that creates the
/// key at seq 1 or bumps `last_seq` (it binds the key). Returns the alerts
/// to raise: a commit that is the first to wait behind a SEND_FAILED head
/// raises `key_blocked` (one per blocked head: a head that fails with
/// messages already behind it raised it when it failed).
pub(in crate::store) async fn order_commits<D>(
    conn: &mut D::Connection,
    upsert: &str,
    rows: &mut [Message],
) -> StoreResult<Vec<NewAlert>>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    Vec<u8>: Bind<D>,
    Option<String>: Bind<D>,
{
    let mut alerts = Vec::new();
    for m in rows.iter_mut() {
        let Some(key) = m.order_key.clone() else {
            continue;
        };
        if m.status != MessageStatus::Committed || m.order_seq.is_some() {
            continue;
        }
        sqlx::query(stmt::<D>(upsert.to_string()))
            .bind(key.clone())
            .execute(&mut *conn)
            .await?;
        let row = sqlx::query(stmt::<D>(
            "SELECT last_seq, sent_through FROM ordered_keys WHERE order_key = ?",
        ))
        .bind(key.clone())
        .fetch_one(&mut *conn)
        .await?;
        let seq: u64 = row.unsigned("last_seq")?;
        let sent_through: u64 = row.unsigned("sent_through")?;
        sqlx::query(stmt::<D>(
            "INSERT INTO ordered_seqs (order_key, seq, message_id) VALUES (?, ?, ?)",
        ))
        .bind(key.clone())
        .bind(D::int(seq))
        .bind(D::int(m.id))
        .execute(&mut *conn)
        .await?;
        let head = seq == sent_through + 1;
        let set = if head {
            "order_seq = ?"
        } else {
            "order_seq = ?, next_send_at = NULL"
        };
        sqlx::query(stmt::<D>(format!("UPDATE messages SET {set} WHERE id = ?")))
            .bind(D::int(seq))
            .bind(D::int(m.id))
            .execute(&mut *conn)
            .await?;
        m.order_seq = Some(seq);
        if !head {
            m.next_send_at = None;
        }
        if seq == sent_through + 2 {
            if let Some(blocking) = message_at::<D>(conn, &key, sent_through + 1).await? {
                if blocking.send_status == Some(SendStatus::SendFailed) {
                    alerts.push(key_blocked(&blocking, 1));
                }
            }
        }
    }
    Ok(alerts)
}

/// [`order_commits`] for a batch of commits in one transaction (the group
/// commit's), a few statements for the whole batch whatever its size: one
/// upsert bumps every key by its number of rows (keys in key order, so two
/// batches lock them in the same order), one read gives each key's
/// `last_seq` and `sent_through`, one INSERT records the seqs, one UPDATE
/// sets them (and takes the non-heads' due-time away). Within a key the
/// rows take their seqs in `rows` order. `on_conflict` is the dialect's
/// clause of that upsert that adds the new value of `last_seq` to the
/// stored one.
pub(in crate::store) async fn order_commit_batch<D>(
    conn: &mut D::Connection,
    on_conflict: &str,
    rows: &mut [Option<Message>],
) -> StoreResult<Vec<NewAlert>>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    Vec<u8>: Bind<D>,
    i64: Bind<D>,
{
    use std::collections::BTreeMap;
    let mut by_key: BTreeMap<Vec<u8>, Vec<usize>> = BTreeMap::new();
    for (i, m) in rows.iter().enumerate() {
        let Some(m) = m else { continue };
        if let Some(key) = &m.order_key {
            if m.status == MessageStatus::Committed && m.order_seq.is_none() {
                by_key.entry(key.clone()).or_default().push(i);
            }
        }
    }
    if by_key.is_empty() {
        return Ok(Vec::new());
    }
    let mut q = sqlx::QueryBuilder::<D>::new(
        "INSERT INTO ordered_keys (order_key, last_seq, sent_through, updated_at) ",
    );
    q.push_values(&by_key, |mut b, (key, idx)| {
        b.push_bind(key.clone())
            .push_bind(D::int(idx.len() as u64))
            .push("0")
            .push(D::NOW);
    });
    q.push(on_conflict);
    q.build().execute(&mut *conn).await?;

    let mut q = sqlx::QueryBuilder::<D>::new(
        "SELECT order_key, last_seq, sent_through FROM ordered_keys WHERE order_key IN (",
    );
    let mut sep = q.separated(", ");
    for key in by_key.keys() {
        sep.push_bind(key.clone());
    }
    q.push(")");
    let mut stored: BTreeMap<Vec<u8>, (u64, u64)> = BTreeMap::new();
    for row in q.build().fetch_all(&mut *conn).await? {
        stored.insert(
            row.bytes("order_key")?,
            (row.unsigned("last_seq")?, row.unsigned("sent_through")?),
        );
    }
    // (row index, seq, is head, sent_through) for every ordered row.
    let mut placed = Vec::new();
    for (key, idx) in &by_key {
        let &(last, sent_through) = stored.get(key).ok_or(crate::store::StoreError::Vanished(
            "an ordered key just upserted",
        ))?;
        let first = last + 1 - idx.len() as u64;
        for (n, &i) in idx.iter().enumerate() {
            let seq = first + n as u64;
            placed.push((i, seq, seq == sent_through + 1, sent_through));
        }
    }
    let id = |i: usize| rows[i].as_ref().map_or(0, |m| m.id);
    let mut q =
        sqlx::QueryBuilder::<D>::new("INSERT INTO ordered_seqs (order_key, seq, message_id) ");
    q.push_values(&placed, |mut b, &(i, seq, _, _)| {
        let key = rows[i].as_ref().and_then(|m| m.order_key.clone());
        b.push_bind(key.unwrap_or_default())
            .push_bind(D::int(seq))
            .push_bind(D::int(id(i)));
    });
    q.build().execute(&mut *conn).await?;

    let mut q = sqlx::QueryBuilder::<D>::new("UPDATE messages SET ");
    if placed.iter().any(|p| !p.2) {
        q.push("next_send_at = CASE WHEN id IN (");
        let mut sep = q.separated(", ");
        for &(i, ..) in placed.iter().filter(|p| !p.2) {
            sep.push_bind(D::int(id(i)));
        }
        q.push(") THEN NULL ELSE next_send_at END, ");
    }
    q.push("order_seq = CASE id");
    for &(i, seq, ..) in &placed {
        q.push(" WHEN ")
            .push_bind(D::int(id(i)))
            .push(" THEN ")
            .push_bind(D::int(seq));
    }
    q.push(" END WHERE id IN (");
    let mut sep = q.separated(", ");
    for &(i, ..) in &placed {
        sep.push_bind(D::int(id(i)));
    }
    q.push(")");
    q.build().execute(&mut *conn).await?;

    let mut alerts = Vec::new();
    for (i, seq, head, sent_through) in placed {
        let Some(m) = rows[i].as_mut() else { continue };
        m.order_seq = Some(seq);
        if !head {
            m.next_send_at = None;
        }
        if seq == sent_through + 2 {
            let key = m.order_key.clone().unwrap_or_default();
            if let Some(blocking) = message_at::<D>(conn, &key, sent_through + 1).await? {
                if blocking.send_status == Some(SendStatus::SendFailed) {
                    alerts.push(key_blocked(&blocking, 1));
                }
            }
        }
    }
    Ok(alerts)
}

/// The committed message of `key` at `seq`, while it is neither SENT nor
/// skipped.
async fn message_at<D>(
    conn: &mut D::Connection,
    key: &[u8],
    seq: u64,
) -> StoreResult<Option<Message>>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    Vec<u8>: Bind<D>,
{
    sqlx::query(stmt::<D>(format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = \
         (SELECT message_id FROM ordered_seqs WHERE order_key = ? AND seq = ?)"
    )))
    .bind(key.to_vec())
    .bind(D::int(seq))
    .fetch_optional(&mut *conn)
    .await?
    .as_ref()
    .map(message_from_row)
    .transpose()
}

/// The `key_blocked` alert of `head`, with `waiting` messages behind it.
fn key_blocked(head: &Message, waiting: u64) -> NewAlert {
    let mut alert = NewAlert::failed(AlertKind::KeyBlocked, head);
    alert.last_error = format!(
        "ordered key blocked: {waiting} later message(s) of topic {:?}, record key {:?} wait \
         behind this SEND_FAILED message (redeliver it, or skip it to let them go): {}",
        head.topic.as_deref().unwrap_or_default(),
        head.key.as_deref().unwrap_or_default(),
        alert.last_error
    );
    alert
}

/// The `key_blocked` alert of `failed`, an ordered head that has just gone
/// SEND_FAILED, when later messages of its key wait behind it (read on
/// `conn`, the SEND_FAILED's transaction, with `lock` appended: the key row
/// is locked so a concurrent commit behind it sees the head failed, or is
/// counted here, never neither).
pub(in crate::store) async fn blocked_alert<D>(
    conn: &mut D::Connection,
    lock: &str,
    failed: &Message,
) -> StoreResult<Option<NewAlert>>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    Vec<u8>: Bind<D>,
{
    let Some(pos) = failed.order_pos() else {
        return Ok(None);
    };
    let last: Option<u64> = sqlx::query(stmt::<D>(format!(
        "SELECT last_seq FROM ordered_keys WHERE order_key = ?{lock}"
    )))
    .bind(pos.key.to_vec())
    .fetch_optional(&mut *conn)
    .await?
    .map(|row| row.unsigned("last_seq"))
    .transpose()?;
    let waiting = last.unwrap_or(0).saturating_sub(pos.seq);
    Ok((waiting > 0).then(|| key_blocked(failed, waiting)))
}

/// Moves `pos.key` past `pos.seq` when that is its head (`sent_through =
/// seq - 1`) and makes the next message due; false (nothing written) when
/// it is not the head.
async fn advance<D>(conn: &mut D::Connection, pos: OrderPos) -> StoreResult<bool>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    Vec<u8>: Bind<D>,
{
    let key = pos.key.to_vec();
    let done = sqlx::query(stmt::<D>(format!(
        "UPDATE ordered_keys SET sent_through = ?, updated_at = {now} \
         WHERE order_key = ? AND sent_through = ?",
        now = D::NOW
    )))
    .bind(D::int(pos.seq))
    .bind(key.clone())
    .bind(D::int(pos.seq.saturating_sub(1)))
    .execute(&mut *conn)
    .await?;
    if D::rows_affected(&done) != 1 {
        return Ok(false);
    }
    sqlx::query(stmt::<D>(
        "DELETE FROM ordered_seqs WHERE order_key = ? AND seq = ?",
    ))
    .bind(key.clone())
    .bind(D::int(pos.seq))
    .execute(&mut *conn)
    .await?;
    promote::<D>(conn, &key, pos.seq + 1).await?;
    Ok(true)
}

/// Makes the message of `key` at `seq` due, if it is committed and waiting.
async fn promote<D>(conn: &mut D::Connection, key: &[u8], seq: u64) -> StoreResult<()>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    Vec<u8>: Bind<D>,
{
    sqlx::query(stmt::<D>(format!(
        "UPDATE messages SET {due}, version = version + 1 WHERE id = \
         (SELECT message_id FROM ordered_seqs WHERE order_key = ? AND seq = ?) \
         AND status = 'COMMITTED' AND send_status = 'PENDING' AND next_send_at IS NULL",
        due = promoted_due::<D>()
    )))
    .bind(key.to_vec())
    .bind(D::int(seq))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The SENT marks of ordered messages, on `conn` (one transaction): each
/// mark's guarded UPDATE, then, when it matched, its key moves on and the
/// next message is made due. The marks go in key order, so two batches
/// lock the same keys in the same order. Returns how many marks matched.
pub(in crate::store) async fn mark_sent_ordered<D>(
    conn: &mut D::Connection,
    marks: &[SentMark],
) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    Vec<u8>: Bind<D>,
    i32: Bind<D>,
    i64: Bind<D>,
{
    let mut ordered: Vec<(&SentMark, OrderPos)> =
        marks.iter().filter_map(|m| Some((m, m.order?))).collect();
    ordered.sort_by_key(|(m, pos)| (pos.key, m.id));
    let mut matched = 0;
    for (mark, pos) in ordered {
        let done = sqlx::query(stmt::<D>(format!(
            "UPDATE messages SET send_status = 'SENT', next_send_at = NULL, \
             sent_at = {now}, updated_at = {now}, version = version + 1, \
             send_attempts = send_attempts + 1, kafka_partition = ?, kafka_offset = ?, \
             headroom = NULL \
             WHERE id = ? AND version = ? AND status = 'COMMITTED' AND send_status = 'PENDING'",
            now = D::NOW
        )))
        .bind(mark.partition)
        .bind(mark.offset)
        .bind(D::int(mark.id))
        .bind(D::int(mark.version))
        .execute(&mut *conn)
        .await?;
        if D::rows_affected(&done) == 1 {
            matched += 1;
            advance::<D>(conn, pos).await?;
        }
    }
    Ok(matched)
}

/// [`crate::store::OperatorStore::skip_blocked`] on `conn` (one transaction): `m`,
/// as the caller read it, must be its key's SEND_FAILED head at `m.version`.
/// It stays SEND_FAILED, leaves its key's order (`order_key` cleared: a
/// later redeliver sends it as an unordered message), the key moves past it
/// and its next message is made due; audited. None when the guard or the
/// head check fails (nothing is written: the caller rolls back).
pub(in crate::store) async fn skip<D>(
    conn: &mut D::Connection,
    m: &Message,
    actor: &Actor,
    reason: &str,
) -> StoreResult<Option<Message>>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    Vec<u8>: Bind<D>,
    String: Bind<D>,
    &'static str: Bind<D>,
    Option<&'static str>: Bind<D>,
{
    let Some(pos) = m.order_pos() else {
        return Ok(None);
    };
    let done = sqlx::query(stmt::<D>(format!(
        "UPDATE messages SET order_key = NULL, version = version + 1, updated_at = {now} \
         WHERE id = ? AND version = ? AND status = 'COMMITTED' AND send_status = 'SEND_FAILED' \
         AND order_key IS NOT NULL",
        now = D::NOW
    )))
    .bind(D::int(m.id))
    .bind(D::int(m.version))
    .execute(&mut *conn)
    .await?;
    if D::rows_affected(&done) != 1 || !advance::<D>(conn, pos).await? {
        return Ok(None);
    }
    insert_audits(&mut *conn, &[AuditRow::skip(m.id, actor, reason)]).await?;
    sqlx::query(stmt::<D>(format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?"
    )))
    .bind(D::int(m.id))
    .fetch_optional(&mut *conn)
    .await?
    .as_ref()
    .map(message_from_row)
    .transpose()
}

/// [`crate::store::OperatorStore::blocked_by`]: for a committed, PENDING ordered
/// message that is not its key's head, the head's id.
pub(in crate::store) async fn blocked_by<D>(
    pool: &sqlx::Pool<D>,
    m: &Message,
) -> StoreResult<Option<u64>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    Vec<u8>: Bind<D>,
{
    let Some(pos) = m.order_pos() else {
        return Ok(None);
    };
    if m.send_status != Some(SendStatus::Pending) {
        return Ok(None);
    }
    let head: Option<u64> = sqlx::query(stmt::<D>(
        "SELECT s.message_id FROM ordered_keys k JOIN ordered_seqs s \
         ON s.order_key = k.order_key AND s.seq = k.sent_through + 1 WHERE k.order_key = ?",
    ))
    .bind(pos.key.to_vec())
    .fetch_optional(pool)
    .await?
    .map(|row| row.unsigned("message_id"))
    .transpose()?;
    Ok(head.filter(|&id| id != m.id))
}
