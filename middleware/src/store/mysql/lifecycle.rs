//! [`LifecycleStore`] on MySQL: the migrations under a lock of their own
//! (sqlx's is not taken on MariaDB, see `migrate`), the database clock, the
//! ping.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::store::sql::{self};
use crate::store::{LifecycleStore, StoreError, StoreResult};

use super::MySqlStore;

/// The migration lock, one per database: its name is a hash of the
/// database's, within the 64 characters MySQL allows a lock name (a database
/// name alone may take 64).
const TAKE_MIGRATE_LOCK: &str =
    "SELECT GET_LOCK(CONCAT('trustmsg_migrate_', SHA1(COALESCE(DATABASE(), ''))), 300)";
const RELEASE_MIGRATE_LOCK: &str =
    "SELECT RELEASE_LOCK(CONCAT('trustmsg_migrate_', SHA1(COALESCE(DATABASE(), ''))))";

#[async_trait]
impl LifecycleStore for MySqlStore {
    async fn migrate(&self) -> StoreResult<()> {
        // sqlx takes `GET_LOCK(…, -1)` to keep two migrators apart, and
        // ignores its answer; MariaDB answers a negative timeout with NULL
        // at once, without the lock, so two instances starting with --auto-migrate
        // both applied migration 1 and one failed (duplicate entry). This
        // lock waits, on the connection the migrations run on. Its name is
        // the database's (a user lock is server-wide): deployments in other
        // databases of one server do not wait for each other's migrations.
        let mut conn = self.pool.acquire().await?;
        let locked: Option<i64> = sqlx::query_scalar(TAKE_MIGRATE_LOCK)
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
        let _ = sqlx::query(RELEASE_MIGRATE_LOCK).execute(&mut *conn).await;
        done?;
        // The time partitions ready for the ids about to be handed out.
        sql::make_ready::<sqlx::MySql>(&self.pool, 0).await
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
