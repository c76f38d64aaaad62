//! The per-producer summary, read from the index ranges of the live
//! states and of what finished recently, never from the whole table; and
//! the two expressions the backlog shares with it.

use chrono::{DateTime, Utc};
use sqlx::Executor;

use super::row::SqlRow;
use super::{stmt, Bind, Dialect};
use crate::store::{ProducerSummary, StoreResult};

/// The states an operator may still have to act on, as SQL. Their rows are
/// the backlog, so counting them reads index ranges whose size is the
/// backlog's, never the table's (`idx_messages_state`, migration 0008).
const LIVE: &str = "(status IN ('PREPARED', 'VERIFY_FAILED') \
     OR (status = 'COMMITTED' AND send_status IN ('PENDING', 'SEND_FAILED')))";

/// 1 for a committed message whose send waits for a `deliver_at` still in
/// the future, else 0: scheduled, reported apart from the backlog.
pub(super) fn scheduled<D: Dialect>() -> String {
    format!(
        "CASE WHEN send_status = 'PENDING' AND deliver_at > {} THEN 1 ELSE 0 END",
        D::NOW
    )
}

/// Since when a PENDING send has waited: its commit, or its `deliver_at` if
/// that came later (as the overdue watch counts it).
pub(super) fn send_wait_since<D: Dialect>() -> String {
    format!(
        "{}(decided_at, COALESCE(deliver_at, decided_at))",
        D::GREATEST
    )
}

/// [`crate::store::OperatorStore::summary`]: two statements, neither of which reads
/// the finished rows that make up most of the table. The live states are
/// counted exactly from their index ranges; the finished ones only over the
/// last `recent`, from the `(status, send_status, updated_at, biz_id)` index
/// alone (no row is read), so the cost follows the recent throughput, not the
/// table's size.
pub(in crate::store) async fn summary<D>(
    pool: &sqlx::Pool<D>,
    recent: std::time::Duration,
) -> StoreResult<Vec<ProducerSummary>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    i64: Bind<D>,
{
    let live = sqlx::query(stmt::<D>(format!(
        "SELECT biz_id, status, send_status, {SCHEDULED} AS scheduled, COUNT(*) AS n, \
         MIN(created_at) AS oldest_created, MIN({SEND_WAIT_SINCE}) AS oldest_decided \
         FROM messages WHERE {LIVE} GROUP BY biz_id, status, send_status, scheduled",
        SCHEDULED = scheduled::<D>(),
        SEND_WAIT_SINCE = send_wait_since::<D>(),
    )))
    .fetch_all(pool)
    .await?;
    // `send_status IS NULL` pins the index's second column, so `updated_at`
    // bounds the ROLLED_BACK range as it does the SENT one.
    let since = format!("{}{}", D::NOW, D::MINUS_SPAN);
    let finished = sqlx::query(stmt::<D>(format!(
        "SELECT biz_id, status, COUNT(*) AS n FROM messages \
         WHERE (status = 'COMMITTED' AND send_status = 'SENT' AND updated_at >= {since}) \
         OR (status = 'ROLLED_BACK' AND send_status IS NULL AND updated_at >= {since}) \
         GROUP BY biz_id, status"
    )))
    .bind(D::span(recent))
    .bind(D::span(recent))
    .fetch_all(pool)
    .await?;
    let older = |a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>| match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let mut by_biz: std::collections::BTreeMap<String, ProducerSummary> = Default::default();
    fn entry(
        by_biz: &mut std::collections::BTreeMap<String, ProducerSummary>,
        biz_id: String,
    ) -> &mut ProducerSummary {
        by_biz
            .entry(biz_id.clone())
            .or_insert_with(|| ProducerSummary {
                biz_id,
                ..Default::default()
            })
    }
    for row in &live {
        let status = row.text("status")?;
        let send = row.opt_text("send_status")?;
        let n = u64::try_from(row.opt_i64("n")?.unwrap_or(0)).unwrap_or(0);
        let s = entry(&mut by_biz, row.text("biz_id")?);
        if row.opt_i64("scheduled")?.unwrap_or(0) != 0 {
            s.scheduled += n;
            continue;
        }
        *s.by_status.entry(status.clone()).or_default() += n;
        if let Some(send) = &send {
            *s.by_send_status.entry(send.clone()).or_default() += n;
        }
        if status == "PREPARED" {
            s.oldest_prepared_at = older(s.oldest_prepared_at, row.opt_time("oldest_created")?);
        }
        if status == "COMMITTED" && send.as_deref() == Some("PENDING") {
            s.oldest_pending_send_at =
                older(s.oldest_pending_send_at, row.opt_time("oldest_decided")?);
        }
    }
    for row in &finished {
        let status = row.text("status")?;
        let n = u64::try_from(row.opt_i64("n")?.unwrap_or(0)).unwrap_or(0);
        let s = entry(&mut by_biz, row.text("biz_id")?);
        if status == "ROLLED_BACK" {
            s.rolled_back_recently += n;
        } else {
            s.sent_recently += n;
        }
    }
    Ok(by_biz.into_values().collect())
}
