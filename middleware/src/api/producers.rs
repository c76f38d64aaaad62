//! The producer registry (admin token): `PUT/GET/DELETE /v1/producers/{biz_id}`,
//! `POST /v1/producers/{biz_id}/rotate-token`,
//! `POST /v1/producers/{biz_id}/reveal-signing-secret` and `GET /v1/producers` (all).
//!
//! Creating a producer issues its bearer token and its check-back signing
//! secret. The token is shown once (trustmsg keeps only its hash); the signing
//! secret is kept, because trustmsg signs every check-back call with it, but
//! it is shown only in the answers to creation and token rotation (the
//! moments an operator provisions the producer) and to an explicit reveal,
//! which is logged with who asked; reads and lists never carry it.
//!
//! A registration's `topics` is its allow-list, checked at every prepare
//! against the cached registration ([`crate::registry`]): an update reaches
//! this instance at once and other instances within `--producer-cache-ttl`.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::from_fn_with_state;
use axum::response::IntoResponse;
use axum::routing::{get, post, put};
use axum::Router;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rand::Rng;
use trustmsg_verify_api::admin::OperatorHeader;
use trustmsg_verify_api::{
    webhook, ErrorBody, ProducerList, ProducerSettings, ProducerView, SigningSecret,
};

use super::admin::act::operator;
use super::auth::{self, hash_token, new_producer_token};
use super::error::ApiError;
use super::{AppState, Json};
use crate::intake::validate;
use crate::store::{Producer, ProducerRecord};

/// Routes under `/v1/producers`, admin token only (checked before any body is read).
pub(crate) fn router(state: &AppState) -> Router<AppState> {
    Router::new()
        .route(
            "/v1/producers/{biz_id}",
            put(put_producer).get(get_producer).delete(delete_producer),
        )
        .route("/v1/producers", get(list_producers))
        .route("/v1/producers/{biz_id}/rotate-token", post(rotate_token))
        .route(
            "/v1/producers/{biz_id}/reveal-signing-secret",
            post(reveal_signing_secret),
        )
        .route_layer(from_fn_with_state(state.clone(), auth::admin_only))
}

/// A registration as shown; `issued` (creation, rotation) carries the new
/// token and the signing secret, every other view neither.
fn view(p: &Producer, issued: Option<String>) -> ProducerView {
    ProducerView {
        biz_id: p.biz_id.clone(),
        verify_url: p.verify_url.clone(),
        verify_timeout_ms: p.verify_timeout_ms,
        first_verify_after_ms: p.first_verify_after_ms,
        max_verify_attempts: p.max_verify_attempts,
        topics: p.topics.clone(),
        topics_missing: p.topics.is_none(),
        ordered: p.ordered,
        signing_secret: issued.as_ref().map(|_| p.signing_secret.clone()),
        token: issued,
        created_at: p.created_at,
        updated_at: p.updated_at,
    }
}

fn new_signing_secret() -> String {
    let mut key = [0u8; 32];
    rand::rng().fill_bytes(&mut key);
    format!("{}{}", webhook::SECRET_PREFIX, STANDARD.encode(key))
}

fn millis(d: std::time::Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

fn check_range(name: &str, v: u32, min: u32, max: u32) -> Result<(), ApiError> {
    if (min..=max).contains(&v) {
        Ok(())
    } else {
        Err(ApiError::invalid(
            "invalid_producer",
            format!("{name} must be between {min} and {max} (got {v})"),
        ))
    }
}

/// Creates or updates a producer registration.
#[utoipa::path(put, path = "/v1/producers/{biz_id}", tag = "producers",
    params(("biz_id" = String, Path, description = "The producer's id: 1 to 64 of A-Z a-z 0-9 . _ -", min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9._-]{1,64}$")),
    request_body = ProducerSettings,
    responses(
        (status = 201, description = "Created; the response carries the token (shown once) and the signing secret", body = ProducerView),
        (status = 200, description = "Updated (the whole registration, `topics` too, is replaced); token and signing secret unchanged and not shown", body = ProducerView),
        (status = 400, description = "Invalid settings (`invalid_topics`: a bad allow-list; `topics_required`: none under `--require-producer-topics`), an unknown field, or a check-back URL the address policy refuses", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 403, description = "Not the admin token", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn put_producer(
    State(state): State<AppState>,
    Path(biz_id): Path<String>,
    Json(settings): Json<ProducerSettings>,
) -> Result<(StatusCode, axum::Json<ProducerView>), ApiError> {
    validate::biz_id(&biz_id)?;
    match &settings.topics {
        Some(list) => validate::topic_allow_list(list)?,
        None if state.intake.limits.require_producer_topics => {
            return Err(ApiError::invalid(
                "topics_required",
                format!(
                    "this service runs with --require-producer-topics: give producer {biz_id:?} \
                     the topics it may prepare messages for, e.g. \"topics\": [\"orders\", \
                     \"shop.*\"] (exact names or prefixes ending in `*`; [\"*\"] allows any \
                     topic explicitly)"
                ),
            ))
        }
        None => {}
    }
    let url = url::Url::parse(&settings.verify_url).map_err(|e| {
        ApiError::invalid(
            "invalid_verify_url",
            format!("verify_url {:?} is not a URL: {e}", settings.verify_url),
        )
    })?;
    state
        .address_policy
        .check_url(&url)
        .await
        .map_err(|why| ApiError::invalid("invalid_verify_url", why.to_string()))?;
    let defaults = &state.producer_defaults;
    let record_settings = (
        settings
            .verify_timeout_ms
            .unwrap_or_else(|| millis(defaults.verify_timeout)),
        settings
            .first_verify_after_ms
            .unwrap_or_else(|| millis(defaults.first_verify_after)),
        settings
            .max_verify_attempts
            .unwrap_or(defaults.max_verify_attempts),
    );
    let max_timeout_ms = millis(defaults.max_verify_timeout);
    check_range("verify_timeout_ms", record_settings.0, 10, max_timeout_ms)?;
    check_range("first_verify_after_ms", record_settings.1, 0, 86_400_000)?;
    check_range("max_verify_attempts", record_settings.2, 1, 10_000)?;

    let token = new_producer_token(&biz_id);
    let record = ProducerRecord {
        biz_id: biz_id.clone(),
        verify_url: url.to_string(),
        verify_timeout_ms: record_settings.0,
        first_verify_after_ms: record_settings.1,
        max_verify_attempts: record_settings.2,
        token_hash: hash_token(&token),
        signing_secret: new_signing_secret(),
        topics: settings.topics,
        ordered: settings.ordered,
    };
    // An existing registration keeps its token hash and secret (the upsert
    // does not touch them), so "was it created" is "does it hold our hash".
    let stored = state.store.upsert_producer(&record).await?;
    state.registry.invalidate(&biz_id).await;
    if stored.topics.is_none() {
        tracing::warn!(
            biz_id,
            "producer registered without a topic allow-list: it may prepare messages for any topic"
        );
    }
    if stored.token_hash == record.token_hash {
        tracing::info!(biz_id, "producer registered");
        Ok((StatusCode::CREATED, axum::Json(view(&stored, Some(token)))))
    } else {
        tracing::info!(biz_id, "producer updated");
        Ok((StatusCode::OK, axum::Json(view(&stored, None))))
    }
}

/// Shows a producer registration (never its token or signing secret).
#[utoipa::path(get, path = "/v1/producers/{biz_id}", tag = "producers",
    params(("biz_id" = String, Path, description = "The producer's id: 1 to 64 of A-Z a-z 0-9 . _ -", min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9._-]{1,64}$")),
    responses(
        (status = 200, description = "The registration", body = ProducerView),
        (status = 404, description = "No such producer", body = ErrorBody)
    ),
    security(("admin" = [])))]
pub(crate) async fn get_producer(
    State(state): State<AppState>,
    Path(biz_id): Path<String>,
) -> Result<axum::Json<ProducerView>, ApiError> {
    validate::biz_id(&biz_id)?;
    let p = state
        .store
        .find_producer(&biz_id)
        .await?
        .ok_or_else(|| unknown(&biz_id))?;
    Ok(axum::Json(view(&p, None)))
}

/// Every registration, by biz_id (their tokens and signing secrets are not shown).
#[utoipa::path(get, path = "/v1/producers", tag = "producers",
    responses(
        (status = 200, description = "Every registration", body = ProducerList),
        (status = 403, description = "Not the admin token", body = ErrorBody)
    ),
    security(("admin" = [])))]
pub(crate) async fn list_producers(
    State(state): State<AppState>,
) -> Result<axum::Json<ProducerList>, ApiError> {
    let items = state.store.list_producers().await?;
    Ok(axum::Json(ProducerList {
        items: items.iter().map(|p| view(p, None)).collect(),
    }))
}

/// Deletes a producer registration; its token stops working.
#[utoipa::path(delete, path = "/v1/producers/{biz_id}", tag = "producers",
    params(("biz_id" = String, Path, description = "The producer's id: 1 to 64 of A-Z a-z 0-9 . _ -", min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9._-]{1,64}$")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such producer", body = ErrorBody)
    ),
    security(("admin" = [])))]
pub(crate) async fn delete_producer(
    State(state): State<AppState>,
    Path(biz_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    validate::biz_id(&biz_id)?;
    let deleted = state.store.delete_producer(&biz_id).await?;
    state.registry.invalidate(&biz_id).await;
    if deleted {
        tracing::info!(biz_id, "producer deleted");
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(unknown(&biz_id))
    }
}

/// Issues a new bearer token; the old one stops working. The answer carries
/// the token (shown once) and the signing secret.
#[utoipa::path(post, path = "/v1/producers/{biz_id}/rotate-token", tag = "producers",
    params(("biz_id" = String, Path, description = "The producer's id: 1 to 64 of A-Z a-z 0-9 . _ -", min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9._-]{1,64}$")),
    responses((status = 200, description = "The response carries the new token and the signing secret", body = ProducerView),
        (status = 404, description = "No such producer", body = ErrorBody)),
    security(("admin" = [])))]
pub(crate) async fn rotate_token(
    State(state): State<AppState>,
    Path(biz_id): Path<String>,
) -> Result<axum::Json<ProducerView>, ApiError> {
    validate::biz_id(&biz_id)?;
    let token = new_producer_token(&biz_id);
    if !state
        .store
        .set_producer_token(&biz_id, &hash_token(&token))
        .await?
    {
        return Err(unknown(&biz_id));
    }
    state.registry.invalidate(&biz_id).await;
    let p = state
        .store
        .find_producer(&biz_id)
        .await?
        .ok_or_else(|| unknown(&biz_id))?;
    tracing::info!(biz_id, "producer token rotated");
    Ok(axum::Json(view(&p, Some(token))))
}

/// Shows a producer's check-back signing secret, for an operator who has to
/// give it to the producer again. Logged (who asked, never the secret).
#[utoipa::path(post, path = "/v1/producers/{biz_id}/reveal-signing-secret", tag = "producers",
    params(("biz_id" = String, Path, description = "The producer's id: 1 to 64 of A-Z a-z 0-9 . _ -", min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9._-]{1,64}$"),
        OperatorHeader),
    responses((status = 200, description = "The signing secret (not cacheable)", body = SigningSecret),
        (status = 400, description = "A bad operator name", body = ErrorBody),
        (status = 404, description = "No such producer", body = ErrorBody)),
    security(("admin" = [])))]
pub(crate) async fn reveal_signing_secret(
    State(state): State<AppState>,
    Path(biz_id): Path<String>,
    headers: HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    validate::biz_id(&biz_id)?;
    let actor = operator(&headers)?;
    let p = state
        .store
        .find_producer(&biz_id)
        .await?
        .ok_or_else(|| unknown(&biz_id))?;
    tracing::info!(biz_id, %actor, "producer signing secret revealed");
    Ok((
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(SigningSecret {
            biz_id: p.biz_id,
            signing_secret: p.signing_secret,
        }),
    ))
}

fn unknown(biz_id: &str) -> ApiError {
    ApiError::not_found(
        "producer_not_found",
        format!("no producer {biz_id:?} is registered"),
    )
}
