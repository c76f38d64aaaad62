//! The consumer-group registry of the consumption ledger (admin token):
//! `PUT/GET/DELETE /v1/consumer-groups/{group}`, `GET /v1/consumer-groups`
//! and `POST /v1/consumer-groups/{group}/rotate-token`, as the producer
//! registry ([`super::producers`]).
//!
//! Creating a group issues its bearer token (`tc_…`), shown once: trustmsg
//! keeps only its hash. The token may begin and finish consumptions of its
//! own group only ([`super::consumptions`]). A group's `topics` define its
//! lag; `max_failures` and `in_progress_timeout_ms` its alerts. Changes reach
//! this instance's cache at once, other instances within
//! `--producer-cache-ttl`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post, put};
use axum::Router;
use trustmsg_verify_api::consumers::{ConsumerGroupList, ConsumerGroupSettings, ConsumerGroupView};
use trustmsg_verify_api::ErrorBody;

use super::auth::{self, hash_token, new_group_token};
use super::error::ApiError;
use super::{AppState, Json};
use crate::intake::validate;
use crate::store::{ConsumerGroup, ConsumerGroupRecord};

/// `max_failures` when a registration leaves it out.
pub(crate) const DEFAULT_MAX_FAILURES: u32 = 5;
/// `in_progress_timeout_ms` when a registration leaves it out (5 minutes).
pub(crate) const DEFAULT_IN_PROGRESS_TIMEOUT_MS: u32 = 300_000;

/// Routes under `/v1/consumer-groups`, admin token only (checked before any body is read).
pub(crate) fn router(state: &AppState) -> Router<AppState> {
    Router::new()
        .route(
            "/v1/consumer-groups/{group}",
            put(put_group).get(get_group).delete(delete_group),
        )
        .route("/v1/consumer-groups", get(list_groups))
        .route(
            "/v1/consumer-groups/{group}/rotate-token",
            post(rotate_token),
        )
        .route_layer(from_fn_with_state(state.clone(), auth::admin_only))
}

/// A registration as shown; `token` only in the answer that issued it.
fn view(g: &ConsumerGroup, token: Option<String>) -> ConsumerGroupView {
    ConsumerGroupView {
        group: g.name.clone(),
        topics: g.topics.clone(),
        max_failures: g.max_failures,
        in_progress_timeout_ms: g.in_progress_timeout_ms,
        token,
        created_at: g.created_at,
        updated_at: g.updated_at,
    }
}

fn check_range(name: &str, v: u32, min: u32, max: u32) -> Result<(), ApiError> {
    if (min..=max).contains(&v) {
        Ok(())
    } else {
        Err(ApiError::invalid(
            "invalid_consumer_group",
            format!("{name} must be between {min} and {max} (got {v})"),
        ))
    }
}

/// Creates or updates a consumer group.
#[utoipa::path(put, path = "/v1/consumer-groups/{group}", tag = "consumers",
    params(("group" = String, Path, description = "The group's name: 1 to 64 of A-Z a-z 0-9 . _ -", min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9._-]{1,64}$")),
    request_body = ConsumerGroupSettings,
    responses(
        (status = 201, description = "Created; the response carries the group's token (shown once)", body = ConsumerGroupView),
        (status = 200, description = "Updated (topics and limits replaced); the token is unchanged and not shown", body = ConsumerGroupView),
        (status = 400, description = "Invalid settings (`invalid_topics`, `invalid_consumer_group`), a bad name or an unknown field", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 403, description = "Not the admin token", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn put_group(
    State(state): State<AppState>,
    Path(group): Path<String>,
    Json(settings): Json<ConsumerGroupSettings>,
) -> Result<(StatusCode, axum::Json<ConsumerGroupView>), ApiError> {
    validate::group(&group)?;
    validate::topic_allow_list(&settings.topics)?;
    let max_failures = settings.max_failures.unwrap_or(DEFAULT_MAX_FAILURES);
    check_range("max_failures", max_failures, 1, 1000)?;
    let timeout = settings
        .in_progress_timeout_ms
        .unwrap_or(DEFAULT_IN_PROGRESS_TIMEOUT_MS);
    check_range("in_progress_timeout_ms", timeout, 1000, 86_400_000)?;
    let token = new_group_token(&group);
    let record = ConsumerGroupRecord {
        name: group.clone(),
        topics: settings.topics,
        token_hash: hash_token(&token),
        max_failures,
        in_progress_timeout_ms: timeout,
    };
    // An existing group keeps its token hash (the upsert does not touch it),
    // so "was it created" is "does it hold our hash".
    let stored = state.store.upsert_consumer_group(&record).await?;
    state.groups.invalidate(&group).await;
    if stored.token_hash == record.token_hash {
        tracing::info!(group, "consumer group registered");
        Ok((StatusCode::CREATED, axum::Json(view(&stored, Some(token)))))
    } else {
        tracing::info!(group, "consumer group updated");
        Ok((StatusCode::OK, axum::Json(view(&stored, None))))
    }
}

/// Shows a consumer group (never its token).
#[utoipa::path(get, path = "/v1/consumer-groups/{group}", tag = "consumers",
    params(("group" = String, Path, description = "The group's name: 1 to 64 of A-Z a-z 0-9 . _ -", min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9._-]{1,64}$")),
    responses(
        (status = 200, description = "The registration", body = ConsumerGroupView),
        (status = 400, description = "A bad name", body = ErrorBody),
        (status = 403, description = "Not the admin token", body = ErrorBody),
        (status = 404, description = "No such group", body = ErrorBody)
    ),
    security(("admin" = [])))]
pub(crate) async fn get_group(
    State(state): State<AppState>,
    Path(group): Path<String>,
) -> Result<axum::Json<ConsumerGroupView>, ApiError> {
    validate::group(&group)?;
    let g = state
        .store
        .find_consumer_group(&group)
        .await?
        .ok_or_else(|| unknown(&group))?;
    Ok(axum::Json(view(&g, None)))
}

/// Every consumer group, by name (their tokens are not shown).
#[utoipa::path(get, path = "/v1/consumer-groups", tag = "consumers",
    responses(
        (status = 200, description = "Every consumer group", body = ConsumerGroupList),
        (status = 403, description = "Not the admin token", body = ErrorBody)
    ),
    security(("admin" = [])))]
pub(crate) async fn list_groups(
    State(state): State<AppState>,
) -> Result<axum::Json<ConsumerGroupList>, ApiError> {
    let items = state.store.list_consumer_groups().await?;
    Ok(axum::Json(ConsumerGroupList {
        items: items.iter().map(|g| view(g, None)).collect(),
    }))
}

/// Deletes a consumer group; its token stops working. Its ledger rows stay
/// with their messages (retention takes them): a group registered again
/// under the name goes on with them.
#[utoipa::path(delete, path = "/v1/consumer-groups/{group}", tag = "consumers",
    params(("group" = String, Path, description = "The group's name: 1 to 64 of A-Z a-z 0-9 . _ -", min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9._-]{1,64}$")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "A bad name", body = ErrorBody),
        (status = 403, description = "Not the admin token", body = ErrorBody),
        (status = 404, description = "No such group", body = ErrorBody)
    ),
    security(("admin" = [])))]
pub(crate) async fn delete_group(
    State(state): State<AppState>,
    Path(group): Path<String>,
) -> Result<StatusCode, ApiError> {
    validate::group(&group)?;
    let deleted = state.store.delete_consumer_group(&group).await?;
    state.groups.invalidate(&group).await;
    if deleted {
        tracing::info!(group, "consumer group deleted");
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(unknown(&group))
    }
}

/// Issues a new token for the group; the old one stops working. The answer
/// carries the token (shown once).
#[utoipa::path(post, path = "/v1/consumer-groups/{group}/rotate-token", tag = "consumers",
    params(("group" = String, Path, description = "The group's name: 1 to 64 of A-Z a-z 0-9 . _ -", min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9._-]{1,64}$")),
    responses(
        (status = 200, description = "The response carries the new token", body = ConsumerGroupView),
        (status = 400, description = "A bad name", body = ErrorBody),
        (status = 403, description = "Not the admin token", body = ErrorBody),
        (status = 404, description = "No such group", body = ErrorBody)
    ),
    security(("admin" = [])))]
pub(crate) async fn rotate_token(
    State(state): State<AppState>,
    Path(group): Path<String>,
) -> Result<axum::Json<ConsumerGroupView>, ApiError> {
    validate::group(&group)?;
    let token = new_group_token(&group);
    if !state
        .store
        .set_consumer_group_token(&group, &hash_token(&token))
        .await?
    {
        return Err(unknown(&group));
    }
    state.groups.invalidate(&group).await;
    let g = state
        .store
        .find_consumer_group(&group)
        .await?
        .ok_or_else(|| unknown(&group))?;
    tracing::info!(group, "consumer group token rotated");
    Ok(axum::Json(view(&g, Some(token))))
}

fn unknown(group: &str) -> ApiError {
    ApiError::not_found(
        "consumer_group_not_found",
        format!("no consumer group {group:?} is registered"),
    )
}
