//! [`LifecycleStore`] over the shards: every shard migrated, the first
//! one's clock, a ping of every shard at once (which is also what brings a
//! shard back up), and the routing hints.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::store::{LifecycleStore, NewMessage, StoreError, StoreResult};

use super::ShardedStore;

/// How long a shard's ping may take before it counts as down.
const PING_TIMEOUT: Duration = Duration::from_secs(1);

#[async_trait]
impl LifecycleStore for ShardedStore {
    async fn migrate(&self) -> StoreResult<()> {
        Self::all(self.each(|_, s| s.migrate()).await).map(|_| ())
    }

    async fn prepare_upgrade(&self) -> StoreResult<()> {
        Self::all(self.each(|_, s| s.prepare_upgrade()).await).map(|_| ())
    }

    async fn now(&self) -> StoreResult<DateTime<Utc>> {
        self.first().now().await
    }

    async fn ping(&self) -> StoreResult<()> {
        let results = self
            .each(|_, s| async move {
                tokio::time::timeout(PING_TIMEOUT, s.ping())
                    .await
                    .unwrap_or_else(|_| Err(StoreError::Unavailable("no answer to a ping".into())))
            })
            .await;
        let mut first_error = None;
        for (i, r) in results.into_iter().enumerate() {
            self.set_up(i, r.is_ok());
            if let Err(e) = r {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) if !(0..self.shards.len()).any(|i| self.is_up(i)) => Err(e),
            _ => Ok(()),
        }
    }

    async fn degraded(&self) -> Vec<String> {
        (0..self.shards.len())
            .filter(|&i| !self.is_up(i))
            .map(|i| format!("shard {i} ({})", self.shards[i].name))
            .collect()
    }

    fn shards(&self) -> usize {
        self.shards.len()
    }

    fn shard_of_new(&self, m: &NewMessage) -> usize {
        self.home_of_new(m)
    }

    fn shard_of_key(&self, biz_id: &str, message_key: &str) -> usize {
        self.shard_index(biz_id, message_key.as_bytes())
    }
}
