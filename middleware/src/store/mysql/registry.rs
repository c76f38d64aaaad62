//! [`RegistryStore`] on MySQL: producers and consumer groups, upserted
//! with `ON DUPLICATE KEY UPDATE`.

use async_trait::async_trait;

use crate::store::sql::{self, GROUP_COLUMNS, PRODUCER_COLUMNS};
use crate::store::{
    ConsumerGroup, ConsumerGroupRecord, Producer, ProducerRecord, RegistryStore, StoreError,
    StoreResult,
};

use super::MySqlStore;

#[async_trait]
impl RegistryStore for MySqlStore {
    async fn list_producers(&self) -> StoreResult<Vec<Producer>> {
        sql::list_producers(&self.pool).await
    }

    async fn upsert_producer(&self, p: &ProducerRecord) -> StoreResult<Producer> {
        // An update keeps the token and the signing secret, which have their
        // own operations.
        let upsert = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO producers ({PRODUCER_COLUMNS}) \
             VALUES (?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), ?, ?) \
             ON DUPLICATE KEY UPDATE verify_url = VALUES(verify_url), ordered = VALUES(ordered), \
             verify_timeout_ms = VALUES(verify_timeout_ms), \
             first_verify_after_ms = VALUES(first_verify_after_ms), \
             max_verify_attempts = VALUES(max_verify_attempts), topics = VALUES(topics), \
             updated_at = UTC_TIMESTAMP(3)"
        )));
        sql::bind_producer(upsert, p).execute(&self.pool).await?;
        self.find_producer(&p.biz_id)
            .await?
            .ok_or(StoreError::Vanished("a producer just upserted"))
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
        // An update keeps the token (rotated on its own) and created_at.
        let upsert = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO consumer_groups ({GROUP_COLUMNS}) \
             VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3)) \
             ON DUPLICATE KEY UPDATE topics = VALUES(topics), \
             max_failures = VALUES(max_failures), \
             in_progress_timeout_ms = VALUES(in_progress_timeout_ms), \
             updated_at = UTC_TIMESTAMP(3)"
        )));
        sql::bind_group(upsert, g).execute(&self.pool).await?;
        self.find_consumer_group(&g.name)
            .await?
            .ok_or(StoreError::Vanished("a consumer group just upserted"))
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
