//! [`LifecycleStore`] on PostgreSQL: the migrations under sqlx's advisory
//! lock, the database clock ([`super::NOW`]), the ping.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Postgres;

use crate::store::sql::{self, stmt};
use crate::store::{LifecycleStore, StoreResult};

use super::{PgStore, NOW};

#[async_trait]
impl LifecycleStore for PgStore {
    /// sqlx's PostgreSQL migrator takes `pg_advisory_lock` (a lock that
    /// waits, unlike MariaDB's answer to sqlx's `GET_LOCK(…, -1)`) on the
    /// connection it migrates on, before it reads what is applied: of
    /// several instances starting together one applies the migrations and
    /// the others find them applied. Then the time partitions are made
    /// ready for the ids about to be handed out.
    async fn migrate(&self) -> StoreResult<()> {
        crate::store::migrations::postgres().run(&self.pool).await?;
        sql::make_ready::<Postgres>(&self.pool, 0).await
    }

    async fn now(&self) -> StoreResult<DateTime<Utc>> {
        Ok(
            sqlx::query_scalar(stmt::<Postgres>(format!("SELECT {NOW}")))
                .fetch_one(&self.pool)
                .await?,
        )
    }

    async fn ping(&self) -> StoreResult<()> {
        sql::ping(&self.pool).await
    }
}
