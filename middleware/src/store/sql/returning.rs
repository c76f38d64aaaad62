//! The single-message writes of the dialects whose statements return the
//! rows they wrote (PostgreSQL, SQLite), written once: an operator's
//! guarded change and a rollback's tombstone, each with its audit row in
//! the transaction the backend opened for writing, which they end.

use sqlx::{Executor, Transaction};

use super::audit::{insert_audits, AuditRow};
use super::row::{message_from_row, MESSAGE_COLUMNS};
use super::{stmt, Bind, Dialect};
use crate::store::{Message, StoreResult, Tombstone};

/// An operator's change of one message: `update` (binding `id` and
/// `version`: its guard) returning the row, and `audit`, in `tx`; the row
/// as it is then. None when the guard matched nothing: `tx` ends at once
/// (SQLite's `BEGIN IMMEDIATE` holds the database's write lock until then).
pub(in crate::store) async fn operator_update<D>(
    mut tx: Transaction<'_, D>,
    update: String,
    (id, version): (u64, u64),
    audit: AuditRow,
) -> StoreResult<Option<Message>>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    D::Int: Bind<D>,
    String: Bind<D>,
    &'static str: Bind<D>,
    Option<&'static str>: Bind<D>,
{
    let row = sqlx::query(stmt::<D>(format!("{update} RETURNING {MESSAGE_COLUMNS}")))
        .bind(D::int(id))
        .bind(D::int(version))
        .fetch_optional(&mut *tx)
        .await?;
    let Some(row) = row.as_ref().map(message_from_row).transpose()? else {
        tx.rollback().await?;
        return Ok(None);
    };
    insert_audits(&mut *tx, &[audit]).await?;
    tx.commit().await?;
    Ok(Some(row))
}

/// A ROLLED_BACK tombstone for a rollback of a message nobody prepared,
/// with its audit row, in `tx`. None when a row holds the key already (a
/// prepare came first): `tx` ends at once. The key is unique in
/// `message_keys` on PostgreSQL (migration 0020's trigger skips the row) and
/// in `messages` on SQLite: DO NOTHING without a target serves both.
pub(in crate::store) async fn insert_tombstone<D>(
    mut tx: Transaction<'_, D>,
    t: &Tombstone<'_>,
) -> StoreResult<Option<Message>>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    String: Bind<D>,
    Vec<u8>: Bind<D>,
    bool: Bind<D>,
    &'static str: Bind<D>,
    Option<&'static str>: Bind<D>,
{
    let now = D::NOW;
    let row = sqlx::query(stmt::<D>(format!(
        "INSERT INTO messages (biz_id, message_key, payload, headers, status, tombstone, \
         created_at, updated_at, decided_at) \
         VALUES (?, ?, ?, '{{}}', 'ROLLED_BACK', ?, {now}, {now}, {now}) \
         ON CONFLICT DO NOTHING RETURNING {MESSAGE_COLUMNS}"
    )))
    .bind(t.biz_id.to_string())
    .bind(t.message_key.to_string())
    .bind(Vec::<u8>::new())
    .bind(true)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row.as_ref().map(message_from_row).transpose()? else {
        tx.rollback().await?;
        return Ok(None);
    };
    insert_audits(&mut *tx, &[AuditRow::tombstone(row.id, t.actor, t.reason)]).await?;
    tx.commit().await?;
    Ok(Some(row))
}
