//! The consumption ledger's consumer API: `POST /v1/consumptions/begin` and
//! `POST /v1/consumptions/finish`, with a consumer group's token (its own
//! group only) or the admin token.
//!
//! A consumer calls begin with the record's `trustmsg-message-id` before it
//! processes a record, and does the work only on `go`; then it calls finish.
//! Begin runs in one transaction holding the consumption's row lock (see the
//! store's `sql/ledger.rs`), so two deliveries of one message begun at once
//! get one `go`. A delivery that neither finishes nor is taken over within
//! the group's `in_progress_timeout_ms` raises `consumption_stuck` (the
//! ledger watch, [`crate::workers::stuck_consumptions`]); a failure that makes `max_failures`
//! raises `consumption_failing`, in the finish's transaction.
//!
//! A repeated finish: the same outcome again, on a consumption that is
//! already so (`done` and ok, `failed` and not ok) answers 200 with the
//! state and changes nothing (a consumer that lost the first answer may
//! retry); the other outcome on a finished consumption is a 409 (begin
//! again first). `trustmsg_consumptions_total{group, outcome}` counts each
//! begin (`go`, `in_progress`, `skip`) and each finish that changed a row
//! (`done`, `failed`).

use axum::extract::State;
use axum::middleware::from_fn_with_state;
use axum::routing::post;
use axum::{Extension, Router};
use trustmsg_verify_api::consumers::{
    BeginRequest, BeginResponse, BeginState, FinishRequest, FinishResponse,
};
use trustmsg_verify_api::ErrorBody;

use super::auth::{self, Consumer};
use super::error::ApiError;
use super::{AppState, Json};
use crate::intake::validate;
use crate::store::{Began, Finished};

/// The longest `error` a finish takes, in characters.
pub(crate) const MAX_FINISH_ERROR: usize = 2000;

/// Routes under `/v1/consumptions`, a group's token or the admin token
/// (checked before any body is read).
pub(crate) fn router(state: &AppState) -> Router<AppState> {
    Router::new()
        .route("/v1/consumptions/begin", post(begin))
        .route("/v1/consumptions/finish", post(finish))
        .route_layer(from_fn_with_state(
            state.clone(),
            auth::authenticate_consumer,
        ))
}

fn count(group: &str, outcome: &'static str) {
    metrics::counter!("trustmsg_consumptions_total", "group" => group.to_string(), "outcome" => outcome)
        .increment(1);
}

fn no_message(id: u64) -> ApiError {
    ApiError::not_found("message_not_found", format!("no message {id}"))
}

/// Asks whether to process a message.
#[utoipa::path(post, path = "/v1/consumptions/begin", tag = "consumers",
    request_body = BeginRequest,
    responses(
        (status = 200, description = "`go`: process it, then finish; `in_progress`: another delivery holds it (since `since`); `done`: skip it", body = BeginResponse),
        (status = 400, description = "A malformed field (the message names it)", body = ErrorBody),
        (status = 401, description = "Missing, unknown or revoked token", body = ErrorBody),
        (status = 403, description = "A token of another consumer group", body = ErrorBody),
        (status = 404, description = "No such message (`message_not_found`) or consumer group (`consumer_group_not_found`)", body = ErrorBody),
    ),
    security(("consumer_group" = []), ("admin" = [])))]
pub(crate) async fn begin(
    State(state): State<AppState>,
    Extension(who): Extension<Consumer>,
    Json(req): Json<BeginRequest>,
) -> Result<axum::Json<BeginResponse>, ApiError> {
    validate::group(&req.group)?;
    let group = who.group(&state, &req.group).await?;
    let id = req.message_id;
    let answer = match state.store.begin_consumption(&group, id).await? {
        Began::UnknownMessage => return Err(no_message(id)),
        Began::Go(c) => {
            count(&group.name, "go");
            BeginResponse {
                state: BeginState::Go,
                attempts: c.attempts,
                since: None,
            }
        }
        Began::InProgress(c) => {
            count(&group.name, "in_progress");
            BeginResponse {
                state: BeginState::InProgress,
                attempts: c.attempts,
                since: Some(c.last_began_at),
            }
        }
        Began::Done(c) => {
            count(&group.name, "skip");
            BeginResponse {
                state: BeginState::Done,
                attempts: c.attempts,
                since: None,
            }
        }
    };
    Ok(axum::Json(answer))
}

/// Says how processing a begun message went.
#[utoipa::path(post, path = "/v1/consumptions/finish", tag = "consumers",
    request_body = FinishRequest,
    responses(
        (status = 200, description = "Recorded: the consumption's state now (a repeat of the finish that made it so changes nothing)", body = FinishResponse),
        (status = 400, description = "A malformed field (the message names it), or `error` with `ok: true`", body = ErrorBody),
        (status = 401, description = "Missing, unknown or revoked token", body = ErrorBody),
        (status = 403, description = "A token of another consumer group", body = ErrorBody),
        (status = 404, description = "No such message (`message_not_found`) or consumer group (`consumer_group_not_found`)", body = ErrorBody),
        (status = 409, description = "The group never began this message (`not_begun`), or finished it the other way (`already_finished`): begin first", body = ErrorBody),
    ),
    security(("consumer_group" = []), ("admin" = [])))]
pub(crate) async fn finish(
    State(state): State<AppState>,
    Extension(who): Extension<Consumer>,
    Json(req): Json<FinishRequest>,
) -> Result<axum::Json<FinishResponse>, ApiError> {
    validate::group(&req.group)?;
    if let Some(e) = &req.error {
        if req.ok {
            return Err(ApiError::invalid(
                "invalid_error",
                "error is only for a failed finish: send \"ok\": false with it, or leave it out",
            ));
        }
        let chars = e.chars().count();
        if chars > MAX_FINISH_ERROR {
            return Err(ApiError::invalid(
                "invalid_error",
                format!("error must be at most {MAX_FINISH_ERROR} characters long (got {chars})"),
            ));
        }
    }
    let group = who.group(&state, &req.group).await?;
    let id = req.message_id;
    let finished = state
        .store
        .finish_consumption(&group, id, req.ok, req.error.as_deref())
        .await?;
    match finished {
        Finished::UnknownMessage => Err(no_message(id)),
        Finished::NotBegun => Err(ApiError::conflict(
            "not_begun",
            format!(
                "consumer group {:?} has not begun message {id}: call POST \
                 /v1/consumptions/begin first, and finish only after a `go`",
                group.name
            ),
        )),
        Finished::Conflict(c) => Err(ApiError::conflict(
            "already_finished",
            format!(
                "consumer group {:?}'s consumption of message {id} is already {}: begin it \
                 again before finishing it {}",
                group.name,
                c.state.as_str(),
                if req.ok { "ok" } else { "as failed" }
            ),
        )),
        Finished::Recorded { row, changed } => {
            if changed {
                count(&group.name, row.state.as_str());
            }
            Ok(axum::Json(FinishResponse {
                state: row.state,
                attempts: row.attempts,
            }))
        }
    }
}
