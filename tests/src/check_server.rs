//! A scripted check-back endpoint: a local server that answers trustmsg's
//! check-back calls per message key as a test scripts it (decisions, slow or
//! gated answers, and every kind of garbage a real producer might send), and
//! verifies each request's Standard Webhooks signature the way a producer
//! must. It records what reached it, so a test can assert how often, with
//! which attempt numbers, and how many calls were in flight at once.

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
use serde_json::json;
use trustmsg_verify_api::{signature, webhook, CheckRequest};

use crate::servers::serve;

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

/// The W3C trace headers of one signature-valid call, as they came.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceHeaders {
    /// `traceparent` (None: absent).
    pub traceparent: Option<String>,
    /// `tracestate` (None: absent).
    pub tracestate: Option<String>,
}

#[derive(Default)]
struct ServerState {
    secret: Mutex<Option<String>>,
    default: Mutex<Option<Reply>>,
    scripts: Mutex<HashMap<String, Reply>>,
    calls: Mutex<HashMap<String, Vec<u32>>>,
    traces: Mutex<HashMap<String, Vec<TraceHeaders>>>,
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
    /// Where it listens.
    pub addr: SocketAddr,
    state: Arc<ServerState>,
}

const MIB: usize = 1024 * 1024;

impl CheckServer {
    /// Starts it on a free port, with no secret yet: until
    /// [`CheckServer::set_secret`], every call is refused as badly signed.
    pub async fn start() -> Self {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let state = Arc::new(ServerState::default());
        *state.gate.lock().unwrap() = Some(rx);
        *state.gate_tx.lock().unwrap() = Some(tx);
        let app = Router::new()
            .route("/check", post(handle))
            .with_state(state.clone());
        Self {
            addr: serve(app).await,
            state,
        }
    }

    /// The URL to register as the producer's `verify_url`.
    pub fn url(&self) -> String {
        format!("http://{}/check", self.addr)
    }

    /// The secret requests must be signed with.
    pub fn set_secret(&self, secret: &str) {
        *self.state.secret.lock().unwrap() = Some(secret.to_string());
    }

    /// How to answer calls for `message_key` from now on.
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

    /// The trace headers of every signature-valid call for `message_key`.
    pub fn trace_headers(&self, message_key: &str) -> Vec<TraceHeaders> {
        self.state
            .traces
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

    /// Signature-valid calls per message key.
    pub fn per_key_calls(&self) -> HashMap<String, usize> {
        self.state
            .calls
            .lock()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.len()))
            .collect()
    }

    /// Requests refused for a missing or wrong signature.
    pub fn bad_signatures(&self) -> u32 {
        self.state.bad_signatures.load(Ordering::SeqCst)
    }

    /// MiB chunks the huge answer produced before the reader hung up.
    pub fn huge_chunks_sent(&self) -> u64 {
        self.state.huge_chunks.load(Ordering::SeqCst)
    }

    /// The most signature-valid calls it was answering at one time.
    pub fn max_in_flight(&self) -> u32 {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }

    /// Lets every [`Reply::GatedCommit`] call, waiting or still to come, answer.
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
    let optional = |name: &str| {
        headers
            .get(name)
            .map(|v| v.to_str().unwrap_or("<not text>").to_string())
    };
    s.traces
        .lock()
        .unwrap()
        .entry(req.message_key.clone())
        .or_default()
        .push(TraceHeaders {
            traceparent: optional("traceparent"),
            tracestate: optional("tracestate"),
        });
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
