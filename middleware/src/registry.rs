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

use futures::future::BoxFuture;
use moka::future::Cache;

use crate::store::{ConsumerGroup, DynStore, Producer, StoreError};

/// A registration lookup that failed in the store. Every caller that waited on
/// the same lookup gets the same error, hence the shared cause.
#[derive(Debug, Clone, thiserror::Error)]
#[error("registration lookup failed: {0}")]
pub struct LookupError(#[source] Arc<StoreError>);

/// What the cache may hold, in (approximate) bytes. Bounding bytes rather
/// than entries keeps the bound true whatever the keys and URLs weigh.
const MAX_CACHE_BYTES: u64 = 32 * 1024 * 1024;

/// A registration the API looks up by its name: a producer by biz_id, a
/// consumer group by group name.
pub trait Registered: Send + Sync + Sized + 'static {
    /// The registration's variable-length fields, in bytes, for the cache's
    /// weigher (a fixed allowance covers the rest).
    fn variable_bytes(&self) -> usize;

    /// Reads the registration of `key` from the store.
    fn find(store: DynStore, key: String) -> BoxFuture<'static, Result<Option<Self>, StoreError>>;
}

fn list_bytes(list: &[String]) -> usize {
    list.iter()
        .map(|t| t.len() + std::mem::size_of::<String>())
        .sum()
}

impl Registered for Producer {
    fn variable_bytes(&self) -> usize {
        let topics = self.topics.as_deref().map_or(0, list_bytes);
        self.biz_id.len()
            + self.verify_url.len()
            + self.signing_secret.len()
            + self.token_hash.len()
            + topics
    }

    fn find(store: DynStore, key: String) -> BoxFuture<'static, Result<Option<Self>, StoreError>> {
        Box::pin(async move { store.find_producer(&key).await })
    }
}

impl Registered for ConsumerGroup {
    fn variable_bytes(&self) -> usize {
        self.name.len() + self.token_hash.len() + list_bytes(&self.topics)
    }

    fn find(store: DynStore, key: String) -> BoxFuture<'static, Result<Option<Self>, StoreError>> {
        Box::pin(async move { store.find_consumer_group(&key).await })
    }
}

/// An entry's approximate size in bytes: its key, the registration's
/// variable-length fields, and a fixed allowance for the rest.
fn weight<T: Registered>(key: &str, entry: &Option<Arc<T>>) -> u32 {
    const FIXED: usize = 256;
    let variable = entry.as_ref().map_or(0, |r| r.variable_bytes());
    u32::try_from(FIXED + key.len() + variable).unwrap_or(u32::MAX)
}

/// Cached name → registration lookups (misses are cached too).
#[derive(Clone)]
pub struct Lookups<T: Registered> {
    store: DynStore,
    cache: Cache<String, Option<Arc<T>>>,
}

/// The producer registry: biz_id → registration.
pub type Registry = Lookups<Producer>;

/// The consumer-group registry, for the consumption ledger's token check
/// and its begin and finish: the same TTL and invalidation as producers'.
pub type GroupRegistry = Lookups<ConsumerGroup>;

impl<T: Registered> Lookups<T> {
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

    /// The registration of `key`, if any.
    pub async fn get(&self, key: &str) -> Result<Option<Arc<T>>, LookupError> {
        let (store, owned) = (self.store.clone(), key.to_string());
        // The lookup (and its boxed future) is made only on a miss.
        self.cache
            .try_get_with(key.to_string(), async move {
                Ok(T::find(store, owned).await?.map(Arc::new))
            })
            .await
            .map_err(LookupError)
    }

    /// Forgets the cached entry for `key`.
    pub async fn invalidate(&self, key: &str) {
        self.cache.invalidate(key).await;
    }
}
