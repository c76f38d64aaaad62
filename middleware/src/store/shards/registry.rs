//! [`RegistryStore`] over the shards: the registry lives on the first
//! database, and every change is written through to each other shard's
//! copy (which that shard's own queries read); a shard that misses a change
//! gets the whole registry at the next start-up.

use async_trait::async_trait;

use crate::store::{
    ConsumerGroup, ConsumerGroupRecord, Producer, ProducerRecord, RegistryStore, StoreResult,
};

use super::setup;
use super::ShardedStore;

#[async_trait]
impl RegistryStore for ShardedStore {
    async fn list_producers(&self) -> StoreResult<Vec<Producer>> {
        self.first().list_producers().await
    }

    async fn upsert_producer(&self, p: &ProducerRecord) -> StoreResult<Producer> {
        let stored = self.first().upsert_producer(p).await?;
        self.copy_producer(&p.biz_id).await;
        Ok(stored)
    }

    async fn find_producer(&self, biz_id: &str) -> StoreResult<Option<Producer>> {
        self.first().find_producer(biz_id).await
    }

    async fn delete_producer(&self, biz_id: &str) -> StoreResult<bool> {
        let gone = self.first().delete_producer(biz_id).await?;
        self.copy_producer(biz_id).await;
        Ok(gone)
    }

    async fn set_producer_token(&self, biz_id: &str, token_hash: &[u8]) -> StoreResult<bool> {
        let set = self.first().set_producer_token(biz_id, token_hash).await?;
        self.copy_producer(biz_id).await;
        Ok(set)
    }

    async fn upsert_consumer_group(&self, g: &ConsumerGroupRecord) -> StoreResult<ConsumerGroup> {
        let stored = self.first().upsert_consumer_group(g).await?;
        self.copy_group(&g.name).await;
        Ok(stored)
    }

    async fn find_consumer_group(&self, name: &str) -> StoreResult<Option<ConsumerGroup>> {
        self.first().find_consumer_group(name).await
    }

    async fn list_consumer_groups(&self) -> StoreResult<Vec<ConsumerGroup>> {
        self.first().list_consumer_groups().await
    }

    async fn delete_consumer_group(&self, name: &str) -> StoreResult<bool> {
        let gone = self.first().delete_consumer_group(name).await?;
        self.copy_group(name).await;
        Ok(gone)
    }

    async fn set_consumer_group_token(&self, name: &str, token_hash: &[u8]) -> StoreResult<bool> {
        let set = self
            .first()
            .set_consumer_group_token(name, token_hash)
            .await?;
        self.copy_group(name).await;
        Ok(set)
    }
}

impl ShardedStore {
    /// Writes a registry row changed on the first database to every other
    /// shard's copy. A shard that cannot take it now gets the whole registry
    /// at the next start-up; until then its claims read its old copy.
    async fn copy_to_others<F, Fut>(&self, what: &str, put: F)
    where
        F: Fn(sqlx::pool::PoolConnection<sqlx::MySql>) -> Fut,
        Fut: std::future::Future<Output = StoreResult<()>>,
    {
        for (i, shard) in self.shards.iter().enumerate().skip(1) {
            let done = match shard.store.pool().acquire().await {
                Ok(conn) => put(conn).await,
                Err(e) => Err(e.into()),
            };
            if let Err(e) = done {
                self.left_out(i, what, &e);
            }
        }
    }

    /// Copies the registry row `key` (of `kind`, as `read` finds it on the
    /// first database) to every other shard with `put`, or deletes it there
    /// with `delete` (its one `?` bound to `key`) when the first has none.
    async fn copy_row<T, P, PF>(
        &self,
        kind: &str,
        key: &str,
        read: impl std::future::Future<Output = StoreResult<Option<T>>>,
        delete: &'static str,
        put: P,
    ) where
        T: Clone,
        P: Fn(sqlx::pool::PoolConnection<sqlx::MySql>, T) -> PF,
        PF: std::future::Future<Output = StoreResult<()>>,
    {
        match read.await {
            Ok(Some(row)) => {
                self.copy_to_others(&format!("copying a {kind}"), |conn| put(conn, row.clone()))
                    .await
            }
            Ok(None) => {
                self.copy_to_others(&format!("removing a {kind}"), |mut conn| async move {
                    sqlx::query(delete).bind(key).execute(&mut *conn).await?;
                    Ok(())
                })
                .await
            }
            Err(e) => self.left_out(0, &format!("reading a {kind} to copy"), &e),
        }
    }

    async fn copy_producer(&self, biz_id: &str) {
        let read = self.first().find_producer(biz_id);
        self.copy_row(
            "producer",
            biz_id,
            read,
            "DELETE FROM producers WHERE biz_id = ?",
            |mut conn, p| async move { setup::put_producer(&mut conn, &p).await },
        )
        .await
    }

    async fn copy_group(&self, name: &str) {
        let read = self.first().find_consumer_group(name);
        self.copy_row(
            "consumer group",
            name,
            read,
            "DELETE FROM consumer_groups WHERE group_name = ?",
            |mut conn, g| async move { setup::put_group(&mut conn, &g).await },
        )
        .await
    }
}
