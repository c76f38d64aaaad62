//! Shared test helpers: a fresh database per test on the real MariaDB/MySQL
//! server, and the real service booted on port 0.
#![allow(dead_code, unreachable_pub)]

pub mod kafka;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::Value;
use sqlx::mysql::MySqlPoolOptions;
use sqlx::MySqlPool;
use trustmsg::config::ServeArgs;
use trustmsg::startup::Application;
use trustmsg::store::DynStore;

/// The server the tests create their databases on.
pub fn mysql_server_url() -> String {
    std::env::var("TRUSTMSG_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".to_string())
        .trim_end_matches('/')
        .to_string()
}

/// A database that exists for one test.
pub struct TestDb {
    pub name: String,
    pub url: String,
    /// For a SQLite database: the directory holding its file, removed on drop.
    sqlite_dir: Option<tempfile::TempDir>,
}

impl TestDb {
    /// Creates an empty database with a unique name.
    pub async fn create() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "tm_test_{}_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed),
            rand_suffix()
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

    /// A fresh SQLite file in a temp directory (the service creates it).
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

    /// A pool on this (MySQL) database, for assertions straight from the tables.
    pub async fn pool(&self) -> MySqlPool {
        assert!(
            self.sqlite_dir.is_none(),
            "pool() is for MySQL test databases"
        );
        MySqlPoolOptions::new()
            .max_connections(4)
            .connect(&self.url)
            .await
            .expect("connect to test database")
    }

    /// Drops the database (call at the end of a passing test).
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

fn rand_suffix() -> u32 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
}

async fn admin_pool() -> MySqlPool {
    MySqlPoolOptions::new()
        .max_connections(1)
        .connect(&mysql_server_url())
        .await
        .expect("connect to the MariaDB/MySQL server at TRUSTMSG_TEST_MYSQL_URL")
}

/// Logs to the test's captured output (shown when a test fails).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TRUSTMSG_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,trustmsg=info")),
        )
        .with_test_writer()
        .try_init();
}

pub const ADMIN_TOKEN: &str = "test-admin-token";

/// The real service on port 0 over a fresh database.
pub struct TestApp {
    pub addr: SocketAddr,
    pub http: reqwest::Client,
    pub db: TestDb,
    pub app: Application,
}

impl TestApp {
    /// Boots the service with the given extra flags (on top of database, listen,
    /// admin token and auto-migrate).
    pub async fn spawn(extra: &[&str]) -> Self {
        let db = TestDb::create().await;
        Self::spawn_on(db, extra).await
    }

    /// Boots the service over a fresh SQLite file.
    pub async fn spawn_sqlite(extra: &[&str]) -> Self {
        Self::spawn_on(TestDb::sqlite(), extra).await
    }

    /// Boots the service on an existing database.
    pub async fn spawn_on(db: TestDb, extra: &[&str]) -> Self {
        init_tracing();
        let mut args = vec![
            "--database-url".to_string(),
            db.url.clone(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--admin-token".into(),
            ADMIN_TOKEN.into(),
            "--auto-migrate".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let cfg = ServeArgs::from_args(args).expect("valid test flags");
        let app = Application::build(cfg).await.expect("service starts");
        Self {
            addr: app.address(),
            http: reqwest::Client::new(),
            db,
            app,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn store(&self) -> &DynStore {
        self.app.store()
    }

    /// Registers a producer and returns its token.
    pub async fn register(&self, biz_id: &str, verify_url: &str) -> String {
        let res = self
            .http
            .put(self.url(&format!("/v1/producers/{biz_id}")))
            .bearer_auth(ADMIN_TOKEN)
            .json(&serde_json::json!({ "verify_url": verify_url }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201, "register {biz_id}");
        let body: Value = res.json().await.unwrap();
        body["token"]
            .as_str()
            .expect("token in creation response")
            .to_string()
    }

    /// POSTs JSON with a bearer token; returns status and body.
    pub async fn post(&self, path: &str, token: Option<&str>, body: &Value) -> (u16, Value) {
        let mut req = self.http.post(self.url(path)).json(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        let body = res.json().await.unwrap_or(Value::Null);
        (status, body)
    }

    /// GETs with a bearer token; returns status and body.
    pub async fn get(&self, path: &str, token: Option<&str>) -> (u16, Value) {
        let mut req = self.http.get(self.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        let body = res.json().await.unwrap_or(Value::Null);
        (status, body)
    }

    /// Stops the service and drops the database.
    pub async fn finish(self) {
        self.app.stop().await.expect("clean shutdown");
        self.db.drop_db().await;
    }
}

/// A prepare body.
pub fn prepare_body(biz_id: &str, message_key: &str) -> Value {
    serde_json::json!({
        "biz_id": biz_id,
        "message_key": message_key,
        "topic": "orders",
        "key": "order-1",
        "payload": "{\"amount\":42}",
        "headers": {"content-type": "application/json"},
    })
}

/// A commit/rollback body.
pub fn decision_body(biz_id: &str, message_key: &str) -> Value {
    serde_json::json!({ "biz_id": biz_id, "message_key": message_key })
}
