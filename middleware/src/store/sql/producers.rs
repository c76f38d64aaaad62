//! The producer registry's statements that read the same in both
//! dialects (the upsert is each backend's own).

use sqlx::Executor;

use super::row::{producer_from_row, PRODUCER_COLUMNS};
use super::{stmt, Bind, Dialect};
use crate::store::{Producer, StoreResult};

/// [`crate::store::RegistryStore::list_producers`].
pub(in crate::store) async fn list_producers<D>(pool: &sqlx::Pool<D>) -> StoreResult<Vec<Producer>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    sqlx::query(stmt::<D>(format!(
        "SELECT {PRODUCER_COLUMNS} FROM producers ORDER BY biz_id"
    )))
    .fetch_all(pool)
    .await?
    .iter()
    .map(producer_from_row)
    .collect()
}

/// The registration of `biz_id`.
pub(in crate::store) async fn find_producer<'c, D, E>(
    exec: E,
    biz_id: &str,
) -> StoreResult<Option<Producer>>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
    for<'a> &'a str: Bind<D>,
{
    sqlx::query(stmt::<D>(format!(
        "SELECT {PRODUCER_COLUMNS} FROM producers WHERE biz_id = ?"
    )))
    .bind(biz_id)
    .fetch_optional(exec)
    .await?
    .as_ref()
    .map(producer_from_row)
    .transpose()
}

/// Deletes the registration of `biz_id`; false when there was none.
pub(in crate::store) async fn delete_producer<'c, D, E>(exec: E, biz_id: &str) -> StoreResult<bool>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
    for<'a> &'a str: Bind<D>,
{
    let done = sqlx::query(stmt::<D>("DELETE FROM producers WHERE biz_id = ?"))
        .bind(biz_id)
        .execute(exec)
        .await?;
    Ok(D::rows_affected(&done) == 1)
}

/// Replaces the token hash of `biz_id`; false when there is no such producer.
pub(in crate::store) async fn set_producer_token<'c, D, E>(
    exec: E,
    biz_id: &str,
    token_hash: &[u8],
) -> StoreResult<bool>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
    for<'a> &'a str: Bind<D>,
    for<'a> &'a [u8]: Bind<D>,
{
    let done = sqlx::query(stmt::<D>(format!(
        "UPDATE producers SET token_hash = ?, updated_at = {} WHERE biz_id = ?",
        D::NOW
    )))
    .bind(token_hash)
    .bind(biz_id)
    .execute(exec)
    .await?;
    Ok(D::rows_affected(&done) == 1)
}
