//! A database that exists for one test: a fresh, empty database on the
//! MariaDB/MySQL server at `TRUSTMSG_TEST_MYSQL_URL`, or a fresh SQLite file.
//!
//! Each test gets its own database so tests can run in parallel and assert on
//! whole tables. A passing test drops its database ([`TestDb::drop_db`]); a
//! failing one leaves it behind (`tm_test_…`) for a look at the rows.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::mysql::MySqlPoolOptions;
use sqlx::MySqlPool;

/// The server the tests create their databases on: `TRUSTMSG_TEST_MYSQL_URL`,
/// by default `mysql://root@127.0.0.1:3306`, without a trailing slash.
pub fn mysql_server_url() -> String {
    std::env::var("TRUSTMSG_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".to_string())
        .trim_end_matches('/')
        .to_string()
}

/// A database that exists for one test.
#[derive(Debug)]
pub struct TestDb {
    /// The MySQL database name, or the SQLite file's path.
    pub name: String,
    /// The URL to hand to trustmsg's `--database-url` or `store::connect`.
    pub url: String,
    /// For a SQLite database: the directory holding its file, removed on drop.
    sqlite_dir: Option<tempfile::TempDir>,
}

impl TestDb {
    /// Creates an empty MySQL database with a name no other test uses.
    pub async fn create() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        // pid and counter keep names apart within a run; the clock keeps a
        // re-run apart from databases a failed run left behind.
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
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
            .execute(&admin)
            .await
            .expect("create test database");
        admin.close().await;
        let url = format!("{}/{name}", mysql_server_url());
        Self {
            name,
            url,
            sqlite_dir: None,
        }
    }

    /// A fresh SQLite file in a temp directory (whoever connects creates it);
    /// the directory goes when this value is dropped.
    pub fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("trustmsg.db");
        Self {
            name: path.display().to_string(),
            url: format!("sqlite://{}?mode=rwc", path.display()),
            sqlite_dir: Some(dir),
        }
    }

    /// Another handle on the same MySQL database (for a second service
    /// instance); only the original should be dropped.
    pub fn share(&self) -> Self {
        assert!(self.sqlite_dir.is_none(), "share() is for MySQL databases");
        Self {
            name: self.name.clone(),
            url: self.url.clone(),
            sqlite_dir: None,
        }
    }

    /// A pool of up to 8 connections on this MySQL database, for assertions
    /// straight from the tables and for a producer's own tables.
    pub async fn pool(&self) -> MySqlPool {
        self.pool_of(8).await
    }

    /// A pool of up to `connections` connections on this MySQL database.
    pub async fn pool_of(&self, connections: u32) -> MySqlPool {
        assert!(
            self.sqlite_dir.is_none(),
            "pool() is for MySQL test databases"
        );
        MySqlPoolOptions::new()
            .max_connections(connections)
            .connect(&self.url)
            .await
            .expect("connect to test database")
    }

    /// Drops the database (call at the end of a passing test); a SQLite
    /// file goes with its directory when `self` is dropped.
    pub async fn drop_db(self) {
        if self.sqlite_dir.is_some() {
            return;
        }
        let admin = admin_pool().await;
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS `{}`",
            self.name
        )))
        .execute(&admin)
        .await;
        admin.close().await;
    }
}

/// Who decided each message of `biz_id` (commit or rollback), in order, as
/// its audit trail tells it: the `commit`/`rollback` audit rows, and the
/// producer's own decision over the API, which the message row records
/// instead of an audit row (`docs/architecture.md`, States): a message now
/// COMMITTED or ROLLED_BACK whose last status-changing audit row left it
/// PREPARED (or that has none) was decided by its producer, after that row.
pub async fn deciders(pool: &MySqlPool, biz_id: &str) -> HashMap<u64, Vec<String>> {
    type AuditRow = (u64, Vec<u8>, Vec<u8>, Option<Vec<u8>>, Option<Vec<u8>>);
    let rows: Vec<AuditRow> = sqlx::query_as(
        "SELECT a.message_id, a.actor, a.action, a.from_status, a.to_status FROM audit_log a \
         JOIN messages m ON m.id = a.message_id WHERE m.biz_id = ? ORDER BY a.id",
    )
    .bind(biz_id)
    .fetch_all(pool)
    .await
    .expect("read the audit log");
    let decided: Vec<(u64, Vec<u8>)> = sqlx::query_as(
        "SELECT id, status FROM messages WHERE biz_id = ? AND decided_at IS NOT NULL \
         AND status IN ('COMMITTED', 'ROLLED_BACK')",
    )
    .bind(biz_id)
    .fetch_all(pool)
    .await
    .expect("read the messages");
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).expect("UTF-8");
    let mut trails: HashMap<u64, Vec<AuditRow>> = HashMap::new();
    for row in rows {
        trails.entry(row.0).or_default().push(row);
    }
    let mut by_id: HashMap<u64, Vec<String>> = HashMap::new();
    for (id, _) in decided {
        let trail = trails.remove(&id).unwrap_or_default();
        let last_change = trail.iter().rposition(|r| r.4.is_some() && r.3 != r.4);
        let left_prepared =
            last_change.is_none_or(|i| trail[i].4.as_deref() == Some(b"PREPARED".as_slice()));
        let mut actors = Vec::new();
        if left_prepared && last_change.is_none() {
            actors.push(format!("producer:{biz_id}"));
        }
        for (i, r) in trail.iter().enumerate() {
            if matches!(r.2.as_slice(), b"commit" | b"rollback") {
                actors.push(text(&r.1));
            }
            if left_prepared && last_change == Some(i) {
                actors.push(format!("producer:{biz_id}"));
            }
        }
        by_id.insert(id, actors);
    }
    by_id
}

async fn admin_pool() -> MySqlPool {
    MySqlPoolOptions::new()
        .max_connections(1)
        .connect(&mysql_server_url())
        .await
        .expect("connect to the MariaDB/MySQL server at TRUSTMSG_TEST_MYSQL_URL")
}
