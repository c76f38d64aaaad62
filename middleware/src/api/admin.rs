//! The operator API (admin token; a producer token gets 403).
//!
//! Reads: `GET /v1/admin/messages` (filters, keyset pages, newest first),
//! `GET /v1/admin/messages/{id}` (the message with its payload, headers,
//! audit trail and check-back calls) and `GET /v1/admin/summary` (per producer: counts by state,
//! the oldest waiting message of each kind).
//!
//! Actions on one message, each with a required reason and audited with the
//! operator's name (`x-trustmsg-operator`, else `admin`): `resolve` (commit
//! or roll back a PREPARED or VERIFY_FAILED message), `reverify`
//! (VERIFY_FAILED → PREPARED, checked again at once) and `redeliver`
//! (SEND_FAILED → PENDING, sent again at once). Each is a guarded
//! transition on the version the operator's request found: if anyone (the
//! producer, check-back, another operator) changed the message first, the
//! action changes nothing and answers 409 saying what the message is now.
//!
//! Every parameter is checked and a bad one is a 400 that says what is
//! accepted.

use std::collections::BTreeMap;

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use axum::Router;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use trustmsg_verify_api::{ErrorBody, MessageStatus, MessageView, SendStatus};
use utoipa::ToSchema;

use super::auth;
use super::error::ApiError;
use super::{AppState, Json};
use crate::store::{
    self, Actor, AuditEntry, CheckAttemptEntry, DecideOutcome, DecideRequest, Message,
    MessageFilter, ProducerSummary, Target, Transition,
};

/// Rows in a page when `limit` is not given, and at most.
const DEFAULT_LIMIT: u32 = 50;
const MAX_LIMIT: u32 = 500;
/// The query parameters the list takes.
const LIST_PARAMS: [&str; 8] = [
    "status",
    "send_status",
    "biz_id",
    "topic",
    "created_after",
    "created_before",
    "limit",
    "cursor",
];

/// Routes under `/v1/admin`, admin token only.
pub(crate) fn router(state: &AppState) -> Router<AppState> {
    Router::new()
        .route("/v1/admin/messages", get(list_messages))
        .route("/v1/admin/messages/{id}", get(get_message))
        .route("/v1/admin/messages/reverify", post(bulk_reverify))
        .route("/v1/admin/messages/redeliver", post(bulk_redeliver))
        .route("/v1/admin/messages/{id}/resolve", post(resolve))
        .route("/v1/admin/messages/{id}/reverify", post(reverify))
        .route("/v1/admin/messages/{id}/redeliver", post(redeliver))
        .route("/v1/admin/summary", get(summary))
        .route_layer(from_fn_with_state(state.clone(), auth::admin_only))
}

/// One page of messages.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct MessagePage {
    /// Newest first.
    items: Vec<MessageView>,
    /// Pass as `cursor` for the next page; null on the last page.
    next_cursor: Option<String>,
}

/// How the payload is written in [`MessageDetail::payload`].
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum PayloadEncoding {
    /// The payload is UTF-8 text, as is.
    Utf8,
    /// The payload is not UTF-8: standard base64 of its bytes.
    Base64,
}

/// One change in a message's life.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct AuditView {
    at: DateTime<Utc>,
    /// `producer:<biz_id>`, `verifier`, `forwarder`, `admin` or an operator's name.
    actor: String,
    /// `commit`, `rollback`, `verify_failed`, `send_failed`, `reverify`, `quarantine`, …
    action: String,
    from_status: Option<String>,
    to_status: Option<String>,
    from_send_status: Option<String>,
    to_send_status: Option<String>,
    reason: String,
}

impl From<AuditEntry> for AuditView {
    fn from(e: AuditEntry) -> Self {
        Self {
            at: e.created_at,
            actor: e.actor,
            action: e.action,
            from_status: e.from_status,
            to_status: e.to_status,
            from_send_status: e.from_send_status,
            to_send_status: e.to_send_status,
            reason: e.reason,
        }
    }
}

/// One message in full.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct MessageDetail {
    message: MessageView,
    /// The record value: text, or base64 when it is not UTF-8.
    payload: String,
    payload_encoding: PayloadEncoding,
    /// The user's record headers.
    headers: BTreeMap<String, String>,
    /// Oldest first.
    audit: Vec<AuditView>,
    /// Every check-back call (the newest 50), oldest first.
    check_attempts: Vec<CheckAttemptEntry>,
}

/// One producer's messages at a glance.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ProducerSummaryView {
    biz_id: String,
    /// Messages by status; states with none are absent.
    by_status: BTreeMap<String, u64>,
    /// Committed messages by send status.
    by_send_status: BTreeMap<String, u64>,
    /// When the oldest message still PREPARED was prepared.
    oldest_prepared_at: Option<DateTime<Utc>>,
    /// Its age by the database clock, in milliseconds.
    oldest_prepared_age_ms: Option<u64>,
    /// When the oldest message whose send is still PENDING was committed.
    oldest_pending_send_at: Option<DateTime<Utc>>,
    /// Its age by the database clock, in milliseconds.
    oldest_pending_send_age_ms: Option<u64>,
}

/// Every producer with messages.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Summary {
    /// By biz_id.
    producers: Vec<ProducerSummaryView>,
    /// The database clock the ages were measured with.
    at: DateTime<Utc>,
}

fn bad(message: String) -> ApiError {
    ApiError::invalid("invalid_filter", message)
}

fn time_param(name: &str, v: &str) -> Result<DateTime<Utc>, ApiError> {
    DateTime::parse_from_rfc3339(v)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            bad(format!(
                "{name} must be an RFC 3339 time such as 2026-11-23T08:00:00Z (got {v:?}: {e})"
            ))
        })
}

/// A cursor is the last id of a page, wrapped so clients treat it as opaque.
fn cursor_of(id: u64) -> String {
    URL_SAFE_NO_PAD.encode(format!("v1:{id}"))
}

fn cursor_id(cursor: &str) -> Result<u64, ApiError> {
    URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.strip_prefix("v1:").and_then(|id| id.parse().ok()))
        .ok_or_else(|| {
            ApiError::invalid(
                "invalid_cursor",
                "cursor is not one this API issued: pass the next_cursor of the previous page \
                 unchanged, or leave it out for the first page",
            )
        })
}

/// The filter, page size and position a list request asks for.
fn list_request(
    params: &BTreeMap<String, String>,
) -> Result<(MessageFilter, u32, Option<u64>), ApiError> {
    if let Some(unknown) = params.keys().find(|k| !LIST_PARAMS.contains(&k.as_str())) {
        return Err(bad(format!(
            "unknown parameter {unknown:?}; the list takes {}",
            LIST_PARAMS.join(", ")
        )));
    }
    let get = |k: &str| params.get(k).map(String::as_str).filter(|v| !v.is_empty());
    let status = get("status")
        .map(|s| {
            MessageStatus::parse(s).ok_or_else(|| {
                bad(format!(
                    "status must be one of PREPARED, COMMITTED, ROLLED_BACK, VERIFY_FAILED (got {s:?})"
                ))
            })
        })
        .transpose()?;
    let send_status = get("send_status")
        .map(|s| {
            SendStatus::parse(s).ok_or_else(|| {
                bad(format!(
                    "send_status must be one of PENDING, SENT, SEND_FAILED (got {s:?})"
                ))
            })
        })
        .transpose()?;
    let filter = MessageFilter {
        status,
        send_status,
        biz_id: get("biz_id").map(str::to_string),
        topic: get("topic").map(str::to_string),
        created_after: get("created_after")
            .map(|v| time_param("created_after", v))
            .transpose()?,
        created_before: get("created_before")
            .map(|v| time_param("created_before", v))
            .transpose()?,
    };
    let limit = match get("limit") {
        None => DEFAULT_LIMIT,
        Some(v) => v
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_LIMIT).contains(n))
            .ok_or_else(|| {
                ApiError::invalid(
                    "invalid_limit",
                    format!("limit must be a whole number from 1 to {MAX_LIMIT} (got {v:?})"),
                )
            })?,
    };
    let before = get("cursor").map(cursor_id).transpose()?;
    Ok((filter, limit, before))
}

/// Lists messages, newest first, a page at a time.
#[utoipa::path(get, path = "/v1/admin/messages", tag = "admin",
    params(
        ("status" = Option<String>, Query, description = "PREPARED, COMMITTED, ROLLED_BACK or VERIFY_FAILED"),
        ("send_status" = Option<String>, Query, description = "PENDING, SENT or SEND_FAILED"),
        ("biz_id" = Option<String>, Query, description = "One producer's messages"),
        ("topic" = Option<String>, Query, description = "One topic's messages"),
        ("created_after" = Option<String>, Query, description = "RFC 3339; created at or after"),
        ("created_before" = Option<String>, Query, description = "RFC 3339; created before"),
        ("limit" = Option<u32>, Query, description = "Rows per page, 1 to 500 (default 50)"),
        ("cursor" = Option<String>, Query, description = "The previous page's next_cursor"),
    ),
    responses(
        (status = 200, description = "A page of messages", body = MessagePage),
        (status = 400, description = "A parameter is not one the list takes, or its value is not", body = ErrorBody),
        (status = 403, description = "Not the admin token", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn list_messages(
    State(state): State<AppState>,
    Query(params): Query<BTreeMap<String, String>>,
) -> Result<axum::Json<MessagePage>, ApiError> {
    let (filter, limit, before) = list_request(&params)?;
    let items = state.store.list_messages(&filter, limit, before).await?;
    let next_cursor = (items.len() == limit as usize)
        .then(|| items.last().map(|m| cursor_of(m.id)))
        .flatten();
    Ok(axum::Json(MessagePage { items, next_cursor }))
}

/// One message with its payload, headers and audit trail.
#[utoipa::path(get, path = "/v1/admin/messages/{id}", tag = "admin",
    params(("id" = u64, Path, description = "trustmsg's message id")),
    responses(
        (status = 200, description = "The message", body = MessageDetail),
        (status = 400, description = "The id is not a number", body = ErrorBody),
        (status = 403, description = "Not the admin token", body = ErrorBody),
        (status = 404, description = "No such message", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn get_message(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<MessageDetail>, ApiError> {
    let m = message(&state, &id).await?;
    let id = m.id;
    let audit = state.store.audit_trail(id).await?;
    let check_attempts = state.store.check_attempts(id).await?;
    let (payload, payload_encoding) = match std::str::from_utf8(&m.payload) {
        Ok(text) => (text.to_string(), PayloadEncoding::Utf8),
        Err(_) => (STANDARD.encode(&m.payload), PayloadEncoding::Base64),
    };
    Ok(axum::Json(MessageDetail {
        message: m.view(),
        payload,
        payload_encoding,
        headers: m.headers,
        audit: audit.into_iter().map(AuditView::from).collect(),
        check_attempts,
    }))
}

/// The message `id` names (400 if it is not a number, 404 if there is none).
async fn message(state: &AppState, id: &str) -> Result<Message, ApiError> {
    let id: u64 = id.parse().map_err(|_| {
        ApiError::invalid(
            "invalid_id",
            format!("a message id is a whole number (got {id:?})"),
        )
    })?;
    state
        .store
        .find_message_by_id(id)
        .await?
        .ok_or_else(|| ApiError::not_found("message_not_found", format!("no message {id}")))
}

/// The longest operator name and reason kept.
const MAX_OPERATOR: usize = 64;
const MAX_REASON: usize = 1000;

/// Who acts: the `x-trustmsg-operator` header, else `admin`.
fn operator(headers: &HeaderMap) -> Result<Actor, ApiError> {
    let Some(v) = headers.get("x-trustmsg-operator") else {
        return Ok(Actor::Operator("admin".into()));
    };
    let name = v
        .to_str()
        .ok()
        .map(str::trim)
        .filter(|n| !n.is_empty() && n.len() <= MAX_OPERATOR && !n.chars().any(char::is_control))
        .ok_or_else(|| {
            ApiError::invalid(
                "invalid_operator",
                format!(
                    "x-trustmsg-operator must be a name of 1 to {MAX_OPERATOR} printable characters"
                ),
            )
        })?;
    Ok(Actor::Operator(name.to_string()))
}

fn reason_of(reason: Option<String>) -> Result<String, ApiError> {
    let reason = reason.map(|r| r.trim().to_string()).unwrap_or_default();
    if reason.is_empty() || reason.len() > MAX_REASON {
        return Err(ApiError::invalid(
            "invalid_reason",
            format!(
                "a reason is required (1 to {MAX_REASON} characters): it goes into the \
                 message's audit trail"
            ),
        ));
    }
    Ok(reason)
}

/// The 409 of an action that found the message changed or in another state.
fn not_now(m: &Message, action: &str, allowed: &str) -> ApiError {
    let send = m
        .send_status
        .map(|s| format!(" / {}", s.as_str()))
        .unwrap_or_default();
    ApiError::conflict(
        "wrong_state",
        format!(
            "message {} is {}{send}: {action} applies to {allowed} messages only; nothing changed",
            m.id,
            m.status.as_str()
        ),
    )
}

/// The latest state of a message an action lost a race on, for its 409.
async fn lost_race(state: &AppState, id: u64, action: &str, allowed: &str) -> ApiError {
    match state.store.find_message_by_id(id).await {
        Ok(Some(now)) => not_now(&now, action, allowed),
        Ok(None) => ApiError::not_found("message_not_found", format!("no message {id}")),
        Err(e) => e.into(),
    }
}

/// The decision an operator makes.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum OperatorDecision {
    Commit,
    Rollback,
}

/// `POST …/resolve`.
#[derive(Debug, Deserialize, ToSchema)]
pub(crate) struct ResolveRequest {
    decision: OperatorDecision,
    /// Why; required, kept in the audit trail.
    reason: Option<String>,
}

/// `POST …/reverify` and `…/redeliver`.
#[derive(Debug, Deserialize, ToSchema)]
pub(crate) struct ActionRequest {
    /// Why; required, kept in the audit trail.
    reason: Option<String>,
}

/// Commits or rolls back a PREPARED or VERIFY_FAILED message.
#[utoipa::path(post, path = "/v1/admin/messages/{id}/resolve", tag = "admin",
    params(("id" = u64, Path, description = "trustmsg's message id"),
        ("x-trustmsg-operator" = Option<String>, Header, description = "Who acts, for the audit trail (default admin)")),
    request_body = ResolveRequest,
    responses(
        (status = 200, description = "Decided; a commit is being sent", body = MessageView),
        (status = 400, description = "No reason, or a bad decision or operator name", body = ErrorBody),
        (status = 404, description = "No such message", body = ErrorBody),
        (status = 409, description = "The message is decided already (by someone else first)", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn resolve(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(req): Json<ResolveRequest>,
) -> Result<axum::Json<MessageView>, ApiError> {
    let actor = operator(&headers)?;
    let reason = reason_of(req.reason)?;
    let m = message(&state, &id).await?;
    const ALLOWED: &str = "PREPARED and VERIFY_FAILED";
    if m.status.is_final() {
        return Err(not_now(&m, "resolve", ALLOWED));
    }
    let commit = matches!(req.decision, OperatorDecision::Commit);
    let outcome = store::decide(
        state.store.as_ref(),
        DecideRequest {
            target: Target::Id(m.id),
            commit,
            actor: actor.clone(),
            reason,
            send_lease: state.send_lease,
            verify_attempt: false,
        },
    )
    .await?;
    match outcome {
        DecideOutcome::Decided(done) => {
            tracing::info!(message_id = done.id, %actor, commit, "resolved by an operator");
            let view = done.view();
            if commit {
                state.commits.committed(done);
            }
            Ok(axum::Json(view))
        }
        DecideOutcome::AlreadyDecided(now) | DecideOutcome::Conflict(now) => {
            Err(not_now(&now, "resolve", ALLOWED))
        }
        DecideOutcome::NotFound => Err(ApiError::not_found(
            "message_not_found",
            format!("no message {}", m.id),
        )),
    }
}

/// VERIFY_FAILED → PREPARED: attempts back to 0, checked again at once.
#[utoipa::path(post, path = "/v1/admin/messages/{id}/reverify", tag = "admin",
    params(("id" = u64, Path, description = "trustmsg's message id"),
        ("x-trustmsg-operator" = Option<String>, Header, description = "Who acts, for the audit trail (default admin)")),
    request_body = ActionRequest,
    responses(
        (status = 200, description = "PREPARED again, due for check-back now", body = MessageView),
        (status = 400, description = "No reason, or a bad operator name", body = ErrorBody),
        (status = 404, description = "No such message", body = ErrorBody),
        (status = 409, description = "The message is not VERIFY_FAILED (any more)", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn reverify(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(req): Json<ActionRequest>,
) -> Result<axum::Json<MessageView>, ApiError> {
    act_on_one(&state, &id, &headers, req, Repair::Reverify).await
}

/// SEND_FAILED → PENDING: send attempts back to 0, sent again at once.
#[utoipa::path(post, path = "/v1/admin/messages/{id}/redeliver", tag = "admin",
    params(("id" = u64, Path, description = "trustmsg's message id"),
        ("x-trustmsg-operator" = Option<String>, Header, description = "Who acts, for the audit trail (default admin)")),
    request_body = ActionRequest,
    responses(
        (status = 200, description = "PENDING again, due for sending now", body = MessageView),
        (status = 400, description = "No reason, or a bad operator name", body = ErrorBody),
        (status = 404, description = "No such message", body = ErrorBody),
        (status = 409, description = "The message's send is not SEND_FAILED (any more)", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn redeliver(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(req): Json<ActionRequest>,
) -> Result<axum::Json<MessageView>, ApiError> {
    act_on_one(&state, &id, &headers, req, Repair::Redeliver).await
}

/// What re-verify and redeliver have in common: a failed message put back
/// in the queue it failed out of, under the guard of the version read.
#[derive(Debug, Clone, Copy)]
enum Repair {
    /// VERIFY_FAILED → PREPARED.
    Reverify,
    /// SEND_FAILED → PENDING.
    Redeliver,
}

impl Repair {
    fn name(self) -> &'static str {
        match self {
            Self::Reverify => "reverify",
            Self::Redeliver => "redeliver",
        }
    }

    /// The state it applies to, for messages.
    fn allowed(self) -> &'static str {
        match self {
            Self::Reverify => "VERIFY_FAILED",
            Self::Redeliver => "SEND_FAILED",
        }
    }

    fn applies_to(self, m: &Message) -> bool {
        match self {
            Self::Reverify => m.status == MessageStatus::VerifyFailed,
            Self::Redeliver => m.send_status == Some(SendStatus::SendFailed),
        }
    }

    /// Narrows `filter` to the state it applies to; false when the filter
    /// already excludes that state.
    fn narrow(self, filter: &mut MessageFilter) -> bool {
        match self {
            Self::Reverify => {
                let ok = filter
                    .status
                    .is_none_or(|s| s == MessageStatus::VerifyFailed);
                filter.status = Some(MessageStatus::VerifyFailed);
                ok
            }
            Self::Redeliver => {
                let ok = filter
                    .send_status
                    .is_none_or(|s| s == SendStatus::SendFailed)
                    && filter.status.is_none_or(|s| s == MessageStatus::Committed);
                filter.send_status = Some(SendStatus::SendFailed);
                ok
            }
        }
    }

    /// The guarded change; None when `m` changed meanwhile.
    async fn apply(
        self,
        state: &AppState,
        m: &Message,
        actor: &Actor,
        reason: &str,
    ) -> Result<Option<Message>, ApiError> {
        Ok(match self {
            Self::Reverify => {
                let t = Transition {
                    id: m.id,
                    from: MessageStatus::VerifyFailed,
                    version: m.version,
                    to: MessageStatus::Prepared,
                    send_lease: state.send_lease,
                    verify_attempt: false,
                    error: None,
                    actor: actor.clone(),
                    reason: reason.to_string(),
                };
                state.store.transition(&t).await?
            }
            Self::Redeliver => {
                state
                    .store
                    .redeliver(m.id, m.version, actor, reason)
                    .await?
            }
        })
    }
}

async fn act_on_one(
    state: &AppState,
    id: &str,
    headers: &HeaderMap,
    req: ActionRequest,
    repair: Repair,
) -> Result<axum::Json<MessageView>, ApiError> {
    let actor = operator(headers)?;
    let reason = reason_of(req.reason)?;
    let m = message(state, id).await?;
    if !repair.applies_to(&m) {
        return Err(not_now(&m, repair.name(), repair.allowed()));
    }
    match repair.apply(state, &m, &actor, &reason).await? {
        Some(done) => Ok(axum::Json(done.view())),
        None => Err(lost_race(state, m.id, repair.name(), repair.allowed()).await),
    }
}

async fn act_in_bulk(
    state: &AppState,
    headers: &HeaderMap,
    req: BulkRequest,
    repair: Repair,
) -> Result<axum::Json<BulkResult>, ApiError> {
    let actor = operator(headers)?;
    let reason = reason_of(req.reason.clone())?;
    let mut filter = bulk_filter(&req)?;
    if !repair.narrow(&mut filter) {
        return Ok(axum::Json(BulkResult {
            matched: 0,
            changed: 0,
        }));
    }
    let ids = matching_ids(state, &filter).await?;
    let mut changed = 0;
    if !req.dry_run {
        for id in &ids {
            // Each row under its own guard: one changed meanwhile is left alone.
            let Some(m) = state.store.find_message_by_id(*id).await? else {
                continue;
            };
            if repair.applies_to(&m) {
                changed += u64::from(repair.apply(state, &m, &actor, &reason).await?.is_some());
            }
        }
    }
    Ok(axum::Json(BulkResult {
        matched: ids.len() as u64,
        changed,
    }))
}

/// `POST /v1/admin/messages/reverify` and `…/redeliver`.
#[derive(Debug, Deserialize, ToSchema)]
pub(crate) struct BulkRequest {
    /// The list's filters (`status`, `send_status`, `biz_id`, `topic`,
    /// `created_after`, `created_before`), as strings.
    #[serde(default)]
    #[schema(value_type = Object)]
    filter: BTreeMap<String, serde_json::Value>,
    /// Why; required, kept in each message's audit trail.
    reason: Option<String>,
    /// Count only; change nothing.
    #[serde(default)]
    dry_run: bool,
}

/// What a bulk action did.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct BulkResult {
    /// Messages the filter matched that the action applies to.
    matched: u64,
    /// Of those, the ones this call changed (0 on a dry run); the rest were
    /// changed by someone else meanwhile and left as they are.
    changed: u64,
}

/// The filter of a bulk request, checked like the list's.
fn bulk_filter(req: &BulkRequest) -> Result<MessageFilter, ApiError> {
    let mut params = BTreeMap::new();
    for (k, v) in &req.filter {
        if k == "limit" || k == "cursor" {
            return Err(bad(format!(
                "{k} is for the list; a bulk action takes every match"
            )));
        }
        let v = v
            .as_str()
            .ok_or_else(|| bad(format!("filter.{k} must be a string")))?;
        params.insert(k.clone(), v.to_string());
    }
    Ok(list_request(&params)?.0)
}

/// Every id `filter` matches, oldest first.
async fn matching_ids(state: &AppState, filter: &MessageFilter) -> Result<Vec<u64>, ApiError> {
    let mut ids = Vec::new();
    let mut before = None;
    loop {
        let page = state.store.list_messages(filter, MAX_LIMIT, before).await?;
        ids.extend(page.iter().map(|m| m.id));
        if page.len() < MAX_LIMIT as usize {
            break;
        }
        before = page.last().map(|m| m.id);
    }
    ids.reverse();
    Ok(ids)
}

/// Re-verifies every VERIFY_FAILED message the filter matches.
#[utoipa::path(post, path = "/v1/admin/messages/reverify", tag = "admin",
    params(("x-trustmsg-operator" = Option<String>, Header, description = "Who acts, for the audit trail (default admin)")),
    request_body = BulkRequest,
    responses(
        (status = 200, description = "How many matched and how many this call changed", body = BulkResult),
        (status = 400, description = "No reason, or a bad filter or operator name", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn bulk_reverify(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(req): Json<BulkRequest>,
) -> Result<axum::Json<BulkResult>, ApiError> {
    act_in_bulk(&state, &headers, req, Repair::Reverify).await
}

/// Redelivers every SEND_FAILED message the filter matches.
#[utoipa::path(post, path = "/v1/admin/messages/redeliver", tag = "admin",
    params(("x-trustmsg-operator" = Option<String>, Header, description = "Who acts, for the audit trail (default admin)")),
    request_body = BulkRequest,
    responses(
        (status = 200, description = "How many matched and how many this call changed", body = BulkResult),
        (status = 400, description = "No reason, or a bad filter or operator name", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn bulk_redeliver(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(req): Json<BulkRequest>,
) -> Result<axum::Json<BulkResult>, ApiError> {
    act_in_bulk(&state, &headers, req, Repair::Redeliver).await
}

fn summary_view(s: ProducerSummary, now: DateTime<Utc>) -> ProducerSummaryView {
    let age = |t: Option<DateTime<Utc>>| {
        t.map(|t| u64::try_from((now - t).num_milliseconds()).unwrap_or(0))
    };
    ProducerSummaryView {
        oldest_prepared_age_ms: age(s.oldest_prepared_at),
        oldest_pending_send_age_ms: age(s.oldest_pending_send_at),
        biz_id: s.biz_id,
        by_status: s.by_status,
        by_send_status: s.by_send_status,
        oldest_prepared_at: s.oldest_prepared_at,
        oldest_pending_send_at: s.oldest_pending_send_at,
    }
}

/// Per producer: counts by state, and how long the oldest waiting messages have waited.
#[utoipa::path(get, path = "/v1/admin/summary", tag = "admin",
    responses(
        (status = 200, description = "Every producer with messages", body = Summary),
        (status = 403, description = "Not the admin token", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn summary(
    State(state): State<AppState>,
) -> Result<axum::Json<Summary>, ApiError> {
    let now = state.store.now().await?;
    let producers = state
        .store
        .summary()
        .await?
        .into_iter()
        .map(|s| summary_view(s, now))
        .collect();
    Ok(axum::Json(Summary { producers, at: now }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_and_anything_else_is_refused() {
        assert_eq!(cursor_id(&cursor_of(42)).unwrap(), 42);
        for bad in [
            "42",
            "djE6",
            "djE6eA",
            "!!",
            &URL_SAFE_NO_PAD.encode("v2:42"),
        ] {
            assert!(cursor_id(bad).is_err(), "{bad}");
        }
    }
}
