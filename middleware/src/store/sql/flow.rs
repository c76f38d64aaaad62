//! The flow per minute (`flow_minutes`): each instance adds what it counted
//! with one upsert per flush, so a minute's row is the sum over every
//! instance; the console and `GET /v1/admin/flow` read the rows back.
//! Only the upsert's conflict clause is a dialect ([`Dialect::on_duplicate`]).

use chrono::{DateTime, Utc};
use sqlx::Executor;

use super::row::SqlRow;
use super::{stmt, Bind, Dialect};
use crate::store::{BacklogSample, FlowCounts, FlowMinute, StoreResult};

/// [`crate::store::HousekeepingStore::add_flow`]: one statement, whatever the counts.
pub(in crate::store) async fn add_flow<D>(pool: &sqlx::Pool<D>, f: &FlowMinute) -> StoreResult<()>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    Option<D::Int>: Bind<D>,
    Option<D::Time>: Bind<D>,
{
    let counts = FlowCounts::COLUMNS;
    let add = counts
        .iter()
        .map(|c| format!("{c} = flow_minutes.{c} + {}", D::proposed(c)));
    // A flush without a sample, or with one older than the minute's,
    // keeps the minute's. backlog_at goes last: MySQL's later assignments
    // see the earlier ones' new values, SQLite's and PostgreSQL's do not.
    // The stored values are named with their table, which PostgreSQL
    // requires (a bare name could be the proposed row's too).
    let newer = format!(
        "({at} IS NOT NULL AND (flow_minutes.backlog_at IS NULL \
         OR {at} > flow_minutes.backlog_at))",
        at = D::proposed("backlog_at")
    );
    let sampled = ["backlog_prepared", "backlog_pending", "backlog_at"]
        .iter()
        .map(|c| {
            format!(
                "{c} = CASE WHEN {newer} THEN {} ELSE flow_minutes.{c} END",
                D::proposed(c)
            )
        });
    let sql = format!(
        "INSERT INTO flow_minutes (minute, {columns}, backlog_prepared, backlog_pending, \
         backlog_at) VALUES (?, {marks}, ?, ?, ?) {clause} {updates}",
        columns = counts.join(", "),
        marks = vec!["?"; counts.len()].join(", "),
        clause = D::on_duplicate("minute"),
        updates = add.chain(sampled).collect::<Vec<_>>().join(", "),
    );
    let mut q = sqlx::query(stmt::<D>(sql)).bind(D::time(f.minute));
    for v in f.counts.values() {
        q = q.bind(D::int(v));
    }
    q.bind(f.backlog.map(|b| D::int(b.prepared)))
        .bind(f.backlog.map(|b| D::int(b.pending)))
        .bind(f.backlog.map(|b| D::time(b.at)))
        .execute(pool)
        .await?;
    Ok(())
}

/// [`crate::store::HousekeepingStore::flow_since`].
pub(in crate::store) async fn flow_since<D>(
    pool: &sqlx::Pool<D>,
    since: DateTime<Utc>,
) -> StoreResult<Vec<FlowMinute>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    let sql = format!(
        "SELECT minute, {}, backlog_prepared, backlog_pending, backlog_at FROM flow_minutes \
         WHERE minute >= ? ORDER BY minute",
        FlowCounts::COLUMNS.join(", ")
    );
    sqlx::query(stmt::<D>(sql))
        .bind(D::time(since))
        .fetch_all(pool)
        .await?
        .iter()
        .map(|row| {
            let mut values = [0; 9];
            for (v, c) in values.iter_mut().zip(FlowCounts::COLUMNS) {
                *v = row.unsigned(c)?;
            }
            let backlog = match row.opt_time("backlog_at")? {
                None => None,
                Some(at) => Some(BacklogSample {
                    at,
                    prepared: row.unsigned("backlog_prepared")?,
                    pending: row.unsigned("backlog_pending")?,
                }),
            };
            Ok(FlowMinute {
                minute: row.time("minute")?,
                counts: FlowCounts::from_values(values),
                backlog,
            })
        })
        .collect()
}

/// [`crate::store::HousekeepingStore::purge_flow`].
pub(in crate::store) async fn purge_flow<D>(
    pool: &sqlx::Pool<D>,
    before: DateTime<Utc>,
) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    let done = sqlx::query(stmt::<D>("DELETE FROM flow_minutes WHERE minute < ?"))
        .bind(D::time(before))
        .execute(pool)
        .await?;
    Ok(D::rows_affected(&done))
}
