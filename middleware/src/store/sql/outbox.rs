//! What trustmsg keeps about the producers' own outbox tables: failures the
//! relay recorded (each with its one alert) and operators' actions on
//! source rows. Written once for both backends.

use sqlx::Executor;
use trustmsg_verify_api::admin::AlertKind;

use super::alerts::raise_alerts;
use super::effects::clip_error;
use super::row::SqlRow;
use super::{stmt, Bind, Dialect};
use crate::store::{
    NewAlert, OutboxAction, OutboxActionKind, OutboxFailure, StoreError, StoreResult,
};

/// [`crate::store::OutboxStore::record_outbox_failure`]: the failure row
/// and its alert in one transaction, only when the failure is new.
/// (A duplicate key is skipped: [`Dialect::INSERT_IGNORE`].)
pub(in crate::store) async fn record_outbox_failure<D>(
    pool: &sqlx::Pool<D>,
    f: &OutboxFailure,
) -> StoreResult<bool>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    String: Bind<D>,
    Option<String>: Bind<D>,
    &'static str: Bind<D>,
    i64: Bind<D>,
{
    let mut tx = pool.begin().await?;
    let done = sqlx::query(stmt::<D>(format!(
        "{insert} INTO outbox_failures (biz_id, source_row_id, attempt, message_key, \
         reason, created_at) VALUES (?, ?, ?, ?, ?, {now}){ignored}",
        insert = D::INSERT_IGNORE,
        ignored = D::IGNORED,
        now = D::NOW
    )))
    .bind(f.biz_id.clone())
    .bind(D::int(f.source_row_id))
    .bind(i64::from(f.attempt))
    .bind(f.message_key.clone())
    .bind(clip_error(&f.reason).to_string())
    .execute(&mut *tx)
    .await?;
    if D::rows_affected(&done) != 1 {
        return Ok(false);
    }
    let alert = NewAlert {
        kind: AlertKind::OutboxFailed,
        message_id: f.message_id,
        biz_id: f.biz_id.clone(),
        message_key: f.message_key.clone(),
        attempts: f.attempt,
        last_error: format!(
            "row {} of producer {}'s outbox table was marked failed (3) and is not relayed \
             until an operator retries or gives it up: {}",
            f.source_row_id, f.biz_id, f.reason
        ),
        group: None,
    };
    let raised = raise_alerts::<D>(&mut *tx, vec![alert]).await?;
    tx.commit().await?;
    raised.announce();
    Ok(true)
}

/// [`crate::store::OutboxStore::record_outbox_action`].
pub(in crate::store) async fn record_outbox_action<D>(
    pool: &sqlx::Pool<D>,
    a: &OutboxAction,
) -> StoreResult<()>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    String: Bind<D>,
    &'static str: Bind<D>,
{
    sqlx::query(stmt::<D>(format!(
        "INSERT INTO outbox_actions (biz_id, source_row_id, message_key, actor, action, reason, \
         created_at) VALUES (?, ?, ?, ?, ?, ?, {now})",
        now = D::NOW
    )))
    .bind(a.biz_id.clone())
    .bind(D::int(a.source_row_id))
    .bind(a.message_key.clone())
    .bind(a.actor.clone())
    .bind(a.action.as_str())
    .bind(clip_error(&a.reason).to_string())
    .execute(pool)
    .await?;
    Ok(())
}

/// [`crate::store::OutboxStore::outbox_actions`]: oldest first.
pub(in crate::store) async fn outbox_actions<D>(
    pool: &sqlx::Pool<D>,
    biz_id: &str,
    source_row_id: u64,
) -> StoreResult<Vec<OutboxAction>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    String: Bind<D>,
{
    let rows = sqlx::query(stmt::<D>(
        "SELECT biz_id, source_row_id, message_key, actor, action, reason, created_at \
         FROM outbox_actions WHERE biz_id = ? AND source_row_id = ? ORDER BY id",
    ))
    .bind(biz_id.to_string())
    .bind(D::int(source_row_id))
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            let action = r.text("action")?;
            Ok(OutboxAction {
                biz_id: r.text("biz_id")?,
                source_row_id: r.unsigned("source_row_id")?,
                message_key: r.text("message_key")?,
                actor: r.text("actor")?,
                action: OutboxActionKind::parse(&action)
                    .ok_or_else(|| StoreError::Corrupt(format!("outbox action {action:?}")))?,
                reason: r.text("reason")?,
                at: r.time("created_at")?,
            })
        })
        .collect()
}
