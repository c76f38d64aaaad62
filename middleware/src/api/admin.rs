//! The operator API, read side (admin token; a producer token gets 403):
//! `GET /v1/admin/messages` (filters, keyset pages, newest first),
//! `GET /v1/admin/messages/{id}` (the message with its payload, headers and
//! audit trail) and `GET /v1/admin/summary` (per producer: counts by state,
//! the oldest waiting message of each kind). Every parameter is checked and
//! a bad one is a 400 that says what is accepted; nothing here writes.

use std::collections::BTreeMap;

use axum::extract::{Path, Query, State};
use axum::middleware::from_fn_with_state;
use axum::routing::get;
use axum::Router;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use chrono::{DateTime, Utc};
use serde::Serialize;
use trustmsg_verify_api::{ErrorBody, MessageStatus, MessageView, SendStatus};
use utoipa::ToSchema;

use super::auth;
use super::error::ApiError;
use super::AppState;
use crate::store::{AuditEntry, MessageFilter, ProducerSummary};

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
    let id: u64 = id.parse().map_err(|_| {
        ApiError::invalid(
            "invalid_id",
            format!("a message id is a whole number (got {id:?})"),
        )
    })?;
    let m = state
        .store
        .find_message_by_id(id)
        .await?
        .ok_or_else(|| ApiError::not_found("message_not_found", format!("no message {id}")))?;
    let audit = state.store.audit_trail(id).await?;
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
    }))
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
