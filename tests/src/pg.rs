//! A PostgreSQL database that exists for one test, the twin of the MySQL
//! [`TestDb`](crate::TestDb): a fresh, empty database on the server at
//! `TRUSTMSG_TEST_POSTGRES_URL` (by default
//! `postgres://postgres:postgres@127.0.0.1:5432`, as `scripts/services`
//! sets it up). A passing test drops it ([`PgTestDb::drop_db`]); a failing
//! one leaves it behind (`tm_test_…`) for a look at the rows. The shared
//! server is never reconfigured: only databases (and, for the least
//! privilege test, a role) are created and dropped on it.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;

/// The server the tests create their PostgreSQL databases on:
/// `TRUSTMSG_TEST_POSTGRES_URL`, by default
/// `postgres://postgres:postgres@127.0.0.1:5432`, without a trailing slash.
pub fn postgres_server_url() -> String {
    std::env::var("TRUSTMSG_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres:postgres@127.0.0.1:5432".to_string())
        .trim_end_matches('/')
        .to_string()
}

/// A PostgreSQL database that exists for one test.
#[derive(Debug)]
pub struct PgTestDb {
    /// The database's name.
    pub name: String,
    /// Its URL (the server's user), for pools and `--outbox-source`.
    pub url: String,
}

impl PgTestDb {
    /// Creates an empty database with a name no other test uses.
    pub async fn create() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!(
            "tm_test_{}_{}_{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed),
        );
        let admin = admin_pool().await;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&admin)
            .await
            .expect("create test database");
        admin.close().await;
        let url = with_database(&postgres_server_url(), &name);
        Self { name, url }
    }

    /// A pool of up to 8 connections on this database.
    pub async fn pool(&self) -> PgPool {
        self.pool_of(8).await
    }

    /// A pool of up to `connections` connections on this database.
    pub async fn pool_of(&self, connections: u32) -> PgPool {
        PgPoolOptions::new()
            .max_connections(connections)
            .connect(&self.url)
            .await
            .expect("connect to the PostgreSQL test database")
    }

    /// Drops the database (call at the end of a passing test), closing
    /// whatever connections are still on it.
    pub async fn drop_db(self) {
        let admin = admin_pool().await;
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
            self.name
        )))
        .execute(&admin)
        .await;
        admin.close().await;
    }
}

/// `server` (a URL without a database) with the database `name`, keeping
/// its query (`?sslmode=…`).
pub fn with_database(server: &str, name: &str) -> String {
    let mut url = reqwest::Url::parse(server).expect("TRUSTMSG_TEST_POSTGRES_URL parses");
    url.set_path(&format!("/{name}"));
    url.to_string()
}

async fn admin_pool() -> PgPool {
    PgPoolOptions::new()
        .max_connections(1)
        .connect(&postgres_server_url())
        .await
        .expect("connect to the PostgreSQL server at TRUSTMSG_TEST_POSTGRES_URL")
}
