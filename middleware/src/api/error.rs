//! The API error type: every failure a handler can return, each mapped to an
//! HTTP status and the JSON body `{"error": {"code", "message"}}`.
//!
//! 5xx causes are logged here and never sent to the client. Every 503 carries
//! `Retry-After` ([`RETRY_AFTER_SECS`]): it means "nothing is wrong with the
//! request; try again shortly".

use std::time::Duration;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use trustmsg_verify_api::{ErrorBody, ErrorDetail};

use crate::intake::IntakeError;
use crate::registry::LookupError;
use crate::store::StoreError;

/// What every 503 tells the caller to wait before retrying, in seconds.
pub(crate) const RETRY_AFTER_SECS: u64 = 1;

/// Marks `res` as retryable later: sets `Retry-After` on a 503.
pub(crate) fn with_retry_after(mut res: Response) -> Response {
    if res.status() == StatusCode::SERVICE_UNAVAILABLE {
        res.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    }
    res
}

/// An API failure.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    /// What the intake refuses or fails at (bad input 400, a wrong
    /// credential 401, outside the allow-list 403, not found 404, a
    /// conflict 409, over a limit 413, the store 503 or 500): the one set of
    /// refusals every door shares, with its code.
    #[error(transparent)]
    Refused(#[from] IntakeError),
    /// The body is not JSON: 415.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// Valid credentials, but not for this resource: 403.
    #[error("{0}")]
    Forbidden(String),
    /// The route exists, the method does not: 405.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// Too many requests in flight: 503 with `Retry-After`.
    #[error("{0}")]
    Overloaded(String),
    /// A producer's outbox source database failed or did not answer in
    /// time: 503 naming the source (its URL with the password hidden),
    /// cause logged.
    #[error("the outbox source of producer {biz_id} ({database}) did not answer: {cause}")]
    SourceUnavailable {
        /// The source's producer.
        biz_id: String,
        /// The source's URL as shown (password hidden).
        database: String,
        /// What failed, for the log only.
        cause: String,
    },
    /// The request took longer than `--request-timeout`: 503.
    #[error("no answer within --request-timeout ({})", humantime::format_duration(*.0))]
    Timeout(Duration),
    /// Anything else: 500, cause logged.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// The store failed: 503 (500 for a row that cannot be read), cause logged.
impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        Self::Refused(IntakeError::Store(e))
    }
}

/// Looking up a producer's registration failed in the store: 503, cause logged.
impl From<LookupError> for ApiError {
    fn from(e: LookupError) -> Self {
        Self::Refused(IntakeError::Registry(e))
    }
}

impl ApiError {
    /// A 400 with `code`.
    pub(crate) fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        Self::Refused(IntakeError::invalid(code, message))
    }

    /// A 409 with `code`.
    pub(crate) fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::Refused(IntakeError::conflict(code, message))
    }

    /// A 404 with `code`.
    pub(crate) fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::Refused(IntakeError::not_found(code, message))
    }

    /// No or unknown credentials: 401.
    pub(crate) fn unauthorized(message: String) -> Self {
        Self::Refused(IntakeError::Unauthorized(message))
    }

    /// The body or payload is over a limit: 413.
    pub(crate) fn too_large(message: String) -> Self {
        Self::Refused(IntakeError::TooLarge(message))
    }

    fn parts(&self) -> (StatusCode, &'static str) {
        match self {
            Self::Refused(e) => (refused_status(e), e.code()),
            Self::UnsupportedMediaType(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
            }
            Self::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Self::MethodNotAllowed(_) => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            Self::Overloaded(_) => (StatusCode::SERVICE_UNAVAILABLE, "overloaded"),
            Self::SourceUnavailable { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "outbox_source_unavailable")
            }
            Self::Timeout(_) => (StatusCode::SERVICE_UNAVAILABLE, "request_timeout"),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

/// The HTTP status of an intake refusal.
fn refused_status(e: &IntakeError) -> StatusCode {
    match e {
        IntakeError::Invalid { .. } => StatusCode::BAD_REQUEST,
        IntakeError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
        IntakeError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
        IntakeError::NotAllowed { .. } => StatusCode::FORBIDDEN,
        IntakeError::NotFound { .. } => StatusCode::NOT_FOUND,
        IntakeError::Conflict { .. } => StatusCode::CONFLICT,
        // Retrying reads the same unreadable row: not a "retry later".
        IntakeError::Store(StoreError::Corrupt(_)) => StatusCode::INTERNAL_SERVER_ERROR,
        IntakeError::Store(_) | IntakeError::Registry(_) => StatusCode::SERVICE_UNAVAILABLE,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.parts();
        let message = match &self {
            Self::Refused(IntakeError::Store(StoreError::Corrupt(_))) => {
                tracing::error!(error = %self, "unreadable row while serving a request");
                "internal error: a stored row cannot be read; an operator must look at it"
                    .to_string()
            }
            Self::Refused(IntakeError::Store(_) | IntakeError::Registry(_)) => {
                tracing::error!(error = %self, "store failure while serving a request");
                "the message store is unavailable; retry later".to_string()
            }
            Self::SourceUnavailable {
                biz_id, database, ..
            } => {
                tracing::warn!(error = %self, "an outbox source failed while serving a request");
                format!(
                    "the database of producer {biz_id}'s outbox source ({database}) did not \
                     answer; retry later (its relay retries on its own: see \
                     GET /v1/admin/outbox-sources)"
                )
            }
            Self::Internal(e) => {
                tracing::error!(error = ?e, "internal error while serving a request");
                "internal error; retry later".to_string()
            }
            Self::Timeout(_) => {
                tracing::warn!(error = %self, "request cut off at its deadline");
                format!(
                    "{self}: the message store is slow or unavailable (or the request \
                     body arrived too slowly); retry later (the request may or may not \
                     have taken effect; prepare, commit and rollback are safe to repeat)"
                )
            }
            other => other.to_string(),
        };
        let body = ErrorBody {
            error: ErrorDetail {
                code: code.to_string(),
                message,
            },
        };
        with_retry_after((status, Json(body)).into_response())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every door answers an intake refusal with the same code, and the
    /// Kafka way in retries exactly what the HTTP API answers 503 for.
    #[test]
    fn an_intake_refusal_answers_over_http_with_its_own_code_and_retryability() {
        let refusals = vec![
            IntakeError::invalid("invalid_topic", "t"),
            IntakeError::TooLarge("big".into()),
            IntakeError::Unauthorized("who".into()),
            IntakeError::NotAllowed {
                code: "topic_not_allowed",
                message: "no".into(),
            },
            IntakeError::not_found("message_not_found", "none"),
            IntakeError::conflict("prepare_conflict", "other"),
            IntakeError::Store(StoreError::Db(sqlx::Error::PoolTimedOut)),
            IntakeError::Store(StoreError::Corrupt("bad row".into())),
        ];
        let statuses: Vec<_> = refusals
            .into_iter()
            .map(|e| {
                let (code, transient) = (e.code(), e.is_transient());
                let (status, http_code) = ApiError::from(e).parts();
                assert_eq!(code, http_code);
                assert_eq!(
                    transient,
                    status == StatusCode::SERVICE_UNAVAILABLE,
                    "{code}"
                );
                status.as_u16()
            })
            .collect();
        assert_eq!(statuses, [400, 413, 401, 403, 404, 409, 503, 500]);
    }
}
