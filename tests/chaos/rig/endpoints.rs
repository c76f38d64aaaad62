//! The check endpoints' behaviour: answering from the producers' ledger,
//! holding calls on demand (with their callers on record), misbehaving on
//! demand.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{ConnectInfo, Request};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use trustmsg_client::{check_router, CheckRequest, Decision};

use crate::ledger::{Ledger, Local};

/// How long the hold endpoint holds a call while told to: less than its
/// producer's timeout (the call would answer), far more than the rig needs
/// to see the calls and kill their caller.
pub(crate) const HOLD_FOR: Duration = Duration::from_millis(1500);

/// How the shop's check endpoint behaves.
pub(crate) const NORMAL: u8 = 0;
pub(crate) const HANG: u8 = 1;
pub(crate) const GARBAGE: u8 = 2;
pub(crate) const ERROR_500: u8 = 3;

/// What the ledger's check endpoints read: the ledger they answer from, set
/// once the load starts.
#[derive(Default)]
pub(crate) struct EndpointState {
    pub(crate) ledger: std::sync::OnceLock<Arc<Ledger>>,
}

/// The hold endpoint's calls: whether to hold them, and the peer address of
/// each call held right now.
#[derive(Default)]
pub(crate) struct Held {
    pub(crate) holding: AtomicBool,
    pub(crate) calls: Mutex<Vec<SocketAddr>>,
}

/// A check endpoint answering from the ledger: commit if the local
/// transaction committed, rollback if it rolled back, unknown while it runs.
pub(crate) fn from_ledger(secret: String, state: &Arc<EndpointState>) -> Router {
    let state = state.clone();
    check_router(secret, move |req: CheckRequest| {
        let state = state.clone();
        async move {
            let local = state
                .ledger
                .get()
                .and_then(|l| l.answer_check(&req.message_key));
            Ok::<_, std::convert::Infallible>(match local {
                Some(Local::Committed) => Decision::Commit,
                Some(Local::RolledBack) => Decision::Rollback,
                None => Decision::Unknown,
            })
        }
    })
}

/// The hold endpoint holding each call for [`HOLD_FOR`] while told to,
/// with the caller's address on record meanwhile.
pub(crate) async fn hold_calls(
    axum::extract::State(held): axum::extract::State<Arc<Held>>,
    req: Request,
    next: Next,
) -> Response {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    if let (true, Some(peer)) = (held.holding.load(Ordering::SeqCst), peer) {
        held.calls.lock().unwrap().push(peer);
        // Off the record however the call ends (its caller killed, too).
        let _off = OnDrop(|| {
            let mut calls = held.calls.lock().unwrap();
            if let Some(at) = calls.iter().position(|c| *c == peer) {
                calls.swap_remove(at);
            }
        });
        tokio::time::sleep(HOLD_FOR).await;
    }
    next.run(req).await
}

struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

/// The shop's check endpoint misbehaving on demand.
pub(crate) async fn misbehave(
    axum::extract::State(mode): axum::extract::State<Arc<AtomicU8>>,
    req: Request,
    next: Next,
) -> Response {
    match mode.load(Ordering::Relaxed) {
        HANG => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
        GARBAGE => (StatusCode::OK, "{\"decision\": \"commit\", garbage").into_response(),
        ERROR_500 => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        _ => next.run(req).await,
    }
}
