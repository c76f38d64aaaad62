//! [`OperatorStore`] over the shards: lists page by id across shards
//! (reading replicas), the summary adds the shards up, repairs go to the
//! shard holding the message, bulk requeues chunk shard by shard.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::join_all;
use trustmsg_verify_api::MessageView;

use crate::store::{
    Actor, Message, MessageFilter, OperatorStore, ProducerSummary, Requeue, RequeuedChunk,
    StoreResult,
};

use super::fanout::add_summary;
use super::id_floor;
use super::ShardedStore;

#[async_trait]
impl OperatorStore for ShardedStore {
    async fn redeliver(
        &self,
        id: u64,
        version: u64,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        self.by_id(
            id,
            |s| s.redeliver(id, version, actor, reason),
            Option::is_none,
        )
        .await
    }

    async fn skip_blocked(
        &self,
        m: &Message,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        self.by_id(m.id, |s| s.skip_blocked(m, actor, reason), Option::is_none)
            .await
    }

    async fn blocked_by(&self, m: &Message) -> StoreResult<Option<u64>> {
        self.holder_of(m.id).await?.blocked_by(m).await
    }

    async fn send_now(
        &self,
        id: u64,
        version: u64,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        self.by_id(
            id,
            |s| s.send_now(id, version, actor, reason),
            Option::is_none,
        )
        .await
    }

    async fn requeue_chunk(
        &self,
        requeue: Requeue,
        filter: &MessageFilter,
        after_id: u64,
        limit: u32,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<RequeuedChunk> {
        // By id, so shard by shard: the next chunk is on the shard of the
        // id after `after_id`, or on a later one once that one is done.
        for shard in self.home_of_id(after_id.saturating_add(1))..self.shards.len() {
            let after = after_id.max(id_floor(shard).saturating_sub(1));
            let chunk = self.shards[shard]
                .store
                .requeue_chunk(requeue, filter, after, limit, actor, reason)
                .await?;
            if chunk.last_id.is_some() {
                return Ok(chunk);
            }
        }
        Ok(RequeuedChunk {
            changed: 0,
            last_id: None,
        })
    }

    async fn count_requeueable(
        &self,
        requeue: Requeue,
        filter: &MessageFilter,
    ) -> StoreResult<u64> {
        let counts = self.each(|_, s| s.count_requeueable(requeue, filter)).await;
        Ok(Self::all(counts)?.into_iter().sum())
    }

    async fn list_messages(
        &self,
        filter: &MessageFilter,
        limit: u32,
        before: Option<u64>,
    ) -> StoreResult<Vec<MessageView>> {
        self.newest_first(limit, before, |shard, want| {
            self.read_view(shard, move |s| s.list_messages(filter, want, before))
        })
        .await
    }

    async fn summary(&self, recent: Duration) -> StoreResult<Vec<ProducerSummary>> {
        let results =
            join_all((0..self.shards.len()).map(|i| self.read_view(i, |s| s.summary(recent))))
                .await;
        let mut by_producer: BTreeMap<String, ProducerSummary> = BTreeMap::new();
        for summary in Self::all(results)?.into_iter().flatten() {
            match by_producer.get_mut(&summary.biz_id) {
                Some(sum) => add_summary(sum, summary),
                None => {
                    by_producer.insert(summary.biz_id.clone(), summary);
                }
            }
        }
        Ok(by_producer.into_values().collect())
    }
}
