//! Reading a message by its key, and the cheapest statement that proves
//! the database answers.

use sqlx::Executor;

use super::row::{message_from_row, MESSAGE_COLUMNS};
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
