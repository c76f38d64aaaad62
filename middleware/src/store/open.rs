//! Opening a store: the one place that decides, from the database URLs and
//! the settings, which backend serves and how it is opened. One URL opens
//! its scheme's backend (MySQL/MariaDB, PostgreSQL or SQLite); several, or
//! one with a read replica, open the sharded store over MySQL databases
//! (a PostgreSQL URL among them is refused there: shards are MySQL-only).
//! With `migrate`, each database is created if missing and migrated first. A
//! single MySQL database is refused when it is one shard of several:
//! listed alone, every key would be routed to it.
//!
//! `main`, start-up and the tests all open their store here, so they
//! cannot disagree on what a URL list means.

use std::sync::Arc;

use anyhow::Context;

use super::mysql::MySqlStore;
use super::postgres::PgStore;
use super::shards::ShardedStore;
use super::sqlite::SqliteStore;
use super::{Backend, DatabaseUrl, DynStore, LifecycleStore, StoreResult};

/// Opens the store at `urls` (one database, or several shards) with
/// `replicas` (`replicas[i]` the read replica of `urls[i]`); with
/// `migrate`, first creates each database if it is missing and applies
/// the migrations (`serve --auto-migrate` and `trustmsg migrate`).
pub async fn open(
    urls: &[DatabaseUrl],
    replicas: &[DatabaseUrl],
    migrate: bool,
) -> anyhow::Result<DynStore> {
    let ([url], []) = (urls, replicas) else {
        let sharded = ShardedStore::open(urls, replicas, migrate).await?;
        return Ok(Arc::new(sharded));
    };
    if migrate {
        create_database_if_missing(url)
            .await
            .with_context(|| format!("creating the database at {url}"))?;
    }
    match url.backend() {
        Backend::MySql => {
            let one = ready(MySqlStore::connect(url).await, url, migrate).await?;
            ShardedStore::refuse_if_sharded(&one, url).await?;
            Ok(Arc::new(one))
        }
        Backend::Sqlite => {
            let one = ready(SqliteStore::connect(url).await, url, migrate).await?;
            Ok(Arc::new(one))
        }
        Backend::Postgres => {
            let one = ready(PgStore::connect(url).await, url, migrate).await?;
            Ok(Arc::new(one))
        }
    }
}

/// A store just connected to `url`, with the migrations applied when
/// `migrate`.
async fn ready<S: LifecycleStore>(
    connected: StoreResult<S>,
    url: &DatabaseUrl,
    migrate: bool,
) -> anyhow::Result<S> {
    let store = connected.with_context(|| format!("connecting to {url}"))?;
    if migrate {
        store.migrate().await.context("applying migrations")?;
    }
    Ok(store)
}

/// Opens the one database at `url` as [`open`] does, without creating or
/// migrating it.
pub async fn connect(url: &DatabaseUrl) -> anyhow::Result<DynStore> {
    open(std::slice::from_ref(url), &[], false).await
}

/// Creates the MySQL or PostgreSQL database named in `url` if it does not
/// exist yet (`trustmsg migrate` and `serve --auto-migrate`). SQLite files
/// are created on connect.
pub async fn create_database_if_missing(url: &DatabaseUrl) -> StoreResult<()> {
    match url.backend() {
        Backend::MySql => create_if_missing::<sqlx::MySql>(url).await,
        Backend::Postgres => create_if_missing::<sqlx::Postgres>(url).await,
        Backend::Sqlite => Ok(()),
    }
}

/// [`create_database_if_missing`] on a server of `D`. Instances started
/// together may all find the database missing: one creation wins, and the
/// others' failure is no failure once the database is there.
async fn create_if_missing<D: sqlx::migrate::MigrateDatabase>(
    url: &DatabaseUrl,
) -> StoreResult<()> {
    let driver = url.expose_for_driver();
    if D::database_exists(driver).await? {
        return Ok(());
    }
    match D::create_database(driver).await {
        Ok(()) => {
            tracing::info!(%url, "created database");
            Ok(())
        }
        Err(_) if D::database_exists(driver).await? => Ok(()),
        Err(e) => Err(e.into()),
    }
}
