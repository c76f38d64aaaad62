//! The HTTP API: one module per resource, each exposing `router()`.
//!
//! - [`messages`]: the producer API (prepare, commit, rollback, get);
//! - [`producers`]: the producer registry (admin token);
//! - [`consumer_groups`]: the consumption ledger's group registry (admin token);
//! - [`consumptions`]: the consumption ledger's begin and finish (a group's
//!   token or the admin token);
//! - [`admin`]: the operator API (admin token): what operators read (messages,
//!   one message, the summary, the outbox sources and their rows) and what
//!   they change (resolve, re-verify, redeliver; retry or give up a failed
//!   outbox row);
//! - [`console`]: the operator console at `/console` (static, over the admin API);
//! - [`health`]: `/healthz`, `/readyz`, `/metrics`, `/openapi.json`;
//! - [`auth`]: tokens, checked before any body is read;
//! - [`load_shed`]: the bound on requests in flight (503 beyond it);
//! - [`openapi`]: the OpenAPI document of all of the above;
//! - [`error`]: the one error type every handler returns, and its JSON body.

mod admin;
pub(crate) mod auth;
mod console;
mod consumer_groups;
mod consumptions;
pub(crate) mod error;
mod health;
pub(crate) mod load_shed;
pub(crate) mod messages;
pub mod openapi;
mod producers;

/// How a producer token is stored (its SHA-256), for tools that check one.
pub use auth::hash_token;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde::de::DeserializeOwned;

use crate::config::{AuthConfig, ProducerDefaults};
use crate::handoff::CommitListener;
use crate::intake::Intake;
use crate::net::address_policy::AddressPolicy;
use crate::registry::Registry;
use crate::store::DynStore;
use error::ApiError;

/// Everything a handler needs; one pointer to clone (axum clones the state
/// for every request and every layer that extracts it).
#[derive(Clone)]
pub(crate) struct AppState(Arc<Shared>);

impl AppState {
    pub(crate) fn new(shared: Shared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What [`AppState`] shares.
pub(crate) struct Shared {
    /// The message store.
    pub(crate) store: DynStore,
    /// Producer registrations (cached).
    pub(crate) registry: Registry,
    /// Who may do what.
    pub(crate) auth: AuthConfig,
    /// The rules and writes of producers' messages (and their limits).
    pub(crate) intake: Intake,
    /// Fallbacks for producer settings.
    pub(crate) producer_defaults: ProducerDefaults,
    /// Told about every commit so the forwarder sends at once.
    pub(crate) commits: Arc<dyn CommitListener>,
    /// The send claim a commit takes (an operator's resolve too).
    pub(crate) send_lease: Duration,
    /// Which check-back addresses are allowed (checked at registration).
    pub(crate) address_policy: Arc<AddressPolicy>,
    /// Slots for API requests in flight (`--max-concurrent-requests`).
    pub(crate) in_flight: load_shed::InFlight,
    /// Longest time a request may take before it is answered 503.
    pub(crate) request_timeout: Duration,
    /// Which background workers stopped (`/readyz` fails then).
    pub(crate) liveness: crate::workers::liveness::Liveness,
    /// The operator summary, computed once for every caller of a moment.
    pub(crate) summary: admin::read::SummaryCache,
    /// The large tables' sizes, read once for every caller of a moment.
    pub(crate) storage: admin::storage::StorageCache,
    /// How long finished messages are kept (`--retention`); None: forever.
    pub(crate) retention: Option<Duration>,
    /// Consumer-group registrations (cached).
    pub(crate) groups: crate::registry::GroupRegistry,
    /// The consumer groups at a glance, computed once for every caller of a moment.
    pub(crate) group_counts: admin::read::GroupCountsCache,
    /// The producers' outbox tables this instance relays (`--outbox-source`).
    pub(crate) outbox: crate::outbox::Sources,
}

/// The whole API, every route under the request deadline but the bulk
/// actions, whose every chunk is.
pub(crate) fn router(state: AppState) -> Router {
    let shed = middleware::from_fn_with_state(state.in_flight.clone(), load_shed::shed_load);
    let deadline = middleware::from_fn_with_state(state.request_timeout, deadline);
    let api = Router::new()
        .merge(messages::router(&state))
        .merge(producers::router(&state))
        .merge(consumer_groups::router(&state))
        .merge(consumptions::router(&state))
        .merge(admin::router(&state))
        .route_layer(shed.clone());
    let bulk = admin::bulk_router(&state).route_layer(shed);
    let timed = Router::new()
        .merge(api)
        .merge(health::router())
        .merge(console::router())
        .layer(deadline);
    Router::new()
        .merge(timed)
        .merge(bulk)
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .with_state(state)
}

/// Every error has the JSON error body, an unknown route too.
async fn no_route(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(
        "no_such_route",
        format!(
            "no route {method} {}; the API is described at /openapi.json",
            uri.path()
        ),
    )
}

/// A known route called with a method it does not take.
async fn wrong_method(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::MethodNotAllowed(format!(
        "{} does not take {method}; the API is described at /openapi.json",
        uri.path()
    ))
}

/// Answers 503 `request_timeout` (with `Retry-After`) when a request takes
/// longer than `--request-timeout`, whatever it waits for: a database that
/// does not answer (or answers only after the pool's acquire timeout and the
/// write batcher's retries) must not hold a caller for longer than it can
/// act on. Dropping the handler abandons its work: a write queued for the
/// batcher is then skipped (its caller is gone), one already being written
/// completes or fails on its own.
async fn deadline(State(limit): State<Duration>, req: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(res) => res,
        Err(_) => ApiError::Timeout(limit).into_response(),
    }
}

/// `axum::Json` whose rejections are [`ApiError`]s with our error body.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Json<T>(pub T);

impl<T, S> FromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Json(v)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(r: JsonRejection) -> ApiError {
    use axum::http::StatusCode;
    match r {
        JsonRejection::MissingJsonContentType(_) => ApiError::UnsupportedMediaType(
            "send the body as JSON with `Content-Type: application/json`".into(),
        ),
        JsonRejection::JsonDataError(e) => ApiError::invalid("invalid_body", e.body_text()),
        JsonRejection::JsonSyntaxError(e) => ApiError::invalid("invalid_json", e.body_text()),
        other if other.status() == StatusCode::PAYLOAD_TOO_LARGE => ApiError::too_large(
            "request body is over this endpoint's size limit (a prepare: 6 × --max-payload-bytes \
             + 64 KiB; a commit or rollback: 8 KiB)"
                .into(),
        ),
        other => ApiError::invalid("invalid_body", other.body_text()),
    }
}
