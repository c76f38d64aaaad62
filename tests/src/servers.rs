//! Local HTTP servers the tests point trustmsg (or the SDK) at: any router on
//! a free port, an alert webhook that records what it receives, a request
//! counter for servers that fail on purpose, and a canary that counts
//! connections it should never get. Everything listens on loopback only.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::Value;
use tokio::net::{TcpListener, ToSocketAddrs};

/// A port bound before its router exists: a check-back endpoint's URL goes
/// into the registration whose answer (the signing secret) the router needs.
pub struct Endpoint {
    listener: TcpListener,
    addr: SocketAddr,
}

impl Endpoint {
    /// Binds a free port on 127.0.0.1.
    pub async fn bind() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        Self { listener, addr }
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Serves `router` on the port for the rest of the test; returns the address.
    pub fn serve(self, router: Router) -> SocketAddr {
        let Self { listener, addr } = self;
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        addr
    }

    /// [`Endpoint::serve`], with each request's peer address in its
    /// extensions (`ConnectInfo<SocketAddr>`): for a test that must know
    /// which process a call came from.
    pub fn serve_with_peers(self, router: Router) -> SocketAddr {
        let Self { listener, addr } = self;
        tokio::spawn(async move {
            axum::serve(
                listener,
                router.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .await
            .unwrap()
        });
        addr
    }
}

/// Serves `router` on a free port of 127.0.0.1; returns its address.
pub async fn serve(router: Router) -> SocketAddr {
    Endpoint::bind().await.serve(router)
}

/// A request counter shared with a local server.
#[derive(Debug, Clone, Default)]
pub struct Counter(Arc<AtomicU32>);

impl Counter {
    /// Counts one request; returns the count including it.
    pub fn bump(&self) -> u32 {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The requests counted so far.
    pub fn get(&self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }
}

/// An alert webhook (`--alert-webhook`) that keeps every alert it accepts,
/// and answers what the test says (204 until told otherwise).
#[derive(Clone)]
pub struct AlertSink {
    addr: SocketAddr,
    alerts: Arc<Mutex<Vec<Value>>>,
    answer: Arc<AtomicU16>,
    refused: Counter,
}

impl AlertSink {
    /// Starts it on a free port.
    pub async fn start() -> Self {
        let alerts: Arc<Mutex<Vec<Value>>> = Arc::default();
        let answer = Arc::new(AtomicU16::new(StatusCode::NO_CONTENT.as_u16()));
        let refused = Counter::default();
        let (store, status, refusals) = (alerts.clone(), answer.clone(), refused.clone());
        let app = Router::new().route(
            "/alerts",
            post(move |headers: HeaderMap, Json(mut v): Json<Value>| {
                let (store, status, refusals) = (store.clone(), status.clone(), refusals.clone());
                async move {
                    let status = StatusCode::from_u16(status.load(Ordering::SeqCst)).unwrap();
                    if !status.is_success() {
                        refusals.bump();
                        return status;
                    }
                    // The header's id beside the body's, for tests that hold
                    // the two to be the same.
                    let header = headers
                        .get("trustmsg-alert-id")
                        .and_then(|h| h.to_str().ok())
                        .map(str::to_string);
                    v["header_alert_id"] = header.map_or(Value::Null, Value::String);
                    store.lock().unwrap().push(v);
                    status
                }
            }),
        );
        Self {
            addr: serve(app).await,
            alerts,
            answer,
            refused,
        }
    }

    /// The URL to pass as `--alert-webhook`.
    pub fn url(&self) -> String {
        format!("http://{}/alerts", self.addr)
    }

    /// Answers `status` from now on; a status that is not 2xx refuses the
    /// alert (it is not kept, and counted in [`AlertSink::refused`]).
    pub fn answer(&self, status: StatusCode) {
        self.answer.store(status.as_u16(), Ordering::SeqCst);
    }

    /// POSTs refused so far.
    pub fn refused(&self) -> u32 {
        self.refused.get()
    }

    /// Every alert body accepted so far, in arrival order, with the
    /// `trustmsg-alert-id` header's value added as `header_alert_id`.
    pub fn alerts(&self) -> Vec<Value> {
        self.alerts.lock().unwrap().clone()
    }

    /// Message id → how many alerts named it.
    pub fn per_message(&self) -> HashMap<u64, usize> {
        let mut m = HashMap::new();
        for a in self.alerts.lock().unwrap().iter() {
            let id = a["message_id"].as_u64().expect("alert names a message id");
            *m.entry(id).or_default() += 1;
        }
        m
    }
}

/// A listener that counts the connections it accepts and answers nothing:
/// stands in for an address trustmsg must never dial.
pub struct Canary {
    /// Where it listens.
    pub addr: SocketAddr,
    connections: Counter,
}

impl Canary {
    /// Listens on `addr` (port 0 for a free one).
    pub async fn start(addr: impl ToSocketAddrs) -> Self {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Counter::default();
        let count = connections.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                count.bump();
                drop(sock);
            }
        });
        Self { addr, connections }
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u32 {
        self.connections.get()
    }
}
