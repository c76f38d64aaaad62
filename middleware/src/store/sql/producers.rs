//! The producer and consumer-group registry's statements, the same in every
//! dialect (an upsert's conflict clause is the dialect's,
//! [`Dialect::on_duplicate`]).

use sqlx::Executor;

use super::ledger::{bind_group, find_consumer_group, group_from_row, GROUP_COLUMNS};
use super::row::{bind_producer, producer_from_row, PRODUCER_COLUMNS};
use super::{stmt, Bind, Dialect};
use crate::store::{
    ConsumerGroup, ConsumerGroupRecord, Producer, ProducerRecord, StoreError, StoreResult,
};

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

/// [`crate::store::RegistryStore::upsert_producer`]: an update keeps the
/// token and the signing secret, which have their own operations, and
/// `created_at`. The row as it is then: returned by the upsert where the
/// dialect can, read back where not.
pub(in crate::store) async fn upsert_producer<D>(
    pool: &sqlx::Pool<D>,
    p: &ProducerRecord,
) -> StoreResult<Producer>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    for<'a> &'a str: Bind<D>,
    for<'a> &'a [u8]: Bind<D>,
    Option<String>: Bind<D>,
    bool: Bind<D>,
    i64: Bind<D>,
{
    let now = D::NOW;
    let sql = format!(
        "INSERT INTO producers ({PRODUCER_COLUMNS}) \
         VALUES (?, ?, ?, ?, ?, ?, ?, {now}, {now}, ?, ?) {upsert}{returning}",
        upsert = updates::<D>(
            "biz_id",
            &[
                "verify_url",
                "ordered",
                "verify_timeout_ms",
                "first_verify_after_ms",
                "max_verify_attempts",
                "topics",
            ]
        ),
        returning = returning::<D>(PRODUCER_COLUMNS),
    );
    let upsert = bind_producer(sqlx::query(stmt::<D>(sql)), p);
    if D::UPSERT_RETURNS {
        return producer_from_row(&upsert.fetch_one(pool).await?);
    }
    upsert.execute(pool).await?;
    find_producer(pool, &p.biz_id)
        .await?
        .ok_or(StoreError::Vanished("a producer just upserted"))
}

/// [`crate::store::RegistryStore::upsert_consumer_group`]: an update keeps
/// the token (rotated on its own) and `created_at`; the row as it is then.
pub(in crate::store) async fn upsert_consumer_group<D>(
    pool: &sqlx::Pool<D>,
    g: &ConsumerGroupRecord,
) -> StoreResult<ConsumerGroup>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    String: Bind<D>,
    Vec<u8>: Bind<D>,
    i64: Bind<D>,
{
    let now = D::NOW;
    let sql = format!(
        "INSERT INTO consumer_groups ({GROUP_COLUMNS}) \
         VALUES (?, ?, ?, ?, ?, {now}, {now}) {upsert}{returning}",
        upsert = updates::<D>(
            "group_name",
            &["topics", "max_failures", "in_progress_timeout_ms"]
        ),
        returning = returning::<D>(GROUP_COLUMNS),
    );
    let upsert = bind_group(sqlx::query(stmt::<D>(sql)), g);
    if D::UPSERT_RETURNS {
        return group_from_row(&upsert.fetch_one(pool).await?);
    }
    upsert.execute(pool).await?;
    find_consumer_group(pool, &g.name)
        .await?
        .ok_or(StoreError::Vanished("a consumer group just upserted"))
}

/// An upsert's update on unique `key`: each of `columns` takes the value
/// proposed, and `updated_at` the database clock.
fn updates<D: Dialect>(key: &str, columns: &[&str]) -> String {
    let set: Vec<String> = columns
        .iter()
        .map(|c| format!("{c} = {}", D::proposed(c)))
        .collect();
    format!(
        "{} {}, updated_at = {}",
        D::on_duplicate(key),
        set.join(", "),
        D::NOW
    )
}

/// ` RETURNING columns` where an upsert can return its row.
fn returning<D: Dialect>(columns: &str) -> String {
    if D::UPSERT_RETURNS {
        format!(" RETURNING {columns}")
    } else {
        String::new()
    }
}
