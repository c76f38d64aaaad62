//! Reading a message by its key, and the cheapest statement that proves
//! the database answers.

use std::collections::BTreeMap;

use sqlx::{Executor, QueryBuilder};

use super::row::{message_from_row, SqlRow, MESSAGE_COLUMNS};
use super::{stmt, Bind, Dialect};
use crate::store::{Message, StoreResult};

/// The cheapest statement that proves the database answers.
pub(in crate::store) async fn ping<'c, D, E>(exec: E) -> StoreResult<()>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
{
    sqlx::query(stmt::<D>("SELECT 1")).execute(exec).await?;
    Ok(())
}

/// The message holding (biz_id, message_key).
pub(in crate::store) async fn find_message<'c, D, E>(
    exec: E,
    biz_id: &str,
    message_key: &str,
) -> StoreResult<Option<Message>>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
    for<'a> &'a str: Bind<D>,
{
    sqlx::query(stmt::<D>(format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages WHERE biz_id = ? AND message_key = ?"
    )))
    .bind(biz_id)
    .bind(message_key)
    .fetch_optional(exec)
    .await?
    .as_ref()
    .map(message_from_row)
    .transpose()
}

/// Frees the key (biz_id, message_key) when the message it names has left:
/// its partition was dropped and the upkeep has not deleted its keys yet
/// (`sql::partitions`). Ids are never handed out twice, so a key whose
/// message id has no row is stale for good; it is deleted by its message
/// id, so a key another prepare has taken since is left alone. Returns
/// whether it freed the key; a prepare that found the key taken and no
/// message then tries once more.
pub(in crate::store) async fn free_stale_key<D>(
    pool: &sqlx::Pool<D>,
    biz_id: &str,
    message_key: &str,
) -> StoreResult<bool>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    for<'a> &'a str: Bind<D>,
{
    let holder = sqlx::query(stmt::<D>(
        "SELECT message_id FROM message_keys WHERE biz_id = ? AND message_key = ?",
    ))
    .bind(biz_id)
    .bind(message_key)
    .fetch_optional(pool)
    .await?;
    let Some(holder) = holder
        .as_ref()
        .map(|row| row.unsigned::<u64>("message_id"))
        .transpose()?
    else {
        return Ok(false);
    };
    let there = sqlx::query(stmt::<D>("SELECT id FROM messages WHERE id = ?"))
        .bind(D::int(holder))
        .fetch_optional(pool)
        .await?;
    if there.is_some() {
        return Ok(false);
    }
    let done = sqlx::query(stmt::<D>(
        "DELETE FROM message_keys WHERE biz_id = ? AND message_key = ? AND message_id = ?",
    ))
    .bind(biz_id)
    .bind(message_key)
    .bind(D::int(holder))
    .execute(pool)
    .await?;
    Ok(D::rows_affected(&done) == 1)
}

/// The rows holding these (biz_id, message_key) pairs, in any order, with
/// `columns` ([`MESSAGE_COLUMNS`] or `STORED_COLUMNS`): one statement,
/// grouped per biz_id so each group is a range on the unique
/// (biz_id, message_key) index.
pub(in crate::store) async fn select_by_keys<'e, D, E>(
    exec: E,
    columns: &str,
    keys: &[(&str, &str)],
) -> StoreResult<Vec<Message>>
where
    D: Dialect,
    E: Executor<'e, Database = D>,
    for<'a> &'a str: Bind<D>,
{
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut by_biz: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (b, k) in keys {
        by_biz.entry(b).or_default().push(k);
    }
    let mut q = QueryBuilder::<D>::new(format!("SELECT {columns} FROM messages WHERE "));
    for (i, (biz, ks)) in by_biz.iter().enumerate() {
        if i > 0 {
            q.push(" OR ");
        }
        q.push("(biz_id = ")
            .push_bind(*biz)
            .push(" AND message_key IN (");
        let mut sep = q.separated(", ");
        for k in ks {
            sep.push_bind(*k);
        }
        q.push("))");
    }
    q.build()
        .fetch_all(exec)
        .await?
        .iter()
        .map(message_from_row)
        .collect()
}

/// The (biz_id, message_key) of each message of a batch to create COMMITTED
/// in one step, in order; None when the batch is empty or names a key twice
/// (the one-step paths then write nothing and the caller prepares and
/// commits, which sorts the repeats out).
pub(in crate::store) fn distinct_keys(
    batch: &[crate::store::NewCommitted],
) -> Option<Vec<(&str, &str)>> {
    let keys: Vec<(&str, &str)> = batch
        .iter()
        .map(|c| (c.message.biz_id.as_str(), c.message.message_key.as_str()))
        .collect();
    let distinct: std::collections::HashSet<&(&str, &str)> = keys.iter().collect();
    (!keys.is_empty() && distinct.len() == keys.len()).then_some(keys)
}
