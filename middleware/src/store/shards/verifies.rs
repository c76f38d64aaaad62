//! [`VerifyStore`] over the shards: the check-back claim spread over the
//! shards, retries and records on the shard each id names.

use std::time::Duration;

use async_trait::async_trait;
use futures::future::join_all;

use crate::store::{
    CheckAttempt, CheckAttemptEntry, Claimed, Reschedule, StoreResult, VerifyLease, VerifyStore,
};

use super::ShardedStore;

#[async_trait]
impl VerifyStore for ShardedStore {
    async fn claim_due_verifies(&self, limit: u32, lease: VerifyLease) -> StoreResult<Claimed> {
        self.spread("claiming check-backs", limit, |s, share| {
            s.claim_due_verifies(share, lease)
        })
        .await
    }

    async fn reschedule_verify(&self, r: &Reschedule) -> StoreResult<bool> {
        self.by_id(r.id, |s| s.reschedule_verify(r), |done| !done)
            .await
    }

    async fn release_verifies(&self, claims: &[(u64, u64)], delay: Duration) -> StoreResult<u64> {
        self.counted_by_ids(
            claims,
            |c| c.0,
            |s, part| async move { s.release_verifies(&part, delay).await },
        )
        .await
    }

    async fn record_check_attempts(&self, calls: &[CheckAttempt]) -> StoreResult<()> {
        let groups = self.grouped(calls, |c| self.home_of_id(c.message_id));
        let results = join_all(groups.into_iter().map(|(shard, items)| async move {
            let part: Vec<CheckAttempt> = items.into_iter().map(|(_, c)| c.clone()).collect();
            self.shards[shard].store.record_check_attempts(&part).await
        }))
        .await;
        Self::all(results).map(|_| ())
    }

    async fn check_attempts(&self, message_id: u64) -> StoreResult<Vec<CheckAttemptEntry>> {
        self.by_id(message_id, |s| s.check_attempts(message_id), Vec::is_empty)
            .await
    }
}
