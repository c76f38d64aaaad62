//! [`LifecycleStore`] on SQLite: the migrations, the database clock
//! ([`super::NOW_MS`] read back as a time), the ping.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::store::sql::{self};
use crate::store::{LifecycleStore, StoreError, StoreResult};

use super::{SqliteStore, NOW_MS};

#[async_trait]
impl LifecycleStore for SqliteStore {
    async fn migrate(&self) -> StoreResult<()> {
        crate::store::migrations::sqlite().run(&self.pool).await?;
        Ok(())
    }

    async fn now(&self) -> StoreResult<DateTime<Utc>> {
        let ms: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT {NOW_MS}")))
            .fetch_one(&self.pool)
            .await?;
        DateTime::from_timestamp_millis(ms)
            .ok_or_else(|| StoreError::Corrupt(format!("database clock {ms} is not a time")))
    }

    async fn ping(&self) -> StoreResult<()> {
        sql::ping(&self.pool).await
    }
}
