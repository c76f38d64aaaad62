//! Liveness, readiness, Prometheus metrics and the OpenAPI document.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use utoipa::OpenApi;

use super::error::with_retry_after;
use super::AppState;
use crate::observability::prometheus;

/// `/healthz`, `/readyz`, `/metrics`, `/openapi.json`.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route(
            "/openapi.json",
            get(|| async { axum::Json(super::openapi::ApiDoc::openapi()) }),
        )
}

async fn readyz(State(state): State<AppState>) -> Response {
    let dead = state.liveness.dead();
    if !dead.is_empty() {
        return not_ready(format!("worker stopped: {}", dead.join(", ")));
    }
    let starting = state.liveness.still_starting();
    if !starting.is_empty() {
        return not_ready(format!("starting: {}", starting.join(", ")));
    }
    match state.store.ping().await {
        // Ready while any shard answers (a load balancer must not take
        // every instance out for one shard); the body names the others.
        Ok(()) => match state.store.degraded().await {
            down if down.is_empty() => (StatusCode::OK, "ready").into_response(),
            down => (
                StatusCode::OK,
                format!("ready, degraded: {} not answering", down.join(", ")),
            )
                .into_response(),
        },
        Err(e) => {
            tracing::warn!(error = %e, "not ready: store unreachable");
            with_retry_after((StatusCode::SERVICE_UNAVAILABLE, "store unreachable").into_response())
        }
    }
}

/// A 503 saying why, with `Retry-After`.
fn not_ready(why: String) -> Response {
    with_retry_after((StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}")).into_response())
}

async fn metrics() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        prometheus::render(),
    )
}
