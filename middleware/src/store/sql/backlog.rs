//! The backlog for `/metrics`: the waiting messages in one grouped query
//! over the status index's waiting ranges, and the pending alerts.

use sqlx::Executor;

use super::retention::WAITING;
use super::row::SqlRow;
use super::summary::{scheduled, send_wait_since};
use super::{stmt, Dialect};
use crate::store::{Backlog, StoreResult};

/// [`crate::store::HousekeepingStore::backlog`].
pub(in crate::store) async fn backlog<D>(pool: &sqlx::Pool<D>) -> StoreResult<Backlog>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    let rows = sqlx::query(stmt::<D>(format!(
        "SELECT status, send_status, {} AS scheduled, COUNT(*) AS n, \
         MIN(created_at) AS oldest_created, MIN({}) AS oldest_decided, {} AS now FROM messages \
         WHERE {WAITING} GROUP BY status, send_status, scheduled",
        scheduled::<D>(),
        send_wait_since::<D>(),
        D::NOW
    )))
    .fetch_all(pool)
    .await?;
    let mut b = Backlog::default();
    for row in &rows {
        let status = row.text("status")?;
        let send = row.opt_text("send_status")?;
        let n = u64::try_from(row.opt_i64("n")?.unwrap_or(0)).unwrap_or(0);
        if row.opt_i64("scheduled")?.unwrap_or(0) != 0 {
            b.scheduled += n;
            continue;
        }
        if status == "PREPARED" {
            b.oldest_prepared_at = row.opt_time("oldest_created")?;
        }
        if send.as_deref() == Some("PENDING") {
            b.oldest_pending_send_at = row.opt_time("oldest_decided")?;
        }
        b.counts.push((status, send, n));
    }
    let alerts = sqlx::query(stmt::<D>(
        "SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM alerts WHERE state = 'pending'",
    ))
    .fetch_one(pool)
    .await?;
    b.pending_alerts = u64::try_from(alerts.opt_i64("n")?.unwrap_or(0)).unwrap_or(0);
    b.oldest_pending_alert_at = alerts.opt_time("oldest")?;
    b.waiting_commits = super::waiting::count_waiting_commits(pool).await?;
    b.at = match rows.first() {
        Some(row) => row.time("now")?,
        None => {
            let row = sqlx::query(stmt::<D>(format!("SELECT {} AS now", D::NOW)))
                .fetch_one(pool)
                .await?;
            row.time("now")?
        }
    };
    Ok(b)
}
