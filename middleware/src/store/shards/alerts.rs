//! [`AlertStore`] over the shards: each alert lives on the shard whose
//! change raised it; claims spread, lists page by id.

use std::time::Duration;

use async_trait::async_trait;
use trustmsg_verify_api::admin::AlertView;

use crate::store::{AlertFilter, AlertStore, StoreResult};

use super::ShardedStore;

#[async_trait]
impl AlertStore for ShardedStore {
    async fn claim_due_alerts(&self, limit: u32, lease: Duration) -> StoreResult<Vec<AlertView>> {
        self.spread("claiming alerts", limit, |s, n| {
            s.claim_due_alerts(n, lease)
        })
        .await
    }

    async fn mark_alert_delivered(&self, id: u64) -> StoreResult<bool> {
        self.shards[self.home_of_id(id)]
            .store
            .mark_alert_delivered(id)
            .await
    }

    async fn retry_alert_later(&self, id: u64, error: &str, delay: Duration) -> StoreResult<bool> {
        self.shards[self.home_of_id(id)]
            .store
            .retry_alert_later(id, error, delay)
            .await
    }

    async fn settle_alerts_without_webhook(&self, limit: u32) -> StoreResult<u64> {
        self.up_to("settling alerts", limit, |s, n| {
            s.settle_alerts_without_webhook(n)
        })
        .await
    }

    async fn list_alerts(
        &self,
        filter: AlertFilter,
        limit: u32,
        before: Option<u64>,
    ) -> StoreResult<Vec<AlertView>> {
        // A message's alerts are on its shard.
        if let Some(id) = filter.message_id {
            return self
                .holder_of(id)
                .await?
                .list_alerts(filter, limit, before)
                .await;
        }
        self.newest_first(limit, before, |shard, want| {
            self.read_view(shard, move |s| s.list_alerts(filter, want, before))
        })
        .await
    }
}
