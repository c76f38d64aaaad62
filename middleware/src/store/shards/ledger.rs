//! [`LedgerStore`] over the shards: a consumption lives with its message;
//! the stuck watch goes shard after shard, the groups' counts add up.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::store::{
    Began, ConsumerGroup, ConsumerGroupCounts, Consumption, Finished, LedgerStore, StoreResult,
    StuckConsumption,
};

use super::ShardedStore;

#[async_trait]
impl LedgerStore for ShardedStore {
    async fn begin_consumption(
        &self,
        group: &ConsumerGroup,
        message_id: u64,
    ) -> StoreResult<Began> {
        self.by_id(
            message_id,
            |s| s.begin_consumption(group, message_id),
            |b| matches!(b, Began::UnknownMessage),
        )
        .await
    }

    async fn finish_consumption(
        &self,
        group: &ConsumerGroup,
        message_id: u64,
        ok: bool,
        error: Option<&str>,
    ) -> StoreResult<Finished> {
        self.by_id(
            message_id,
            |s| s.finish_consumption(group, message_id, ok, error),
            |f| matches!(f, Finished::UnknownMessage),
        )
        .await
    }

    async fn consumptions_of(&self, message_id: u64) -> StoreResult<Vec<Consumption>> {
        self.by_id(message_id, |s| s.consumptions_of(message_id), Vec::is_empty)
            .await
    }

    async fn flag_stuck_consumptions(&self, limit: u32) -> StoreResult<Vec<StuckConsumption>> {
        self.up_to("flagging stuck consumptions", limit, |s, n| {
            s.flag_stuck_consumptions(n)
        })
        .await
    }

    async fn consumer_group_counts(&self) -> StoreResult<Vec<ConsumerGroupCounts>> {
        let results = self.each(|_, s| s.consumer_group_counts()).await;
        let mut by_group: BTreeMap<String, ConsumerGroupCounts> = BTreeMap::new();
        for c in Self::all(results)?.into_iter().flatten() {
            let sum = by_group
                .entry(c.group.clone())
                .or_insert_with(|| ConsumerGroupCounts {
                    group: c.group.clone(),
                    topics: c.topics.clone(),
                    ..Default::default()
                });
            sum.processed += c.processed;
            sum.failing += c.failing;
            sum.in_progress += c.in_progress;
            sum.lag += c.lag;
        }
        Ok(by_group.into_values().collect())
    }
}
