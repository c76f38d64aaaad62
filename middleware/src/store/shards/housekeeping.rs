//! [`HousekeepingStore`] over the shards: the overdue watch and retention
//! shard after shard up to their limits, the move of long contents shard
//! by shard, the backlog and the tables' sizes added up; the flow lives on the first database.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::future::join_all;

use crate::store::{
    Backlog, FlowMinute, HousekeepingStore, Overdue, PartitionPlan, PartitionRound, PayloadMove,
    Storage, StoreResult, Wait,
};

use super::fanout::earliest;
use super::ShardedStore;

#[async_trait]
impl HousekeepingStore for ShardedStore {
    async fn flag_overdue(
        &self,
        wait: Wait,
        older_than: Duration,
        limit: u32,
    ) -> StoreResult<Vec<Overdue>> {
        self.up_to("flagging overdue messages", limit, |s, n| {
            s.flag_overdue(wait, older_than, n)
        })
        .await
    }

    async fn purge_finished(&self, older_than: Duration, limit: u32) -> StoreResult<u64> {
        self.up_to("purging finished messages", limit, |s, n| {
            s.purge_finished(older_than, n)
        })
        .await
    }

    /// Every shard keeps its own partitions (its ids are its own); the
    /// rounds are added up. A shard that fails fails the round, which is
    /// tried again whole: each step of it is idempotent.
    async fn keep_partitions(&self, plan: &PartitionPlan) -> StoreResult<PartitionRound> {
        let rounds = Self::all(self.each(|_, s| s.keep_partitions(plan)).await)?;
        Ok(rounds
            .into_iter()
            .fold(PartitionRound::default(), PartitionRound::and))
    }

    /// On the shard whose ids the period's are (each shard's periods start
    /// at its id floor).
    async fn mark_archived(&self, period: u64, through: u64) -> StoreResult<()> {
        let home = self.home_of_id(period << 32);
        self.shards[home].store.mark_archived(period, through).await
    }

    /// Shard after shard, the limit shared: a shard whose walk is over
    /// takes none of it. A shard that fails leaves the move unfinished (it
    /// is moved on a later call).
    async fn move_payloads(&self, limit: u32) -> StoreResult<PayloadMove> {
        let mut total = PayloadMove::FINISHED;
        let mut first_error = None;
        for (i, shard) in self.shards.iter().enumerate() {
            let left = limit.saturating_sub(u32::try_from(total.walked).unwrap_or(u32::MAX));
            if left == 0 {
                total.finished = false;
                break;
            }
            match shard.store.move_payloads(left).await {
                Ok(chunk) => {
                    total.walked += chunk.walked;
                    total.moved += chunk.moved;
                    total.finished &= chunk.finished;
                }
                Err(e) => {
                    self.left_out(i, "moving payloads", &e);
                    total.finished = false;
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) if total.walked == 0 => Err(e),
            _ => Ok(total),
        }
    }

    async fn backlog(&self) -> StoreResult<Backlog> {
        let results =
            join_all((0..self.shards.len()).map(|i| self.read_view(i, |s| s.backlog()))).await;
        let mut sum = Backlog::default();
        let mut counts: BTreeMap<(String, Option<String>), u64> = BTreeMap::new();
        for b in Self::all(results)? {
            for (status, send, n) in b.counts {
                *counts.entry((status, send)).or_default() += n;
            }
            sum.oldest_prepared_at = earliest(sum.oldest_prepared_at, b.oldest_prepared_at);
            sum.oldest_pending_send_at =
                earliest(sum.oldest_pending_send_at, b.oldest_pending_send_at);
            sum.scheduled += b.scheduled;
            sum.pending_alerts += b.pending_alerts;
            sum.waiting_commits += b.waiting_commits;
            sum.oldest_pending_alert_at =
                earliest(sum.oldest_pending_alert_at, b.oldest_pending_alert_at);
            sum.at = sum.at.max(b.at);
        }
        sum.counts = counts
            .into_iter()
            .map(|((status, send), n)| (status, send, n))
            .collect();
        Ok(sum)
    }

    /// Each table's rows and bytes summed over the shards (in the first
    /// shard's order of tables), the oldest message the earliest of theirs.
    async fn storage(&self) -> StoreResult<Storage> {
        let results =
            join_all((0..self.shards.len()).map(|i| self.read_view(i, |s| s.storage()))).await;
        let mut sum = Storage::default();
        for s in Self::all(results)? {
            for t in s.tables {
                match sum.tables.iter_mut().find(|have| have.table == t.table) {
                    Some(have) => {
                        have.rows += t.rows;
                        have.bytes += t.bytes;
                    }
                    None => sum.tables.push(t),
                }
            }
            sum.oldest_message_at = earliest(sum.oldest_message_at, s.oldest_message_at);
            sum.oldest_partition = match (sum.oldest_partition, s.oldest_partition) {
                (Some(a), Some(b)) => Some(if b.from < a.from { b } else { a }),
                (a, b) => a.or(b),
            };
            sum.at = sum.at.max(s.at);
        }
        Ok(sum)
    }

    async fn add_flow(&self, f: &FlowMinute) -> StoreResult<()> {
        self.first().add_flow(f).await
    }

    async fn flow_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<FlowMinute>> {
        self.first().flow_since(since).await
    }

    async fn purge_flow(&self, before: DateTime<Utc>) -> StoreResult<u64> {
        self.first().purge_flow(before).await
    }
}
