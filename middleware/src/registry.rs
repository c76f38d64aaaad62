//! The producer registry and the consumer-group registry, read through moka caches.
//!
//! Both the API's token check and the verifier resolve a biz_id here. Entries
//! live for the configured TTL; every change made through this instance
//! (update, delete, token rotation) invalidates its entry at once, so the next
//! lookup reads the database. Other instances see a change within the TTL
//! (`--producer-cache-ttl`, 30 s by default): a narrowed topic allow-list, a
//! deletion or a rotated token may still be honoured there until then.
//! The cache is bounded by the bytes its entries weigh, not by their count;
//! callers validate a biz_id before asking (the API refuses a token naming an
//! invalid one), so lookups of made-up ids cannot fill it either.

use std::sync::Arc;
use std::time::Duration;

use moka::future::Cache;

use crate::store::{ConsumerGroup, DynStore, Producer, StoreError};

/// A registration lookup that failed in the store. Every caller that waited on
/// the same lookup gets the same error, hence the shared cause.
#[derive(Debug, Clone, thiserror::Error)]
#[error("producer lookup failed: {0}")]
pub struct LookupError(#[source] Arc<StoreError>);

/// What the cache may hold, in (approximate) bytes. Bounding bytes rather
/// than entries keeps the bound true whatever the keys and URLs weigh.
const MAX_CACHE_BYTES: u64 = 32 * 1024 * 1024;

/// An entry's approximate size in bytes: its key, the registration's
/// variable-length fields, and a fixed allowance for the rest.
fn weight(biz_id: &str, producer: &Option<Arc<Producer>>) -> u32 {
    const FIXED: usize = 256;
    let variable = producer.as_ref().map_or(0, |p| {
        let topics = p.topics.as_ref().map_or(0, |list| {
            list.iter()
                .map(|t| t.len() + std::mem::size_of::<String>())
                .sum()
        });
        p.biz_id.len() + p.verify_url.len() + p.signing_secret.len() + p.token_hash.len() + topics
    });
    u32::try_from(FIXED + biz_id.len() + variable).unwrap_or(u32::MAX)
}

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
                .max_capacity(MAX_CACHE_BYTES)
                .weigher(|k: &String, v| weight(k, v))
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

/// Cached name → consumer group lookups (misses are cached too), for the
/// consumption ledger's token check and its begin and finish: the same TTL
/// and invalidation as the producer registry. Callers validate a name
/// before asking.
#[derive(Clone)]
pub struct GroupRegistry {
    store: DynStore,
    cache: Cache<String, Option<Arc<ConsumerGroup>>>,
}

/// An entry's approximate size in bytes.
fn group_weight(name: &str, group: &Option<Arc<ConsumerGroup>>) -> u32 {
    const FIXED: usize = 256;
    let variable = group.as_ref().map_or(0, |g| {
        g.name.len()
            + g.token_hash.len()
            + g.topics
                .iter()
                .map(|t| t.len() + std::mem::size_of::<String>())
                .sum::<usize>()
    });
    u32::try_from(FIXED + name.len() + variable).unwrap_or(u32::MAX)
}

impl GroupRegistry {
    /// A registry over `store` whose entries expire after `ttl`.
    pub fn new(store: DynStore, ttl: Duration) -> Self {
        Self {
            store,
            cache: Cache::builder()
                .max_capacity(MAX_CACHE_BYTES)
                .weigher(|k: &String, v| group_weight(k, v))
                .time_to_live(ttl)
                .build(),
        }
    }

    /// The registration of group `name`, if any.
    pub async fn get(&self, name: &str) -> Result<Option<Arc<ConsumerGroup>>, LookupError> {
        let store = self.store.clone();
        let key = name.to_string();
        self.cache
            .try_get_with(key.clone(), async move {
                Ok::<_, StoreError>(store.find_consumer_group(&key).await?.map(Arc::new))
            })
            .await
            .map_err(LookupError)
    }

    /// Forgets the cached entry for `name`.
    pub async fn invalidate(&self, name: &str) {
        self.cache.invalidate(name).await;
    }
}
