//! The operator API (admin token; a producer token gets 403): [`read`] what
//! operators look at, [`act`] what they change, [`alerts`] the alert outbox, [`flow`] the flow per minute, [`storage`] the large tables' sizes,
//! [`outbox`] the producers' outbox tables this instance relays (and the
//! retry or give-up of a failed row). This file holds their routes
//! and what both need: the message an id names, and the list's filters.
//!
//! Every parameter is checked and a bad one is a 400 that says what is
//! accepted. The wire types are `trustmsg_verify_api::admin`'s.

pub(crate) mod act;
pub(crate) mod alerts;
pub(crate) mod flow;
pub(crate) mod outbox;
pub(crate) mod read;
pub(crate) mod storage;

use std::collections::BTreeMap;

use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use axum::Router;
use chrono::{DateTime, Utc};
use trustmsg_verify_api::{MessageStatus, SendStatus};

use super::auth;
use super::error::ApiError;
use super::AppState;
use crate::store::{Message, MessageFilter};

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

/// Routes under `/v1/admin`, admin token only, but for the bulk actions.
pub(crate) fn router(state: &AppState) -> Router<AppState> {
    Router::new()
        .route("/v1/admin/messages", get(read::list_messages))
        .route("/v1/admin/messages/{id}", get(read::get_message))
        .route("/v1/admin/messages/{id}/resolve", post(act::resolve))
        .route("/v1/admin/messages/{id}/reverify", post(act::reverify))
        .route("/v1/admin/messages/{id}/redeliver", post(act::redeliver))
        .route("/v1/admin/messages/{id}/skip", post(act::skip))
        .route("/v1/admin/messages/{id}/send-now", post(act::send_now))
        .route("/v1/admin/summary", get(read::summary))
        .route("/v1/admin/consumer-groups", get(read::consumer_groups))
        .route("/v1/admin/flow", get(flow::flow))
        .route("/v1/admin/storage", get(storage::storage))
        .route("/v1/admin/alerts", get(alerts::list_alerts))
        .route("/v1/admin/submit/waiting", get(alerts::list_waiting))
        .route("/v1/admin/outbox-sources", get(outbox::list_sources))
        .route(
            "/v1/admin/outbox-sources/{biz_id}/rows",
            get(outbox::list_rows),
        )
        .route(
            "/v1/admin/outbox-sources/{biz_id}/rows/{id}/retry",
            post(outbox::retry),
        )
        .route(
            "/v1/admin/outbox-sources/{biz_id}/rows/{id}/give-up",
            post(outbox::give_up),
        )
        .route_layer(from_fn_with_state(state.clone(), auth::admin_only))
}

/// The bulk actions, admin token only: not under the request deadline as a
/// whole, each of their chunks is (see [`act`]).
pub(crate) fn bulk_router(state: &AppState) -> Router<AppState> {
    Router::new()
        .route("/v1/admin/messages/reverify", post(act::bulk_reverify))
        .route("/v1/admin/messages/redeliver", post(act::bulk_redeliver))
        .route_layer(from_fn_with_state(state.clone(), auth::admin_only))
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

/// The filter the list's parameters ask for (an empty value is no filter);
/// any parameter the list does not take is refused.
fn filter_of(params: &BTreeMap<String, String>) -> Result<MessageFilter, ApiError> {
    if let Some(unknown) = params.keys().find(|k| !LIST_PARAMS.contains(&k.as_str())) {
        return Err(bad(format!(
            "unknown parameter {unknown:?}; the list takes {}",
            LIST_PARAMS.join(", ")
        )));
    }
    let get = |k: &str| param(params, k);
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
    Ok(MessageFilter {
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
    })
}

/// How many rows a list gives when its request names no `limit`.
const DEFAULT_LIMIT: u32 = 50;

/// A list's `limit`: a whole number from 1 to `max`, [`DEFAULT_LIMIT`] when not given.
pub(super) fn limit_param(params: &BTreeMap<String, String>, max: u32) -> Result<u32, ApiError> {
    let Some(v) = number_param(params, "limit") else {
        return Ok(DEFAULT_LIMIT);
    };
    v.parse::<u32>()
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| {
            ApiError::invalid(
                "invalid_limit",
                format!("limit must be a whole number from 1 to {max} (got {v:?})"),
            )
        })
}

/// A number parameter's value: an empty one is given, and not a number (the
/// document types it as an integer, so `limit=` is refused, not ignored).
fn number_param<'p>(params: &'p BTreeMap<String, String>, name: &str) -> Option<&'p str> {
    params.get(name).map(String::as_str)
}

/// A parameter's value; an empty one is as if it were not given.
fn param<'p>(params: &'p BTreeMap<String, String>, name: &str) -> Option<&'p str> {
    params
        .get(name)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
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
