//! The producer API: prepare, commit, rollback, get (`docs/architecture.md`,
//! "Producer API").

use std::time::SystemTime;

use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use axum::Extension;
use axum::Router;
use opentelemetry::trace::SpanKind;
use opentelemetry::KeyValue;
use trustmsg_verify_api::{DecisionRequest, ErrorBody, MessageView, PrepareRequest};

use super::auth::{self, Authenticated};
use super::error::ApiError;
use super::{AppState, Json};
use crate::intake::{validate, Prepared};
use crate::observability::trace::{self, OwnSpan, TraceHeaders};
use crate::store::Message;

/// The most a commit or rollback body may be: two short strings, each at
/// most a few hundred bytes even with every character JSON-escaped.
pub(crate) const DECISION_BODY_LIMIT: usize = 8 * 1024;

/// Routes under `/v1/messages`; the token is checked before any body is read.
pub(crate) fn router(state: &AppState) -> Router<AppState> {
    // The body limit bounds what is buffered before validation: room for the
    // payload in its most expensive JSON form (every byte escaped as \u00XX)
    // plus the other fields. The decoded payload is then checked exactly.
    let prepare_limit = state
        .intake
        .limits
        .max_payload_bytes
        .saturating_mul(6)
        .saturating_add(64 * 1024);
    let decision_limit = DefaultBodyLimit::max(DECISION_BODY_LIMIT);
    Router::new()
        .route(
            "/v1/messages/prepare",
            post(prepare).layer(DefaultBodyLimit::max(prepare_limit)),
        )
        .route("/v1/messages/commit", post(commit).layer(decision_limit))
        .route(
            "/v1/messages/rollback",
            post(rollback).layer(decision_limit),
        )
        .route("/v1/messages/{biz_id}/{message_key}", get(get_message))
        .route_layer(from_fn_with_state(state.clone(), auth::authenticate))
}

/// Stores a PREPARED message.
///
/// A W3C `traceparent` header (and `tracestate`) is stored with the message
/// and sent on with its check-back calls and its Kafka record. An invalid
/// `traceparent` is ignored (counted in `trustmsg_traceparent_invalid_total`),
/// an invalid `tracestate` dropped; neither is ever refused.
#[utoipa::path(post, path = "/v1/messages/prepare", tag = "messages",
    request_body = PrepareRequest,
    params(
        ("traceparent" = Option<String>, Header, description = "W3C Trace Context `traceparent` (version 00: `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`, lower case). Stored with the message and propagated to check-back and the Kafka record. Any value is accepted: an invalid one is ignored (and counted), never refused."),
        ("tracestate" = Option<String>, Header, description = "W3C Trace Context `tracestate` (at most 32 members, 512 characters), kept with a valid `traceparent`. Any value is accepted: an invalid one is dropped."),
    ),
    responses(
        (status = 201, description = "Stored", body = MessageView),
        (status = 200, description = "Already stored with identical content: read `status` (PREPARED: run the local transaction; COMMITTED: it already ran and committed, do not run it again; VERIFY_FAILED: an operator decides, do not run it)", body = MessageView),
        (status = 400, description = "Invalid input", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 403, description = "Token of another biz_id (`forbidden`); or a topic outside the producer's allow-list, or a producer without one under `--require-producer-topics` (`topic_not_allowed`)", body = ErrorBody),
        (status = 409, description = "Same key, different content (`prepare_conflict`); the message is already rolled back (`already_rolled_back`: its decision is final, do not run the local transaction); or a rollback came before any prepare (`rolled_back`)", body = ErrorBody),
        (status = 413, description = "Payload over the limit, or the Kafka record it makes (with key and headers) over the record limit", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub(crate) async fn prepare(
    State(state): State<AppState>,
    Extension(who): Extension<Authenticated>,
    http: TraceHeaders,
    Json(req): Json<PrepareRequest>,
) -> Result<(StatusCode, axum::Json<MessageView>), ApiError> {
    let trace = http.parse(true);
    let mut span = OwnSpan::start(
        "trustmsg prepare",
        SpanKind::Server,
        trace.as_ref().map(|(tp, ts)| (tp, ts.as_deref())),
        None,
        || {
            vec![
                KeyValue::new("trustmsg.biz_id", req.biz_id.clone()),
                KeyValue::new("trustmsg.message_key", req.message_key.clone()),
                KeyValue::new("messaging.destination.name", req.topic.clone()),
            ]
        },
    );
    // Stored: the producer's trace context as it came; without one (and
    // only when spans are exported) this prepare span starts the trace.
    let (traceparent, tracestate) = match trace {
        Some((tp, ts)) => (Some(tp.to_string()), ts),
        None => (span.traceparent().map(|tp| tp.to_string()), None),
    };
    let (result, stages) =
        trace::stages(prepare_traced(state, who, req, traceparent, tracestate)).await;
    span.events(stages);
    match &result {
        Ok((_, view)) => span.set(|| KeyValue::new("trustmsg.message_id", view.id as i64)),
        Err(e) => span.fail(e),
    }
    span.end();
    result
}

async fn prepare_traced(
    state: AppState,
    who: Authenticated,
    req: PrepareRequest,
    traceparent: Option<String>,
    tracestate: Option<String>,
) -> Result<(StatusCode, axum::Json<MessageView>), ApiError> {
    validate::biz_id(&req.biz_id)?;
    let registered = match who.may_act_for(&req.biz_id)? {
        Some(p) => Some(p),
        None => state.producer(&req.biz_id).await?,
    };
    let new =
        state
            .intake
            .new_message(registered.as_deref(), req, None, traceparent, tracestate)?;
    Ok(match state.intake.prepare(new).await? {
        Prepared::Created(m) => (StatusCode::CREATED, axum::Json(m.view())),
        Prepared::Same(m) => (StatusCode::OK, axum::Json(m.view())),
    })
}

/// Commits a prepared message; the forwarder sends it at once.
#[utoipa::path(post, path = "/v1/messages/commit", tag = "messages",
    request_body = DecisionRequest,
    responses(
        (status = 200, description = "Committed (or already was)", body = MessageView),
        (status = 413, description = "Body over 8 KiB", body = ErrorBody),
        (status = 404, description = "Never prepared; nothing was created", body = ErrorBody),
        (status = 409, description = "Already rolled back", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub(crate) async fn commit(
    State(state): State<AppState>,
    Extension(who): Extension<Authenticated>,
    http: TraceHeaders,
    Json(req): Json<DecisionRequest>,
) -> Result<axum::Json<MessageView>, ApiError> {
    decide(state, &who, &http, req, true).await
}

/// Rolls back a message; an unknown one leaves a tombstone.
#[utoipa::path(post, path = "/v1/messages/rollback", tag = "messages",
    request_body = DecisionRequest,
    responses(
        (status = 200, description = "Rolled back (or already was; or a tombstone now blocks a late prepare)", body = MessageView),
        (status = 413, description = "Body over 8 KiB", body = ErrorBody),
        (status = 409, description = "Already committed", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub(crate) async fn rollback(
    State(state): State<AppState>,
    Extension(who): Extension<Authenticated>,
    http: TraceHeaders,
    Json(req): Json<DecisionRequest>,
) -> Result<axum::Json<MessageView>, ApiError> {
    decide(state, &who, &http, req, false).await
}

/// The decision, and with exported spans its span: a child of the
/// request's own `traceparent` when it carries a valid one, else of the
/// message's stored one (none for a message without).
async fn decide(
    state: AppState,
    who: &Authenticated,
    http: &TraceHeaders,
    req: DecisionRequest,
    commit: bool,
) -> Result<axum::Json<MessageView>, ApiError> {
    if !trace::exporting() {
        return decide_message(state, who, req, commit)
            .await
            .map(|m| axum::Json(m.view()));
    }
    let started = SystemTime::now();
    let request_trace = http.parse(false);
    let (result, stages) = trace::stages(decide_message(state, who, req, commit)).await;
    let name = if commit {
        "trustmsg commit"
    } else {
        "trustmsg rollback"
    };
    fn attributes(m: &Message) -> impl FnOnce() -> Vec<KeyValue> + '_ {
        move || {
            vec![
                KeyValue::new("trustmsg.biz_id", m.biz_id.clone()),
                KeyValue::new("trustmsg.message_key", m.message_key.clone()),
                KeyValue::new("trustmsg.message_id", m.id as i64),
            ]
        }
    }
    let mut span = match (&request_trace, &result) {
        (Some((tp, ts)), Ok(m)) => OwnSpan::start(
            name,
            SpanKind::Server,
            Some((tp, ts.as_deref())),
            Some(started),
            attributes(m),
        ),
        (Some((tp, ts)), Err(_)) => OwnSpan::start(
            name,
            SpanKind::Server,
            Some((tp, ts.as_deref())),
            Some(started),
            Vec::new,
        ),
        (None, Ok(m)) => OwnSpan::child_of_stored(
            name,
            SpanKind::Server,
            m.traceparent.as_deref(),
            m.tracestate.as_deref(),
            Some(started),
            attributes(m),
        ),
        (None, Err(_)) => return result.map(|m| axum::Json(m.view())),
    };
    span.events(stages);
    if let Err(e) = &result {
        span.fail(e);
    }
    span.end();
    result.map(|m| axum::Json(m.view()))
}

async fn decide_message(
    state: AppState,
    who: &Authenticated,
    req: DecisionRequest,
    commit: bool,
) -> Result<Message, ApiError> {
    validate::biz_id(&req.biz_id)?;
    validate::message_key(&req.message_key)?;
    who.may_act_for(&req.biz_id)?;
    Ok(state
        .intake
        .decide(&req.biz_id, &req.message_key, commit)
        .await?)
}

/// One message.
#[utoipa::path(get, path = "/v1/messages/{biz_id}/{message_key}", tag = "messages",
    params(("biz_id" = String, Path, description = "The producer's id: 1 to 64 of A-Z a-z 0-9 . _ -", min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9._-]{1,64}$"), ("message_key" = String, Path, description = "The message's key: 1 to 128 bytes of UTF-8, no control characters", min_length = 1, max_length = 128, pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$")),
    responses(
        (status = 200, description = "The message", body = MessageView),
        (status = 404, description = "No such message", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub(crate) async fn get_message(
    State(state): State<AppState>,
    Extension(who): Extension<Authenticated>,
    Path((biz_id, message_key)): Path<(String, String)>,
) -> Result<axum::Json<MessageView>, ApiError> {
    validate::biz_id(&biz_id)?;
    validate::message_key(&message_key)?;
    who.may_act_for(&biz_id)?;
    state
        .store
        .find_message(&biz_id, &message_key)
        .await?
        .map(|m| axum::Json(m.view()))
        .ok_or_else(|| {
            ApiError::not_found(
                "message_not_found",
                format!("no message {message_key:?} for {biz_id:?}"),
            )
        })
}
