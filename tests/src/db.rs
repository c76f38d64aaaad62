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

/// A database name no other test uses, on either server (`tm_test_…`):
/// pid and counter keep names apart within a run; the clock keeps a re-run
/// apart from databases a failed run left behind.
pub(crate) fn unique_name() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "tm_test_{}_{}_{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
    )
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
    /// [`TestDb::url`] as the store takes it.
    pub fn database_url(&self) -> trustmsg::store::DatabaseUrl {
        self.url.parse().expect("a test database's URL parses")
    }

    /// Creates an empty MySQL database with a name no other test uses.
    pub async fn create() -> Self {
        let name = unique_name();
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

/// Who decided each message of `biz_id` (the actors of its `commit` and
/// `rollback` entries, in order), as the audit trail operators see shows it
/// (`MessageStore::audit_trail`, the trail of the admin API): `producer:<biz_id>`
/// for the producer's own call (recorded by the message row, not an audit
/// row; `docs/architecture.md`, States), `verifier` for check-back. A
/// message decided once has exactly one; one never decided is absent.
/// `url`: trustmsg's database, of any backend.
pub async fn deciders(url: &str, biz_id: &str) -> HashMap<u64, Vec<String>> {
    let store = open_store(url).await;
    let mut by_id = HashMap::new();
    for m in messages_in(&store, biz_id).await {
        let actors: Vec<String> = store
            .audit_trail(m.id)
            .await
            .expect("read the audit trail")
            .into_iter()
            .filter(|e| matches!(e.action.as_str(), "commit" | "rollback"))
            .map(|e| e.actor)
            .collect();
        if !actors.is_empty() {
            by_id.insert(m.id, actors);
        }
    }
    by_id
}

/// Every message of `biz_id` by its key: (id, status, send status), as
/// the operator's list shows them, read from `store` (of any backend:
/// [`open_store`]).
pub async fn message_states(
    store: &trustmsg::store::DynStore,
    biz_id: &str,
) -> HashMap<String, (u64, String, Option<String>)> {
    messages_in(store, biz_id)
        .await
        .into_iter()
        .map(|m| {
            let state = (
                m.id,
                m.status.as_str().to_string(),
                m.send_status.map(|s| s.as_str().to_string()),
            );
            (m.message_key, state)
        })
        .collect()
}

/// trustmsg's store at `url`, of any backend (not migrated: the service
/// does that).
pub async fn open_store(url: &str) -> trustmsg::store::DynStore {
    trustmsg::store::open(&[url.parse().expect("a database URL")], &[], false)
        .await
        .expect("connect to trustmsg's database")
}

/// Every message of `biz_id`, page by page.
async fn messages_in(
    store: &trustmsg::store::DynStore,
    biz_id: &str,
) -> Vec<trustmsg_verify_api::MessageView> {
    let filter = trustmsg::store::MessageFilter {
        biz_id: Some(biz_id.to_string()),
        ..Default::default()
    };
    let mut all = Vec::new();
    let mut before = None;
    loop {
        let page = store
            .list_messages(&filter, 1000, before)
            .await
            .expect("list the messages");
        let Some(last) = page.last() else {
            return all;
        };
        before = Some(last.id);
        all.extend(page);
    }
}

async fn admin_pool() -> MySqlPool {
    MySqlPoolOptions::new()
        .max_connections(1)
        .connect(&mysql_server_url())
        .await
        .expect("connect to the MariaDB/MySQL server at TRUSTMSG_TEST_MYSQL_URL")
}
