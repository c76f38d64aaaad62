//! `GET /v1/admin/alerts`: the alert outbox, newest first, a page at a time,
//! so an operator sees which alerts have not reached the webhook (and why
//! the last POST failed) without SQL; and `GET /v1/admin/submit/waiting`,
//! the commits submitted through Kafka that wait for their prepare, before
//! they are dead-lettered. Nothing here changes anything.

use std::collections::BTreeMap;

use axum::extract::{Query, State};
use trustmsg_verify_api::admin::{
    AlertListQuery, AlertPage, AlertState, WaitingCommitPage, WaitingCommitView, WaitingListQuery,
};
use trustmsg_verify_api::ErrorBody;

use super::read::{cursor_of, page_position};
use super::{bad, number_param, param};
use crate::api::error::ApiError;
use crate::api::AppState;
use crate::store::AlertFilter;

/// The query parameters the list takes.
const PARAMS: [&str; 4] = ["state", "message_id", "limit", "cursor"];

/// Refuses any parameter not in `known`.
pub(super) fn only(params: &BTreeMap<String, String>, known: &[&str]) -> Result<(), ApiError> {
    match params.keys().find(|k| !known.contains(&k.as_str())) {
        Some(unknown) => Err(bad(format!(
            "unknown parameter {unknown:?}; the list takes {}",
            known.join(", ")
        ))),
        None => Ok(()),
    }
}

/// The filter the parameters ask for; any parameter the list does not take
/// is refused.
fn alert_filter(params: &BTreeMap<String, String>) -> Result<AlertFilter, ApiError> {
    only(params, &PARAMS)?;
    let state = param(params, "state")
        .map(|s| {
            AlertState::parse(s).ok_or_else(|| {
                bad(format!(
                    "state must be one of pending, delivered, no_webhook (got {s:?})"
                ))
            })
        })
        .transpose()?;
    let message_id = number_param(params, "message_id")
        .map(|v| {
            // Ids are at most i64's maximum (SQLite stores them signed).
            v.parse::<i64>()
                .ok()
                .and_then(|id| u64::try_from(id).ok())
                .ok_or_else(|| {
                    bad(format!(
                        "message_id must be a whole number from 0 to {} (got {v:?})",
                        i64::MAX
                    ))
                })
        })
        .transpose()?;
    Ok(AlertFilter { state, message_id })
}

/// Lists alerts, newest first, a page at a time.
#[utoipa::path(get, path = "/v1/admin/alerts", tag = "admin",
    params(AlertListQuery),
    responses(
        (status = 200, description = "A page of alerts", body = AlertPage),
        (status = 400, description = "A parameter is not one the list takes, or its value is not", body = ErrorBody),
        (status = 403, description = "Not the admin token", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn list_alerts(
    State(state): State<AppState>,
    Query(params): Query<BTreeMap<String, String>>,
) -> Result<axum::Json<AlertPage>, ApiError> {
    let filter = alert_filter(&params)?;
    let (limit, before) = page_position(&params)?;
    let items = state.store.list_alerts(filter, limit, before).await?;
    let next_cursor = (items.len() == limit as usize)
        .then(|| items.last().map(|a| cursor_of(a.alert_id)))
        .flatten();
    Ok(axum::Json(AlertPage { items, next_cursor }))
}

/// Lists the commits submitted through Kafka that wait for their prepare,
/// oldest first, a page at a time.
#[utoipa::path(get, path = "/v1/admin/submit/waiting", tag = "admin",
    params(WaitingListQuery),
    responses(
        (status = 200, description = "A page of waiting commits", body = WaitingCommitPage),
        (status = 400, description = "A parameter is not one the list takes, or its value is not", body = ErrorBody),
        (status = 403, description = "Not the admin token", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn list_waiting(
    State(state): State<AppState>,
    Query(params): Query<BTreeMap<String, String>>,
) -> Result<axum::Json<WaitingCommitPage>, ApiError> {
    only(&params, &["limit", "cursor"])?;
    let (limit, after) = page_position(&params)?;
    let items: Vec<WaitingCommitView> = state
        .store
        .list_waiting_commits(limit, after.unwrap_or(0))
        .await?
        .into_iter()
        .map(|w| WaitingCommitView {
            id: w.id,
            biz_id: w.biz_id,
            message_key: w.message_key,
            partition: w.partition,
            offset: w.offset,
            attempts: w.attempts,
            received_at: w.received_at,
            give_up_at: w.give_up_at,
        })
        .collect();
    let next_cursor = (items.len() == limit as usize)
        .then(|| items.last().map(|w| cursor_of(w.id)))
        .flatten();
    Ok(axum::Json(WaitingCommitPage { items, next_cursor }))
}
