//! Scripted check endpoints, a canary listener, an alert sink and helpers.
#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use trustmsg::address_policy::AddressPolicy;
use trustmsg::alert::Alerter;
use trustmsg::backoff::Backoff;
use trustmsg::forwarder::CommitListener;
use trustmsg::registry::Registry;
use trustmsg::store::Message;
use trustmsg::verifier::{Verifier, VerifierConfig};
use trustmsg_verify_api::{signature, webhook, CheckRequest, MessageStatus};

use crate::common::{prepare_body, TestApp, ADMIN_TOKEN};

/// How the check endpoint answers one message.
#[derive(Debug, Clone)]
pub enum Reply {
    /// 200 `{"message_id": <id>, "decision": word}`.
    Decide(&'static str),
    /// Like `Decide("unknown")`, after a pause.
    SlowUnknown(Duration),
    /// Waits for [`CheckServer::open_gate`], then answers commit.
    GatedCommit,
    /// 200 with an HTML page.
    Html,
    /// 200 with no body.
    Empty,
    /// 200 naming another message.
    WrongId,
    /// 200 with a decision word outside the contract.
    Word(&'static str),
    /// 307 to another URL.
    Redirect(String),
    /// An error status.
    Status(u16),
    /// Sleeps this long before answering commit.
    Hang(Duration),
    /// 200 streaming 50 MiB of JSON-ish bytes.
    Huge,
    /// 200 whose body is not UTF-8.
    InvalidUtf8,
}

#[derive(Default)]
struct ServerState {
    secret: Mutex<Option<String>>,
    default: Mutex<Option<Reply>>,
    scripts: Mutex<HashMap<String, Reply>>,
    calls: Mutex<HashMap<String, Vec<u32>>>,
    bad_signatures: AtomicU32,
    total: AtomicU32,
    huge_chunks: AtomicU64,
    in_flight: AtomicU32,
    max_in_flight: AtomicU32,
    gate: Mutex<Option<tokio::sync::watch::Receiver<bool>>>,
    gate_tx: Mutex<Option<tokio::sync::watch::Sender<bool>>>,
}

/// A local check endpoint answering per message key as scripted (default:
/// unknown), verifying every request's Standard Webhooks signature.
#[derive(Clone)]
pub struct CheckServer {
    pub addr: SocketAddr,
    state: Arc<ServerState>,
}

const MIB: usize = 1024 * 1024;

impl CheckServer {
    pub async fn start() -> Self {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let state = Arc::new(ServerState::default());
        *state.gate.lock().unwrap() = Some(rx);
        *state.gate_tx.lock().unwrap() = Some(tx);
        let app = Router::new()
            .route("/check", post(handle))
            .with_state(state.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { addr, state }
    }

    pub fn url(&self) -> String {
        format!("http://{}/check", self.addr)
    }

    /// The secret requests must be signed with.
    pub fn set_secret(&self, secret: &str) {
        *self.state.secret.lock().unwrap() = Some(secret.to_string());
    }

    pub fn script(&self, message_key: &str, reply: Reply) {
        self.state
            .scripts
            .lock()
            .unwrap()
            .insert(message_key.to_string(), reply);
    }

    /// The answer for keys without a script.
    pub fn default_reply(&self, reply: Reply) {
        *self.state.default.lock().unwrap() = Some(reply);
    }

    /// Signature-valid calls for `message_key`.
    pub fn calls(&self, message_key: &str) -> u32 {
        self.attempts(message_key).len() as u32
    }

    /// The `attempt` field of every signature-valid call for `message_key`.
    pub fn attempts(&self, message_key: &str) -> Vec<u32> {
        self.state
            .calls
            .lock()
            .unwrap()
            .get(message_key)
            .cloned()
            .unwrap_or_default()
    }

    /// Every request that reached the handler, signed correctly or not.
    pub fn total(&self) -> u32 {
        self.state.total.load(Ordering::SeqCst)
    }

    pub fn per_key_calls(&self) -> HashMap<String, usize> {
        self.state
            .calls
            .lock()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.len()))
            .collect()
    }

    pub fn bad_signatures(&self) -> u32 {
        self.state.bad_signatures.load(Ordering::SeqCst)
    }

    /// MiB chunks the huge answer produced before the reader hung up.
    pub fn huge_chunks_sent(&self) -> u64 {
        self.state.huge_chunks.load(Ordering::SeqCst)
    }

    pub fn max_in_flight(&self) -> u32 {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }

    pub fn open_gate(&self) {
        if let Some(tx) = self.state.gate_tx.lock().unwrap().as_ref() {
            let _ = tx.send(true);
        }
    }
}

struct InFlight<'a>(&'a ServerState);

impl<'a> InFlight<'a> {
    fn enter(s: &'a ServerState) -> Self {
        let now = s.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        s.max_in_flight.fetch_max(now, Ordering::SeqCst);
        Self(s)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

fn answer(id: u64, word: &str) -> Response {
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        json!({"message_id": id, "decision": word}).to_string(),
    )
        .into_response()
}

async fn handle(State(s): State<Arc<ServerState>>, headers: HeaderMap, body: Bytes) -> Response {
    s.total.fetch_add(1, Ordering::SeqCst);
    let secret = s.secret.lock().unwrap().clone();
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let now = chrono::Utc::now().timestamp();
    let signed = secret.is_some_and(|secret| {
        signature::verify(
            &secret,
            &header(webhook::ID),
            &header(webhook::TIMESTAMP),
            &body,
            &header(webhook::SIGNATURE),
            now,
            300,
        )
        .is_ok()
    });
    if !signed {
        s.bad_signatures.fetch_add(1, Ordering::SeqCst);
        return (StatusCode::UNAUTHORIZED, "bad signature").into_response();
    }
    let req: CheckRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    s.calls
        .lock()
        .unwrap()
        .entry(req.message_key.clone())
        .or_default()
        .push(req.attempt);
    let _guard = InFlight::enter(&s);
    let reply = s
        .scripts
        .lock()
        .unwrap()
        .get(&req.message_key)
        .cloned()
        .or_else(|| s.default.lock().unwrap().clone())
        .unwrap_or(Reply::Decide("unknown"));
    let id = req.message_id;
    match reply {
        Reply::Decide(word) => answer(id, word),
        Reply::SlowUnknown(d) => {
            tokio::time::sleep(d).await;
            answer(id, "unknown")
        }
        Reply::GatedCommit => {
            let rx = s.gate.lock().unwrap().clone();
            if let Some(mut rx) = rx {
                let _ = rx.wait_for(|open| *open).await;
            }
            answer(id, "commit")
        }
        Reply::Html => (
            StatusCode::OK,
            [("content-type", "text/html")],
            "<html><body>It works!</body></html>",
        )
            .into_response(),
        Reply::Empty => StatusCode::OK.into_response(),
        Reply::WrongId => answer(id + 1000, "commit"),
        Reply::Word(w) => answer(id, w),
        Reply::Redirect(to) => (
            StatusCode::TEMPORARY_REDIRECT,
            [("location", to.as_str())],
            "",
        )
            .into_response(),
        Reply::Status(code) => StatusCode::from_u16(code).unwrap().into_response(),
        Reply::Hang(d) => {
            tokio::time::sleep(d).await;
            answer(id, "commit")
        }
        Reply::Huge => {
            let st = s.clone();
            let stream = futures::stream::unfold(0usize, move |n| {
                let st = st.clone();
                async move {
                    if n == 50 {
                        return None;
                    }
                    st.huge_chunks.fetch_add(1, Ordering::SeqCst);
                    let chunk = if n == 0 {
                        let mut c = format!(
                            "{{\"message_id\": {id}, \"decision\": \"commit\", \"pad\": \""
                        )
                        .into_bytes();
                        c.resize(MIB, b'a');
                        c
                    } else {
                        vec![b'a'; MIB]
                    };
                    Some((Ok::<_, std::io::Error>(Bytes::from(chunk)), n + 1))
                }
            });
            (StatusCode::OK, Body::from_stream(stream)).into_response()
        }
        Reply::InvalidUtf8 => (
            StatusCode::OK,
            [("content-type", "application/json")],
            vec![b'{', 0xff, 0xfe, 0xfd, b'}'],
        )
            .into_response(),
    }
}

/// A listener that counts connections and answers nothing.
pub struct Canary {
    pub addr: SocketAddr,
    connections: Arc<AtomicU32>,
}

impl Canary {
    pub async fn start(ip: &str) -> Self {
        let listener = TcpListener::bind(format!("{ip}:0")).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicU32::new(0));
        let count = connections.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                drop(sock);
            }
        });
        Self { addr, connections }
    }

    pub fn connections(&self) -> u32 {
        self.connections.load(Ordering::SeqCst)
    }
}

/// Receives alert webhooks.
#[derive(Clone)]
pub struct AlertSink {
    pub addr: SocketAddr,
    alerts: Arc<Mutex<Vec<Value>>>,
}

impl AlertSink {
    pub async fn start() -> Self {
        let alerts: Arc<Mutex<Vec<Value>>> = Arc::default();
        let store = alerts.clone();
        let app = Router::new().route(
            "/alerts",
            post(move |axum::Json(v): axum::Json<Value>| {
                let store = store.clone();
                async move {
                    store.lock().unwrap().push(v);
                    StatusCode::NO_CONTENT
                }
            }),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { addr, alerts }
    }

    pub fn url(&self) -> String {
        format!("http://{}/alerts", self.addr)
    }

    pub fn alerts(&self) -> Vec<Value> {
        self.alerts.lock().unwrap().clone()
    }
}

/// Records every commit handed to the forwarder.
#[derive(Default)]
pub struct RecordingListener {
    pub committed: Mutex<Vec<Message>>,
}

impl CommitListener for RecordingListener {
    fn committed(&self, message: Message) {
        self.committed.lock().unwrap().push(message);
    }
}

/// Registers (or updates) a producer with explicit settings; returns the
/// response body (token on creation, signing secret always).
pub async fn put_producer(app: &TestApp, biz_id: &str, settings: Value) -> (u16, Value) {
    let res = app
        .http
        .put(app.url(&format!("/v1/producers/{biz_id}")))
        .bearer_auth(ADMIN_TOKEN)
        .json(&settings)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// Registers a producer pointing at `server` and tells the server its secret.
/// Returns the producer's token.
pub async fn register(app: &TestApp, biz_id: &str, server: &CheckServer, extra: Value) -> String {
    let mut settings = json!({"verify_url": server.url(), "first_verify_after_ms": 0});
    for (k, v) in extra.as_object().unwrap() {
        settings[k] = v.clone();
    }
    let (status, body) = put_producer(app, biz_id, settings).await;
    assert_eq!(status, 201, "register {biz_id}: {body}");
    server.set_secret(body["signing_secret"].as_str().unwrap());
    body["token"].as_str().unwrap().to_string()
}

/// Prepares a message and returns its id.
pub async fn prepare(app: &TestApp, token: &str, biz_id: &str, key: &str) -> u64 {
    let (status, body) = app
        .post(
            "/v1/messages/prepare",
            Some(token),
            &prepare_body(biz_id, key),
        )
        .await;
    assert_eq!(status, 201, "prepare {key}: {body}");
    body["id"].as_u64().unwrap()
}

pub async fn message(app: &TestApp, id: u64) -> Message {
    app.store()
        .find_message_by_id(id)
        .await
        .unwrap()
        .expect("message exists")
}

/// Evaluates the (async) condition until it holds or the seconds pass.
macro_rules! eventually {
    ($secs:expr, $what:expr, $cond:expr) => {{
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs($secs);
        loop {
            let done: bool = $cond;
            if done {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                panic!("timed out waiting for: {}", $what);
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }};
}

/// Whether every message in `ids` has `status`.
pub async fn all_have_status(app: &TestApp, ids: &[u64], status: MessageStatus) -> bool {
    for id in ids {
        if message(app, *id).await.status != status {
            return false;
        }
    }
    true
}

/// Settings for a stepped verifier: small delays, generous limits.
pub fn stepped_config() -> VerifierConfig {
    VerifierConfig {
        interval: Duration::from_millis(20),
        batch: 64,
        lease: Duration::from_secs(60),
        concurrency: 64,
        concurrency_per_producer: 64,
        backoff: Backoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(10),
        },
        default_max_attempts: 5,
        send_lease: Duration::from_secs(60),
        shutdown_grace: Duration::from_secs(5),
    }
}

/// A verifier over the app's store, stepped by the test with `process_batch`.
pub fn stepped_verifier(
    app: &TestApp,
    policy: AddressPolicy,
    commits: Arc<dyn CommitListener>,
    cfg: VerifierConfig,
) -> Verifier {
    Verifier::new(
        app.store().clone(),
        Registry::new(app.store().clone(), Duration::from_secs(60)),
        Arc::new(policy),
        Alerter::new(None),
        commits,
        cfg,
    )
}

/// Flags for a service whose own verifier runs fast.
pub const FAST: &[&str] = &[
    "--verify-interval",
    "20ms",
    "--verify-backoff-base",
    "20ms",
    "--verify-backoff-max",
    "100ms",
    "--first-verify-after",
    "0s",
];
