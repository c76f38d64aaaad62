//! [`WaitingStore`] over the shards: a waiting commit lives on its key's
//! shard; claims spread, counts add up, lists go by id.

use std::time::Duration;

use async_trait::async_trait;

use crate::store::{NewWaitingCommit, StoreResult, WaitingCommit, WaitingStore};

use super::ShardedStore;

#[async_trait]
impl WaitingStore for ShardedStore {
    async fn park_commit(&self, w: &NewWaitingCommit) -> StoreResult<bool> {
        self.shards[self.shard_index(&w.biz_id, w.message_key.as_bytes())]
            .store
            .park_commit(w)
            .await
    }

    async fn claim_waiting_commits(
        &self,
        limit: u32,
        lease: Duration,
    ) -> StoreResult<Vec<WaitingCommit>> {
        self.spread("claiming waiting commits", limit, |s, n| {
            s.claim_waiting_commits(n, lease)
        })
        .await
    }

    async fn retry_waiting_commit(&self, id: u64, delay: Duration) -> StoreResult<bool> {
        self.shards[self.home_of_id(id)]
            .store
            .retry_waiting_commit(id, delay)
            .await
    }

    async fn unpark_commit(&self, id: u64) -> StoreResult<bool> {
        self.shards[self.home_of_id(id)]
            .store
            .unpark_commit(id)
            .await
    }

    async fn count_waiting_commits(&self) -> StoreResult<u64> {
        let counts = self.each(|_, s| s.count_waiting_commits()).await;
        Ok(Self::all(counts)?.into_iter().sum())
    }

    async fn list_waiting_commits(
        &self,
        limit: u32,
        after: u64,
    ) -> StoreResult<Vec<WaitingCommit>> {
        // Oldest id first: shard by shard from the one after `after` on.
        let mut out = Vec::new();
        for shard in self.home_of_id(after.saturating_add(1))..self.shards.len() {
            let want = limit.saturating_sub(u32::try_from(out.len()).unwrap_or(u32::MAX));
            if want == 0 {
                break;
            }
            out.extend(
                self.shards[shard]
                    .store
                    .list_waiting_commits(want, after)
                    .await?,
            );
        }
        Ok(out)
    }
}
