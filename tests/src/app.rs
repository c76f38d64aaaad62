//! The real service booted in-process on port 0, the way `main.rs` boots it
//! (`ServeArgs::from_args` then `Application::build`), over a fresh database,
//! and the HTTP calls the tests make to it.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use trustmsg::config::ServeArgs;
use trustmsg::startup::Application;
use trustmsg::store::DynStore;
use trustmsg_client::{Producer, RetryPolicy};

use crate::db::TestDb;
use crate::trace::init_tracing;

/// The admin token every service the kit starts accepts.
pub const ADMIN_TOKEN: &str = "test-admin-token";

/// A check-back URL nothing listens on (the discard port): for producers
/// whose messages a test never leaves to check-back.
pub const UNREACHABLE_VERIFY_URL: &str = "http://127.0.0.1:9/check";

/// The real service on port 0 over its own database.
pub struct TestApp {
    /// Where it listens.
    pub addr: SocketAddr,
    /// A client for calls the helpers below do not cover.
    pub http: reqwest::Client,
    /// Its database; [`TestApp::finish`] drops it.
    pub db: TestDb,
    /// The running service, to stop it or reach its store.
    pub app: Application,
}

impl TestApp {
    /// Boots the service over a fresh MySQL database with the given extra
    /// flags (on top of database, listen, admin token and auto-migrate).
    pub async fn spawn(extra: &[&str]) -> Self {
        Self::spawn_on(TestDb::create().await, extra).await
    }

    /// Boots the service over a fresh SQLite file.
    pub async fn spawn_sqlite(extra: &[&str]) -> Self {
        Self::spawn_on(TestDb::sqlite(), extra).await
    }

    /// Boots the service on an existing database (a [`TestDb::share`] for a
    /// second instance, or the database of an instance that was stopped).
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
            http: crate::http::http_client(),
            db,
            app,
        }
    }

    /// `http://<addr>`, what an SDK client takes.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The full URL of `path` on this service.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// The service's store, for assertions on rows and for stepping workers.
    pub fn store(&self) -> &DynStore {
        self.app.store()
    }

    /// Registers a producer checked back at `verify_url`; returns its token.
    pub async fn register(&self, biz_id: &str, verify_url: &str) -> String {
        self.register_with(biz_id, &serde_json::json!({ "verify_url": verify_url }))
            .await
    }

    /// Registers a producer whose check endpoint never answers and which is
    /// checked back once: an undecided message of it is VERIFY_FAILED (and
    /// raises its alert) after one check-back. Returns its token.
    pub async fn register_giving_up_after_one_check(&self, biz_id: &str) -> String {
        let settings =
            serde_json::json!({"verify_url": UNREACHABLE_VERIFY_URL, "max_verify_attempts": 1});
        self.register_with(biz_id, &settings).await
    }

    /// Registers a producer with these settings; returns its token.
    pub async fn register_with(&self, biz_id: &str, settings: &Value) -> String {
        let (status, body) = self.put_producer(biz_id, settings).await;
        assert_eq!(status, 201, "register {biz_id}: {body}");
        body["token"]
            .as_str()
            .expect("token in creation response")
            .to_string()
    }

    /// PUTs a producer's settings with the admin token; returns status and
    /// body (the token on creation, the signing secret always).
    pub async fn put_producer(&self, biz_id: &str, settings: &Value) -> (u16, Value) {
        let req = self
            .http
            .put(self.url(&format!("/v1/producers/{biz_id}")))
            .bearer_auth(ADMIN_TOKEN)
            .json(settings);
        answer(req).await
    }

    /// An SDK client for a newly registered producer (never checked back),
    /// retrying fast.
    pub async fn producer(&self, biz_id: &str) -> Producer {
        let token = self.register(biz_id, UNREACHABLE_VERIFY_URL).await;
        Producer::new(&self.base_url(), biz_id, token)
            .expect("valid base URL")
            .with_retry(fast_retry(3))
    }

    /// POSTs JSON, with a bearer token if given; returns status and body
    /// (`Null` when the body is not JSON).
    pub async fn post(&self, path: &str, token: Option<&str>, body: &Value) -> (u16, Value) {
        let mut req = self.http.post(self.url(path)).json(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        answer(req).await
    }

    /// `POST /v1/messages/prepare` with this token (if given) and body;
    /// returns status and body.
    pub async fn prepare(&self, token: Option<&str>, body: &Value) -> (u16, Value) {
        self.post("/v1/messages/prepare", token, body).await
    }

    /// `POST /v1/messages/commit`; returns status and body.
    pub async fn commit(&self, token: Option<&str>, body: &Value) -> (u16, Value) {
        self.post("/v1/messages/commit", token, body).await
    }

    /// `POST /v1/messages/rollback`; returns status and body.
    pub async fn rollback(&self, token: Option<&str>, body: &Value) -> (u16, Value) {
        self.post("/v1/messages/rollback", token, body).await
    }

    /// A counter of `/metrics`, summed over its labels; 0 before it first
    /// counts. The recorder is one per process, so services a test runs in
    /// one process add up.
    pub async fn counter(&self, name: &str) -> u64 {
        crate::metrics::Metrics::fetch(&self.http, &format!("http://{}/metrics", self.addr))
            .await
            .sum(name) as u64
    }

    /// Waits (at most 20 s) until the worker behind the round counter `name`
    /// (`trustmsg_verify_rounds_total`, `trustmsg_overdue_rounds_total`) has
    /// run `rounds` more rounds from now: for a test that shows nothing more
    /// happens, after the workers had their chances rather than after a
    /// guessed time.
    pub async fn after_rounds(&self, name: &str, rounds: u64) {
        let start = self.counter(name).await;
        crate::wait::eventually(20, &format!("{rounds} more rounds of {name}"), async || {
            self.counter(name).await >= start + rounds
        })
        .await;
    }

    /// GETs, with a bearer token if given; returns status and body.
    pub async fn get(&self, path: &str, token: Option<&str>) -> (u16, Value) {
        let mut req = self.http.get(self.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        answer(req).await
    }

    /// Stops the service (it must shut down cleanly) and drops the database.
    pub async fn finish(self) {
        self.app.stop().await.expect("clean shutdown");
        self.db.drop_db().await;
    }
}

async fn answer(req: reqwest::RequestBuilder) -> (u16, Value) {
    let res = req.send().await.expect("the service answers");
    let status = res.status().as_u16();
    let body = res.json().await.unwrap_or(Value::Null);
    (status, body)
}

/// A retry policy that gives up within a fraction of a second.
pub fn fast_retry(max_retries: usize) -> RetryPolicy {
    RetryPolicy {
        max_retries,
        min_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(50),
    }
}

/// A prepare body for `orders` with a key, a JSON payload and one header.
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

/// A commit or rollback body.
pub fn decision_body(biz_id: &str, message_key: &str) -> Value {
    serde_json::json!({ "biz_id": biz_id, "message_key": message_key })
}
