//! [`LifecycleStore`] on MySQL: the migrations under a lock of their own
//! (sqlx's is not taken on MariaDB, see `migrate`), the database clock, the
//! ping.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::pool::PoolConnection;
use sqlx::MySql;

use crate::store::migrations;
use crate::store::sql::{self};
use crate::store::{LifecycleStore, StoreError, StoreResult};

use super::{upgrade, MySqlStore};

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
        self.migrate_locked(true).await?;
        // The time partitions ready for the ids about to be handed out.
        sql::make_ready::<sqlx::MySql>(&self.pool, 0).await
    }

    async fn prepare_upgrade(&self) -> StoreResult<()> {
        self.migrate_locked(false).await
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

impl MySqlStore {
    /// The migrations (all of them, or with `finish` false only the
    /// online steps of 0020) under the migration lock.
    ///
    /// sqlx takes `GET_LOCK(…, -1)` to keep two migrators apart, and
    /// ignores its answer; MariaDB answers a negative timeout with NULL at
    /// once, without the lock, so two instances starting with
    /// --auto-migrate both applied migration 1 and one failed (duplicate
    /// entry). This lock waits, on the connection the migrations run on.
    /// Its name is the database's (a user lock is server-wide): deployments
    /// in other databases of one server do not wait for each other's
    /// migrations.
    async fn migrate_locked(&self, finish: bool) -> StoreResult<()> {
        let mut conn = self.pool.acquire().await?;
        let locked: Option<i64> = sqlx::query_scalar(TAKE_MIGRATE_LOCK)
            .fetch_one(&mut *conn)
            .await?;
        if locked != Some(1) {
            return Err(StoreError::Unavailable(
                "another migration held the lock for 5 minutes".into(),
            ));
        }
        let done = run_migrations(&mut conn, finish).await;
        let _ = sqlx::query(RELEASE_MIGRATE_LOCK).execute(&mut *conn).await;
        done
    }
}

/// Every migration (with `finish`; else up to 0020's online steps), 0020
/// on a store that holds rows made online ([`upgrade`]) and recorded with
/// nothing left to run.
async fn run_migrations(conn: &mut PoolConnection<MySql>, finish: bool) -> StoreResult<()> {
    let all = migrations::mysql();
    all.run_direct(Some(migrations::TIME_PARTITIONS - 1), &mut **conn, false)
        .await?;
    let online = upgrade::time_partitions_online(conn).await?;
    if !finish {
        return Ok(());
    }
    let all = match online {
        true => migrations::replaced(
            &all,
            migrations::TIME_PARTITIONS,
            upgrade::LEFT_TO_RUN.into(),
        ),
        false => all,
    };
    all.run_direct(None, &mut **conn, false).await?;
    Ok(())
}
