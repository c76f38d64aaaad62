//! The alert outbox: an alert row is written in the transaction of the state
//! change that raises it, so the two commit together or not at all, and the
//! webhook delivery that follows (by any instance) reads it from here.
//!
//! The ERROR log line and `trustmsg_alerts_total{kind}` of an alert come from
//! the instance whose transaction wrote it, right after that commit
//! ([`Raised::announce`]): only one transaction ever writes a given alert (the
//! guarded UPDATE that raises it matches once), so each is logged and counted
//! once across all instances. A crash between the commit and the log line
//! loses that line, never the alert: its row is delivered all the same.
//!
//! Delivery statements: the claim is each backend's (it is the one place the
//! dialects lock differently); marking delivered, retrying later, settling
//! without a webhook and listing are here, written once; the outbox's
//! retention is part of the purge in `retention.rs`.

use sqlx::{Executor, QueryBuilder};
use trustmsg_verify_api::admin::{AlertKind, AlertState, AlertView};

use super::effects::{clip_error, clip_to};
use super::row::SqlRow;
use super::{stmt, Bind, Dialect};
use crate::store::{AlertFilter, NewAlert, StoreError, StoreResult};

/// The columns [`alert_from_row`] reads.
pub(in crate::store) const ALERT_COLUMNS: &str = "id, kind, message_id, biz_id, message_key, \
    attempts, last_error, state, next_attempt_at, delivery_attempts, delivery_error, \
    delivered_at, created_at, trace_id, consumer_group";

/// Alerts written in a transaction that has not committed yet.
#[must_use = "announce the alerts once their transaction has committed"]
#[derive(Debug, Default)]
pub(in crate::store) struct Raised(Vec<(u64, NewAlert)>);

impl Raised {
    /// Logs (ERROR) and counts each alert. Call it only after the transaction
    /// that wrote them committed: then this instance is the one that raised
    /// them, and nobody else announces them.
    pub(in crate::store) fn announce(self) {
        for (id, a) in self.0 {
            tracing::error!(
                alert = a.kind.as_str(),
                alert_id = id,
                message_id = a.message_id,
                biz_id = %a.biz_id,
                message_key = %a.message_key,
                group = a.group.as_deref().unwrap_or(""),
                attempts = a.attempts,
                last_error = %a.last_error,
                "ALERT: message needs an operator"
            );
            metrics::counter!("trustmsg_alerts_total", "kind" => a.kind.as_str()).increment(1);
        }
    }
}

/// Writes `alerts` to the outbox, due for delivery at once, on `conn` (the
/// state change's transaction). One INSERT each: each needs its id back,
/// and a state change raises one alert (a claim's quarantine a few).
pub(in crate::store) async fn raise_alerts<D>(
    conn: &mut D::Connection,
    alerts: Vec<NewAlert>,
) -> StoreResult<Raised>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    String: Bind<D>,
    Option<String>: Bind<D>,
    &'static str: Bind<D>,
    i64: Bind<D>,
{
    let mut raised = Vec::with_capacity(alerts.len());
    for a in alerts {
        let insert = sqlx::query(stmt::<D>(format!(
            "INSERT INTO alerts (kind, message_id, biz_id, message_key, attempts, last_error, \
             state, next_attempt_at, created_at, updated_at, trace_id, consumer_group) \
             VALUES (?, ?, ?, ?, ?, ?, 'pending', {now}, {now}, {now}, \
             (SELECT SUBSTR(traceparent, 4, 32) FROM messages WHERE id = ?), ?){returning}",
            now = D::NOW,
            returning = D::RETURNING_ID,
        )))
        .bind(a.kind.as_str())
        .bind(D::int(a.message_id))
        .bind(a.biz_id.clone())
        .bind(a.message_key.clone())
        .bind(i64::from(a.attempts))
        .bind(clip_error(&a.last_error).to_string())
        // The message's trace id, copied so the alert keeps it after retention.
        .bind(D::int(a.message_id))
        .bind(a.group.clone());
        let id = if D::RETURNING_ID.is_empty() {
            D::last_insert_id(&insert.execute(&mut *conn).await?)
        } else {
            insert.fetch_one(&mut *conn).await?.unsigned("id")?
        };
        raised.push((id, a));
    }
    Ok(Raised(raised))
}

/// Decodes one alert row.
pub(in crate::store) fn alert_from_row<R: SqlRow>(row: &R) -> StoreResult<AlertView> {
    let kind = row.text("kind")?;
    let state = row.text("state")?;
    Ok(AlertView {
        alert_id: row.unsigned("id")?,
        kind: AlertKind::parse(&kind)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown alert kind {kind:?}")))?,
        message_id: row.unsigned("message_id")?,
        biz_id: row.text("biz_id")?,
        message_key: row.text("message_key")?,
        attempts: row.unsigned("attempts")?,
        last_error: row.text("last_error")?,
        created_at: row.time("created_at")?,
        state: AlertState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown alert state {state:?}")))?,
        next_attempt_at: row.opt_time("next_attempt_at")?,
        delivery_attempts: row.unsigned("delivery_attempts")?,
        last_delivery_error: row.opt_text("delivery_error")?,
        delivered_at: row.opt_time("delivered_at")?,
        trace_id: row.opt_text("trace_id")?,
        group: row.opt_text("consumer_group")?,
    })
}

/// [`crate::store::AlertStore::mark_alert_delivered`]: guarded by the pending
/// state only. Two instances may both have POSTed it (a claim whose lease ran
/// out mid-POST); either mark is true, and the second matches nothing.
pub(in crate::store) async fn mark_alert_delivered<D>(
    pool: &sqlx::Pool<D>,
    id: u64,
) -> StoreResult<bool>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    let done = sqlx::query(stmt::<D>(format!(
        "UPDATE alerts SET state = 'delivered', next_attempt_at = NULL, \
         delivery_attempts = delivery_attempts + 1, delivered_at = {now}, updated_at = {now} \
         WHERE id = ? AND state = 'pending'",
        now = D::NOW,
    )))
    .bind(D::int(id))
    .execute(pool)
    .await?;
    Ok(D::rows_affected(&done) == 1)
}

/// [`crate::store::AlertStore::retry_alert_later`].
pub(in crate::store) async fn retry_alert_later<D>(
    pool: &sqlx::Pool<D>,
    id: u64,
    error: &str,
    delay: std::time::Duration,
) -> StoreResult<bool>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    String: Bind<D>,
    i64: Bind<D>,
{
    let done = sqlx::query(stmt::<D>(format!(
        "UPDATE alerts SET next_attempt_at = {now}{plus}, \
         delivery_attempts = delivery_attempts + 1, delivery_error = ?, updated_at = {now} \
         WHERE id = ? AND state = 'pending'",
        now = D::NOW,
        plus = D::PLUS_SPAN,
    )))
    .bind(D::span(delay))
    .bind(clip_to(error, 500).to_string())
    .bind(D::int(id))
    .execute(pool)
    .await?;
    Ok(D::rows_affected(&done) == 1)
}

/// [`crate::store::AlertStore::settle_alerts_without_webhook`]: one statement over
/// the due range, the ids picked first so the UPDATE touches at most
/// `limit` rows on both backends.
pub(in crate::store) async fn settle_alerts_without_webhook<D>(
    pool: &sqlx::Pool<D>,
    limit: u32,
) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    i64: Bind<D>,
{
    let ids: Vec<u64> = sqlx::query(stmt::<D>(format!(
        "SELECT id FROM alerts WHERE next_attempt_at <= {} ORDER BY next_attempt_at LIMIT ?",
        D::NOW
    )))
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?
    .iter()
    .map(|row| row.unsigned("id"))
    .collect::<StoreResult<_>>()?;
    if ids.is_empty() {
        return Ok(0);
    }
    let mut q = QueryBuilder::<D>::new(format!(
        "UPDATE alerts SET state = 'no_webhook', next_attempt_at = NULL, updated_at = {} \
         WHERE state = 'pending' AND id IN (",
        D::NOW
    ));
    let mut sep = q.separated(", ");
    for id in ids {
        sep.push_bind(D::int(id));
    }
    q.push(")");
    Ok(D::rows_affected(&q.build().execute(pool).await?))
}

/// [`crate::store::AlertStore::list_alerts`]: newest first, ids below `before`.
pub(in crate::store) async fn list_alerts<D>(
    pool: &sqlx::Pool<D>,
    f: AlertFilter,
    limit: u32,
    before: Option<u64>,
) -> StoreResult<Vec<AlertView>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    &'static str: Bind<D>,
    i64: Bind<D>,
{
    let mut q = QueryBuilder::<D>::new(format!("SELECT {ALERT_COLUMNS} FROM alerts WHERE 1 = 1"));
    if let Some(s) = f.state {
        q.push(" AND state = ").push_bind(s.as_str());
    }
    if let Some(id) = f.message_id {
        q.push(" AND message_id = ").push_bind(D::int(id));
    }
    if let Some(id) = before {
        q.push(" AND id < ").push_bind(D::int(id));
    }
    q.push(" ORDER BY id DESC LIMIT ")
        .push_bind(i64::from(limit));
    q.build()
        .fetch_all(pool)
        .await?
        .iter()
        .map(alert_from_row)
        .collect()
}
