//! Local HTTP servers the tests point trustmsg (or the SDK) at: any router on
//! a free port, an alert webhook that records what it receives, a request
//! counter for servers that fail on purpose, and a canary that counts
//! connections it should never get. Everything listens on loopback only.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
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

/// An alert webhook (`--alert-webhook`) that keeps every alert it receives.
#[derive(Clone)]
pub struct AlertSink {
    addr: SocketAddr,
    alerts: Arc<Mutex<Vec<Value>>>,
}

impl AlertSink {
    /// Starts it on a free port.
    pub async fn start() -> Self {
        let alerts: Arc<Mutex<Vec<Value>>> = Arc::default();
        let store = alerts.clone();
        let app = Router::new().route(
            "/alerts",
            post(move |Json(v): Json<Value>| {
                let store = store.clone();
                async move {
                    store.lock().unwrap().push(v);
                    StatusCode::NO_CONTENT
                }
            }),
        );
        Self {
            addr: serve(app).await,
            alerts,
        }
    }

    /// The URL to pass as `--alert-webhook`.
    pub fn url(&self) -> String {
        format!("http://{}/alerts", self.addr)
    }

    /// Every alert body received so far, in arrival order.
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
