//! The pieces every end-to-end test needs: the real `trustmsg` binary as a
//! child process, a fresh MariaDB database, Kafka through librdkafka's mock
//! cluster (in this process, reachable over TCP), an alert webhook sink.
#![allow(unreachable_pub)]

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::mysql::MySqlPoolOptions;
use sqlx::MySqlPool;
use trustmsg_kafka_mock::{consume, Consumed, MockKafka, StopFlag};

pub const ADMIN_TOKEN: &str = "e2e-admin-token";

/// The server the tests create databases on.
pub fn mysql_server_url() -> String {
    std::env::var("TRUSTMSG_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".to_string())
        .trim_end_matches('/')
        .to_string()
}

/// A database for one test, dropped by [`Db::drop_db`].
pub struct Db {
    pub name: String,
    pub url: String,
}

impl Db {
    pub async fn create(tag: &str) -> Self {
        let name = format!(
            "tm_e2e_{tag}_{}_{}",
            std::process::id(),
            rand::random::<u32>()
        );
        let admin = MySqlPoolOptions::new()
            .max_connections(1)
            .connect(&mysql_server_url())
            .await
            .expect("MariaDB at TRUSTMSG_TEST_MYSQL_URL");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
            .execute(&admin)
            .await
            .unwrap();
        Self {
            url: format!("{}/{name}", mysql_server_url()),
            name,
        }
    }

    pub async fn pool(&self) -> MySqlPool {
        self.pool_of(8).await
    }

    pub async fn pool_of(&self, connections: u32) -> MySqlPool {
        MySqlPoolOptions::new()
            .max_connections(connections)
            .connect(&self.url)
            .await
            .unwrap()
    }

    pub async fn drop_db(self) {
        let admin = MySqlPoolOptions::new()
            .max_connections(1)
            .connect(&mysql_server_url())
            .await
            .unwrap();
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS `{}`",
            self.name
        )))
        .execute(&admin)
        .await;
    }
}

/// The `trustmsg` binary of this workspace. `cargo test --workspace` builds it
/// (the middleware's own integration tests need it); `./scripts/test` does too.
pub fn binary() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")));
    let path = target.join("debug").join("trustmsg");
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build -p trustmsg` (./scripts/test does)",
        path.display()
    );
    path
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The real service as a child process.
pub struct Service {
    pub addr: SocketAddr,
    args: Vec<String>,
    child: Option<Child>,
}

impl Service {
    /// Starts `trustmsg serve` on a free port with the given extra flags and
    /// waits until it answers `/readyz`.
    pub async fn start(db: &Db, brokers: &str, extra: &[&str]) -> Self {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut args: Vec<String> = [
            "serve",
            "--database-url",
            &db.url,
            "--listen",
            &addr.to_string(),
            "--admin-token",
            ADMIN_TOKEN,
            "--auto-migrate",
            "--kafka-brokers",
            brokers,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut s = Self {
            addr,
            args,
            child: None,
        };
        s.spawn().await;
        s
    }

    async fn spawn(&mut self) {
        let log = std::env::var("TRUSTMSG_E2E_LOG").unwrap_or_else(|_| "warn".into());
        let child = Command::new(binary())
            .args(&self.args)
            .env("TRUSTMSG_LOG", log)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn trustmsg");
        self.child = Some(child);
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = http
                .get(format!("http://{}/readyz", self.addr))
                .send()
                .await
            {
                if r.status().is_success() {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "trustmsg did not become ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// SIGKILL: no shutdown hook runs, nothing is flushed.
    pub fn kill_9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().expect("SIGKILL");
            c.wait().unwrap();
        }
    }

    /// Starts the same command again (same port, same database).
    pub async fn restart(&mut self) {
        self.kill_9();
        self.spawn().await;
    }

    /// Registers a producer; returns (token, signing secret).
    pub async fn register(&self, biz_id: &str, settings: Value) -> (String, String) {
        let res = reqwest::Client::new()
            .put(format!("{}/v1/producers/{biz_id}", self.url()))
            .bearer_auth(ADMIN_TOKEN)
            .json(&settings)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);
        let body: Value = res.json().await.unwrap();
        (
            body["token"].as_str().unwrap().to_string(),
            body["signing_secret"].as_str().unwrap().to_string(),
        )
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.kill_9();
    }
}

/// Kafka: a mock cluster with the given topics and a consumer collecting every record.
pub struct Kafka {
    pub mock: MockKafka,
    records: Arc<Mutex<Vec<Consumed>>>,
    stops: Vec<StopFlag>,
}

impl Kafka {
    pub fn start(topics: &[&str]) -> Self {
        let mock = MockKafka::start(1);
        for topic in topics {
            mock.create_topic(topic, 3);
        }
        let records = Arc::new(Mutex::new(Vec::new()));
        let mut stops = Vec::new();
        for topic in topics {
            let (mut rx, stop) = consume(mock.bootstrap(), topic).expect("consumer");
            stops.push(stop);
            let records = records.clone();
            tokio::spawn(async move {
                while let Some(r) = rx.recv().await {
                    records.lock().unwrap().push(r);
                }
            });
        }
        Self {
            mock,
            records,
            stops,
        }
    }

    pub fn records(&self) -> Vec<Consumed> {
        self.records.lock().unwrap().clone()
    }

    /// Message id → how many times it was delivered.
    pub fn deliveries(&self) -> HashMap<u64, usize> {
        let mut m = HashMap::new();
        for r in self.records.lock().unwrap().iter() {
            *m.entry(r.message_id).or_default() += 1;
        }
        m
    }
}

impl Drop for Kafka {
    fn drop(&mut self) {
        for s in &self.stops {
            s.set();
        }
    }
}

/// A local alert webhook counting calls per message id.
pub struct AlertSink {
    pub url: String,
    alerts: Arc<Mutex<Vec<Value>>>,
}

impl AlertSink {
    pub async fn start() -> Self {
        let alerts = Arc::new(Mutex::new(Vec::new()));
        let store = alerts.clone();
        let app = axum::Router::new().route(
            "/alerts",
            axum::routing::post(move |axum::Json(v): axum::Json<Value>| {
                let store = store.clone();
                async move {
                    store.lock().unwrap().push(v);
                    "ok"
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/alerts", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, alerts }
    }

    /// message id → alerts received for it.
    pub fn per_message(&self) -> HashMap<u64, usize> {
        let mut m = HashMap::new();
        for a in self.alerts.lock().unwrap().iter() {
            *m.entry(a["message_id"].as_u64().unwrap()).or_default() += 1;
        }
        m
    }
}

/// Serves `router` on a free local port; returns its base URL.
pub async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    url
}

/// Polls `cond` until it holds or `secs` pass.
pub async fn eventually<F, Fut>(secs: u64, what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond().await {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A message row as raw columns: key, id, status, send_status.
type StatusRow = (Vec<u8>, u64, Vec<u8>, Option<Vec<u8>>);

/// Status of every message of `biz_id`, by message key.
pub async fn statuses(
    pool: &MySqlPool,
    biz_id: &str,
) -> HashMap<String, (u64, String, Option<String>)> {
    let rows: Vec<StatusRow> = sqlx::query_as(
        "SELECT message_key, id, status, send_status FROM messages WHERE biz_id = ?",
    )
    .bind(biz_id)
    .fetch_all(pool)
    .await
    .unwrap();
    rows.into_iter()
        .map(|(k, id, s, ss)| {
            (
                String::from_utf8(k).unwrap(),
                (
                    id,
                    String::from_utf8(s).unwrap(),
                    ss.map(|s| String::from_utf8(s).unwrap()),
                ),
            )
        })
        .collect()
}

/// Fast check-back settings for tests (seconds, not minutes).
pub const FAST_VERIFY: &[&str] = &[
    "--verify-interval",
    "50ms",
    "--verify-backoff-base",
    "100ms",
    "--verify-backoff-max",
    "300ms",
    "--sweep-interval",
    "200ms",
];

pub fn settings(verify_url: &str, first_ms: u32, attempts: u32) -> Value {
    json!({
        "verify_url": verify_url,
        "first_verify_after_ms": first_ms,
        "max_verify_attempts": attempts,
        "verify_timeout_ms": 5000,
    })
}
