//! The producer registry, read through a moka cache.
//!
//! Both the API's token check and the verifier resolve a biz_id here. Entries
//! live for the configured TTL; every change made through this instance
//! (update, delete, token rotation) invalidates its entry at once, so the next
//! lookup reads the database. Other instances see a change within the TTL.

use std::sync::Arc;
use std::time::Duration;

use moka::future::Cache;

use crate::store::{DynStore, Producer, StoreError};

/// A registration lookup that failed in the store. Every caller that waited on
/// the same lookup gets the same error, hence the shared cause.
#[derive(Debug, Clone, thiserror::Error)]
#[error("producer lookup failed: {0}")]
pub struct LookupError(#[source] Arc<StoreError>);

/// Cached biz_id → registration lookups (misses are cached too).
#[derive(Clone)]
pub struct Registry {
    store: DynStore,
    cache: Cache<String, Option<Arc<Producer>>>,
}

impl Registry {
    /// A registry over `store` whose entries expire after `ttl`.
    pub fn new(store: DynStore, ttl: Duration) -> Self {
        Self {
            store,
            cache: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(ttl)
                .build(),
        }
    }

    /// The registration of `biz_id`, if any.
    pub async fn get(&self, biz_id: &str) -> Result<Option<Arc<Producer>>, LookupError> {
        let store = self.store.clone();
        let key = biz_id.to_string();
        self.cache
            .try_get_with(key.clone(), async move {
                Ok::<_, StoreError>(store.find_producer(&key).await?.map(Arc::new))
            })
            .await
            .map_err(LookupError)
    }

    /// Forgets the cached entry for `biz_id`.
    pub async fn invalidate(&self, biz_id: &str) {
        self.cache.invalidate(biz_id).await;
    }
}
