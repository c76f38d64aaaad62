//! Whether each shard is up, and its read replica: a shard that fails in a
//! fan-out is logged, counted and, when it cannot be reached, left out of
//! the workers' fan-outs until a ping answers; an operator view reads the
//! replica, or the shard itself while the replica cannot be reached.

use std::sync::atomic::Ordering;

use crate::store::mysql::MySqlStore;
use crate::store::{StoreError, StoreResult};

use super::ShardedStore;

impl ShardedStore {
    /// Counts and logs a shard's failure in a fan-out that goes on without
    /// it; a shard that could not be reached is down until a ping answers.
    pub(super) fn left_out(&self, shard: usize, what: &str, e: &StoreError) {
        metrics::counter!("trustmsg_shard_errors_total", "shard" => shard.to_string()).increment(1);
        tracing::warn!(shard, db = %self.shards[shard].name, error = %e, "{what}: shard left out");
        if e.is_unreachable() {
            self.set_up(shard, false);
        }
    }

    pub(super) fn is_up(&self, shard: usize) -> bool {
        self.shards[shard].up.load(Ordering::Relaxed)
    }

    /// Records whether `shard` is up, logging a change once.
    pub(super) fn set_up(&self, shard: usize, up: bool) {
        metrics::gauge!("trustmsg_shard_up", "shard" => shard.to_string()).set(if up {
            1.0
        } else {
            0.0
        });
        let was = self.shards[shard].up.swap(up, Ordering::Relaxed);
        let db = &self.shards[shard].name;
        match (was, up) {
            (true, false) => tracing::warn!(
                shard,
                %db,
                "shard down: its keys' calls fail, the workers go on with the others"
            ),
            (false, true) => tracing::info!(shard, %db, "shard back"),
            _ => {}
        }
    }

    /// `view` on shard `i`'s replica, or on the shard itself when it has
    /// none or the replica cannot be reached now.
    pub(super) async fn read_view<'a, T, F, Fut>(&'a self, i: usize, view: F) -> StoreResult<T>
    where
        F: Fn(&'a MySqlStore) -> Fut,
        Fut: std::future::Future<Output = StoreResult<T>> + 'a,
    {
        let shard = &self.shards[i];
        if let Some(replica) = &shard.replica {
            match view(replica).await {
                Err(e) if e.is_unreachable() => {
                    metrics::counter!("trustmsg_replica_fallbacks_total", "shard" => i.to_string())
                        .increment(1);
                    tracing::warn!(shard = i, error = %e, "replica unreachable: reading the database itself");
                }
                answer => return answer,
            }
        }
        view(&shard.store).await
    }

    /// The error of a fan-out that found no shard up.
    pub(super) fn none_up() -> StoreError {
        StoreError::Unavailable("no shard answers".into())
    }
}
