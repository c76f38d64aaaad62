//! The large tables' sizes and the oldest message's age, for `/metrics`
//! and the console: read from the database's catalog (each backend's
//! [`Dialect::table_sizes`]), never by counting rows, and the oldest
//! message by the lowest id, one step down the primary key.

use sqlx::Executor;

use super::row::SqlRow;
use super::{stmt, Dialect};
use crate::store::{Storage, StoreResult, TableSize};

/// The tables that grow with the traffic: messages and what hangs off
/// them, and the alerts. `message_keys` (the idempotency keys of
/// partitioned tables) is read where it exists.
pub(in crate::store) const LARGE_TABLES: [&str; 7] = [
    "messages",
    "audit_log",
    "check_attempts",
    "consumptions",
    "message_payloads",
    "alerts",
    "message_keys",
];

/// [`crate::store::HousekeepingStore::storage`].
pub(in crate::store) async fn storage<D>(pool: &sqlx::Pool<D>) -> StoreResult<Storage>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    let names: Vec<String> = LARGE_TABLES.iter().map(|t| format!("'{t}'")).collect();
    let rows = sqlx::query(stmt::<D>(D::table_sizes(&names.join(", "))))
        .fetch_all(pool)
        .await?;
    let mut tables = rows
        .iter()
        .map(|row| {
            Ok(TableSize {
                table: row.text("name")?,
                rows: count(row.opt_i64("row_estimate")?),
                bytes: count(row.opt_i64("bytes")?),
            })
        })
        .collect::<StoreResult<Vec<_>>>()?;
    // In the order of LARGE_TABLES, whatever order the catalog gave.
    tables.sort_by_key(|t| LARGE_TABLES.iter().position(|n| *n == t.table));
    let oldest = sqlx::query(stmt::<D>(format!(
        "SELECT {now} AS now, (SELECT created_at FROM messages ORDER BY id LIMIT 1) AS oldest",
        now = D::NOW
    )))
    .fetch_one(pool)
    .await?;
    Ok(Storage {
        tables,
        oldest_message_at: oldest.opt_time("oldest")?,
        oldest_partition: None,
        at: oldest.time("now")?,
    })
}

/// A catalog's figure as a count: an unknown or negative one (PostgreSQL's
/// -1 for a table never analyzed) is 0.
fn count(v: Option<i64>) -> u64 {
    v.and_then(|v| u64::try_from(v).ok()).unwrap_or(0)
}
