//! [`RegistryStore`] on PostgreSQL: producers and consumer groups, upserted
//! with `ON CONFLICT … DO UPDATE … RETURNING`.

use async_trait::async_trait;
use sqlx::Postgres;

use crate::store::sql::{self, producer_from_row, stmt, GROUP_COLUMNS, PRODUCER_COLUMNS};
use crate::store::{
    ConsumerGroup, ConsumerGroupRecord, Producer, ProducerRecord, RegistryStore, StoreResult,
};

use super::{PgStore, NOW};

#[async_trait]
impl RegistryStore for PgStore {
    async fn list_producers(&self) -> StoreResult<Vec<Producer>> {
        sql::list_producers(&self.pool).await
    }

    async fn upsert_producer(&self, p: &ProducerRecord) -> StoreResult<Producer> {
        // Like MySQL: an update keeps the token and the signing secret, which have
        // their own operations.
        let upsert = sqlx::query(stmt::<Postgres>(format!(
            "INSERT INTO producers ({PRODUCER_COLUMNS}) \
             VALUES (?, ?, ?, ?, ?, ?, ?, {NOW}, {NOW}, ?, ?) \
             ON CONFLICT (biz_id) DO UPDATE SET verify_url = excluded.verify_url, \
             ordered = excluded.ordered, \
             verify_timeout_ms = excluded.verify_timeout_ms, \
             first_verify_after_ms = excluded.first_verify_after_ms, \
             max_verify_attempts = excluded.max_verify_attempts, topics = excluded.topics, \
             updated_at = {NOW} \
             RETURNING {PRODUCER_COLUMNS}"
        )));
        let row = sql::bind_producer(upsert, p).fetch_one(&self.pool).await?;
        producer_from_row(&row)
    }

    async fn find_producer(&self, biz_id: &str) -> StoreResult<Option<Producer>> {
        sql::find_producer(&self.pool, biz_id).await
    }

    async fn delete_producer(&self, biz_id: &str) -> StoreResult<bool> {
        sql::delete_producer(&self.pool, biz_id).await
    }

    async fn set_producer_token(&self, biz_id: &str, token_hash: &[u8]) -> StoreResult<bool> {
        sql::set_producer_token(&self.pool, biz_id, token_hash).await
    }

    async fn upsert_consumer_group(&self, g: &ConsumerGroupRecord) -> StoreResult<ConsumerGroup> {
        // Like MySQL: an update keeps the token and created_at.
        let upsert = sqlx::query(stmt::<Postgres>(format!(
            "INSERT INTO consumer_groups ({GROUP_COLUMNS}) \
             VALUES (?, ?, ?, ?, ?, {NOW}, {NOW}) \
             ON CONFLICT (group_name) DO UPDATE SET topics = excluded.topics, \
             max_failures = excluded.max_failures, \
             in_progress_timeout_ms = excluded.in_progress_timeout_ms, \
             updated_at = {NOW} \
             RETURNING {GROUP_COLUMNS}"
        )));
        let row = sql::bind_group(upsert, g).fetch_one(&self.pool).await?;
        sql::group_from_row(&row)
    }

    async fn find_consumer_group(&self, name: &str) -> StoreResult<Option<ConsumerGroup>> {
        sql::find_consumer_group(&self.pool, name).await
    }

    async fn list_consumer_groups(&self) -> StoreResult<Vec<ConsumerGroup>> {
        sql::list_consumer_groups(&self.pool).await
    }

    async fn delete_consumer_group(&self, name: &str) -> StoreResult<bool> {
        sql::delete_consumer_group(&self.pool, name).await
    }

    async fn set_consumer_group_token(&self, name: &str, token_hash: &[u8]) -> StoreResult<bool> {
        sql::set_consumer_group_token(&self.pool, name, token_hash).await
    }
}
