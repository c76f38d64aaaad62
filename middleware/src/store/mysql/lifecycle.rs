//! [`LifecycleStore`] on MySQL: the migrations under a lock of their own
//! (sqlx's is not taken on MariaDB, see `migrate`), the database clock, the
//! ping.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::store::sql::{self};
use crate::store::{LifecycleStore, StoreError, StoreResult};

use super::MySqlStore;

#[async_trait]
impl LifecycleStore for MySqlStore {
    async fn migrate(&self) -> StoreResult<()> {
        // sqlx takes `GET_LOCK(…, -1)` to keep two migrators apart, and
        // ignores its answer; MariaDB answers a negative timeout with NULL
        // at once, without the lock, so two instances starting with --auto-migrate
        // both applied migration 1 and one failed (duplicate entry). This
        // lock waits, on the connection the migrations run on.
        let mut conn = self.pool.acquire().await?;
        let locked: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK('trustmsg_migrate', 300)")
            .fetch_one(&mut *conn)
            .await?;
        if locked != Some(1) {
            return Err(StoreError::Unavailable(
                "another migration held the lock for 5 minutes".into(),
            ));
        }
        let done = crate::store::migrations::mysql()
            .run_direct(None, &mut *conn, false)
            .await;
        let _ = sqlx::query("SELECT RELEASE_LOCK('trustmsg_migrate')")
            .execute(&mut *conn)
            .await;
        done?;
        Ok(())
    }

    async fn now(&self) -> StoreResult<DateTime<Utc>> {
        Ok(sqlx::query_scalar("SELECT UTC_TIMESTAMP(3)")
            .fetch_one(&self.pool)
            .await?)
    }

    async fn ping(&self) -> StoreResult<()> {
        sql::ping(&self.pool).await
    }
}
