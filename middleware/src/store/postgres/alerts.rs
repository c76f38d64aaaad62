//! [`AlertStore`] on PostgreSQL: the outbox's claim and settling, the list.

use std::time::Duration;

use async_trait::async_trait;
use trustmsg_verify_api::admin::AlertView;

use crate::store::sql::{self, ALERT_COLUMNS};
use crate::store::{AlertFilter, AlertStore, StoreResult};

use super::PgStore;

#[async_trait]
impl AlertStore for PgStore {
    /// One statement that skips the alerts another claimer holds, like
    /// the message claims: no two claimers can take the same alert.
    async fn claim_due_alerts(&self, limit: u32, lease: Duration) -> StoreResult<Vec<AlertView>> {
        let rows = self
            .claim_due_rows(ALERT_COLUMNS, "alerts", "next_attempt_at", limit, lease)
            .await?;
        let mut alerts = rows
            .iter()
            .map(sql::alert_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        // RETURNING comes in no defined order.
        alerts.sort_by_key(|a| a.alert_id);
        Ok(alerts)
    }

    async fn mark_alert_delivered(&self, id: u64) -> StoreResult<bool> {
        sql::mark_alert_delivered(&self.pool, id).await
    }

    async fn retry_alert_later(&self, id: u64, error: &str, delay: Duration) -> StoreResult<bool> {
        sql::retry_alert_later(&self.pool, id, error, delay).await
    }

    async fn settle_alerts_without_webhook(&self, limit: u32) -> StoreResult<u64> {
        sql::settle_alerts_without_webhook(&self.pool, limit).await
    }

    async fn list_alerts(
        &self,
        filter: AlertFilter,
        limit: u32,
        before: Option<u64>,
    ) -> StoreResult<Vec<AlertView>> {
        sql::list_alerts(&self.pool, filter, limit, before).await
    }
}
