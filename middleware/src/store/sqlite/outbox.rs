//! [`OutboxStore`] on SQLite: failures of the producers' outbox rows (with
//! their alert) and operators' actions on them.

use async_trait::async_trait;

use crate::store::sql::{self};
use crate::store::{OutboxAction, OutboxFailure, OutboxStore, StoreResult};

use super::SqliteStore;

#[async_trait]
impl OutboxStore for SqliteStore {
    async fn record_outbox_failure(&self, f: &OutboxFailure) -> StoreResult<bool> {
        sql::record_outbox_failure(&self.pool, f).await
    }

    async fn record_outbox_action(&self, a: &OutboxAction) -> StoreResult<()> {
        sql::record_outbox_action(&self.pool, a).await
    }

    async fn outbox_actions(
        &self,
        biz_id: &str,
        source_row_id: u64,
    ) -> StoreResult<Vec<OutboxAction>> {
        sql::outbox_actions(&self.pool, biz_id, source_row_id).await
    }
}
