//! [`OutboxStore`] over the shards: what is kept about the producers'
//! outbox tables lives on the first database, with the registry.

use async_trait::async_trait;

use crate::store::{OutboxAction, OutboxFailure, OutboxStore, StoreResult};

use super::ShardedStore;

#[async_trait]
impl OutboxStore for ShardedStore {
    async fn record_outbox_failure(&self, f: &OutboxFailure) -> StoreResult<bool> {
        self.first().record_outbox_failure(f).await
    }

    async fn record_outbox_action(&self, a: &OutboxAction) -> StoreResult<()> {
        self.first().record_outbox_action(a).await
    }

    async fn outbox_actions(
        &self,
        biz_id: &str,
        source_row_id: u64,
    ) -> StoreResult<Vec<OutboxAction>> {
        self.first().outbox_actions(biz_id, source_row_id).await
    }
}
