//! [`LifecycleStore`] on PostgreSQL: the migrations under sqlx's advisory
//! lock, the database clock ([`super::NOW`]), the ping.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::migrate::{MigrateError, Migrator};
use sqlx::pool::PoolConnection;
use sqlx::Postgres;

use crate::store::migrations::{self, TIME_PARTITIONS};
use crate::store::sql::{self, stmt};
use crate::store::{LifecycleStore, StoreResult};

use super::{upgrade, PgStore, NOW};

/// Keeps two instances' online steps of migration 0020 apart (sqlx's own
/// lock is held only while its migrator runs).
const TAKE_UPGRADE_LOCK: &str = "SELECT pg_advisory_lock(hashtext('trustmsg_upgrade_0020'))";
const RELEASE_UPGRADE_LOCK: &str = "SELECT pg_advisory_unlock(hashtext('trustmsg_upgrade_0020'))";

#[async_trait]
impl LifecycleStore for PgStore {
    /// sqlx's PostgreSQL migrator takes `pg_advisory_lock` (a lock that
    /// waits, unlike MariaDB's answer to sqlx's `GET_LOCK(…, -1)`) on the
    /// connection it migrates on, before it reads what is applied: of
    /// several instances starting together one applies the migrations and
    /// the others find them applied. Then the time partitions are made
    /// ready for the ids about to be handed out.
    ///
    /// Migration 0020 on a store that holds rows is made by
    /// [`upgrade::prepare`]'s steps first, under a lock of their own, and
    /// then by what is left of its file.
    async fn migrate(&self) -> StoreResult<()> {
        self.migrate_locked(true).await?;
        sql::make_ready::<Postgres>(&self.pool, 0).await
    }

    async fn prepare_upgrade(&self) -> StoreResult<()> {
        self.migrate_locked(false).await
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

impl PgStore {
    /// The migrations (all of them, or with `finish` false only the steps
    /// of 0020 that let the previous release serve) under the lock that
    /// keeps two instances' online steps apart.
    async fn migrate_locked(&self, finish: bool) -> StoreResult<()> {
        let mut conn = self.pool.acquire().await?;
        let all = migrations::postgres();
        all.run_direct(Some(TIME_PARTITIONS - 1), &mut *conn, false)
            .await?;
        sqlx::query(TAKE_UPGRADE_LOCK).execute(&mut *conn).await?;
        let done = run_migrations(&mut conn, all, finish).await;
        let _ = sqlx::query(RELEASE_UPGRADE_LOCK).execute(&mut *conn).await;
        done
    }
}

/// 0020's steps, then (with `finish`) every migration, 0020 replaced by
/// what is left of it when the steps ran. What is left waits at most 5 s
/// for each table: a deadlock with a straggling
/// writer of the previous release, or a lock it holds too long, rolls it
/// back, and it is tried again.
async fn run_migrations(
    conn: &mut PoolConnection<Postgres>,
    all: Migrator,
    finish: bool,
) -> StoreResult<()> {
    let left = upgrade::prepare(conn).await?;
    if !finish {
        return Ok(());
    }
    let all = match left {
        Some(sql) => migrations::replaced(&all, TIME_PARTITIONS, sql),
        None => all,
    };
    let mut tries = 0;
    loop {
        match all.run_direct(None, &mut **conn, false).await {
            Err(MigrateError::ExecuteMigration(sqlx::Error::Database(e), _))
                if tries < 5 && matches!(e.code().as_deref(), Some("40P01" | "55P03")) =>
            {
                tries += 1;
                tracing::warn!(error = %e, "migration 0020: the tables are busy; trying again");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            done => return Ok(done?),
        }
    }
}
