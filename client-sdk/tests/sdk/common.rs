//! Shared helpers: a fresh database per test on the real MariaDB/MySQL server,
//! the real trustmsg service booted in-process on port 0, and a local server
//! that fails on purpose.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use serde_json::Value;
use sqlx::mysql::MySqlPoolOptions;
use sqlx::MySqlPool;
use trustmsg::config::ServeArgs;
use trustmsg::startup::Application;
use trustmsg_client::Producer;

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
}

impl TestDb {
    pub async fn create() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!(
            "tm_sdk_{}_{}_{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let admin = admin_pool().await;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
            .execute(&admin)
            .await
            .expect("create test database");
        admin.close().await;
        let url = format!("{}/{name}", mysql_server_url());
        Self { name, url }
    }

    pub async fn pool(&self) -> MySqlPool {
        MySqlPoolOptions::new()
            .max_connections(8)
            .connect(&self.url)
            .await
            .expect("connect to test database")
    }

    pub async fn drop_db(self) {
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

async fn admin_pool() -> MySqlPool {
    MySqlPoolOptions::new()
        .max_connections(1)
        .connect(&mysql_server_url())
        .await
        .expect("connect to the MariaDB/MySQL server at TRUSTMSG_TEST_MYSQL_URL")
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TRUSTMSG_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}

pub const ADMIN_TOKEN: &str = "test-admin-token";

/// The real trustmsg service on port 0 over a fresh database.
pub struct Service {
    pub addr: SocketAddr,
    pub db: TestDb,
    pub app: Application,
}

impl Service {
    pub async fn spawn(extra: &[&str]) -> Self {
        Self::spawn_on(TestDb::create().await, extra).await
    }

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
            db,
            app,
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Registers `biz_id` and returns its token.
    pub async fn register(&self, biz_id: &str) -> String {
        let res = reqwest::Client::new()
            .put(format!("{}/v1/producers/{biz_id}", self.base_url()))
            .bearer_auth(ADMIN_TOKEN)
            .json(&serde_json::json!({ "verify_url": "http://127.0.0.1:9/check" }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201, "register {biz_id}");
        let body: Value = res.json().await.unwrap();
        body["token"].as_str().expect("token").to_string()
    }

    /// A registered producer with a fast retry policy.
    pub async fn producer(&self, biz_id: &str) -> Producer {
        let token = self.register(biz_id).await;
        Producer::new(&self.base_url(), biz_id, token)
            .unwrap()
            .with_retry(fast_retry(3))
    }

    pub async fn finish(self) {
        self.app.stop().await.expect("clean shutdown");
        self.db.drop_db().await;
    }
}

pub fn fast_retry(max_retries: usize) -> trustmsg_client::RetryPolicy {
    trustmsg_client::RetryPolicy {
        max_retries,
        min_delay: std::time::Duration::from_millis(5),
        max_delay: std::time::Duration::from_millis(50),
    }
}

/// Serves `router` on 127.0.0.1:0 and returns its address.
pub async fn serve(router: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

/// A request counter shared with a local server.
#[derive(Clone, Default)]
pub struct Counter(Arc<AtomicU32>);

impl Counter {
    pub fn bump(&self) -> u32 {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }
    pub fn get(&self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }
}
