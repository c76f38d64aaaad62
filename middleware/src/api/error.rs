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
    /// Bad input: 400 with a specific code.
    #[error("{message}")]
    Invalid {
        /// Machine-readable code, e.g. `invalid_topic`.
        code: &'static str,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// The body or payload is over a limit: 413.
    #[error("{0}")]
    TooLarge(String),
    /// The body is not JSON: 415.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// No or unknown credentials: 401.
    #[error("{0}")]
    Unauthorized(String),
    /// Valid credentials, but not for this resource: 403.
    #[error("{0}")]
    Forbidden(String),
    /// Valid credentials and a valid request, but outside what the caller
    /// may do (a topic outside the producer's allow-list): 403 with a code.
    #[error("{message}")]
    NotAllowed {
        /// Machine-readable code, e.g. `topic_not_allowed`.
        code: &'static str,
        /// What is not allowed and what is.
        message: String,
    },
    /// 404.
    #[error("{message}")]
    NotFound {
        /// Machine-readable code.
        code: &'static str,
        /// What was not found.
        message: String,
    },
    /// The route exists, the method does not: 405.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// The request contradicts what is stored: 409.
    #[error("{message}")]
    Conflict {
        /// Machine-readable code.
        code: &'static str,
        /// What it conflicts with.
        message: String,
    },
    /// Too many requests in flight: 503 with `Retry-After`.
    #[error("{0}")]
    Overloaded(String),
    /// The store failed: 503 (500 for a row that cannot be read), cause logged.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Looking up a producer's registration failed in the store: 503, cause logged.
    #[error(transparent)]
    Registry(#[from] LookupError),
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

impl ApiError {
    /// A 400 with `code`.
    pub(crate) fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        Self::Invalid {
            code,
            message: message.into(),
        }
    }

    /// A 409 with `code`.
    pub(crate) fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::Conflict {
            code,
            message: message.into(),
        }
    }

    /// A 404 with `code`.
    pub(crate) fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::NotFound {
            code,
            message: message.into(),
        }
    }

    fn parts(&self) -> (StatusCode, &'static str) {
        match self {
            Self::Invalid { code, .. } => (StatusCode::BAD_REQUEST, code),
            Self::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            Self::UnsupportedMediaType(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
            }
            Self::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            Self::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Self::NotAllowed { code, .. } => (StatusCode::FORBIDDEN, code),
            Self::NotFound { code, .. } => (StatusCode::NOT_FOUND, code),
            Self::MethodNotAllowed(_) => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            Self::Conflict { code, .. } => (StatusCode::CONFLICT, code),
            Self::Overloaded(_) => (StatusCode::SERVICE_UNAVAILABLE, "overloaded"),
            // Retrying reads the same unreadable row: not a "retry later".
            Self::Store(StoreError::Corrupt(_)) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
            Self::Store(_) | Self::Registry(_) => {
                (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable")
            }
            Self::SourceUnavailable { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, "outbox_source_unavailable")
            }
            Self::Timeout(_) => (StatusCode::SERVICE_UNAVAILABLE, "request_timeout"),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

/// The intake's refusals answer as the HTTP API always did: each kind its
/// status, each its code.
impl From<IntakeError> for ApiError {
    fn from(e: IntakeError) -> Self {
        match e {
            IntakeError::Invalid { code, message } => Self::Invalid { code, message },
            IntakeError::TooLarge(m) => Self::TooLarge(m),
            IntakeError::Unauthorized(m) => Self::Unauthorized(m),
            IntakeError::NotAllowed { code, message } => Self::NotAllowed { code, message },
            IntakeError::NotFound { code, message } => Self::NotFound { code, message },
            IntakeError::Conflict { code, message } => Self::Conflict { code, message },
            IntakeError::Store(e) => Self::Store(e),
            IntakeError::Registry(e) => Self::Registry(e),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.parts();
        let message = match &self {
            Self::Store(StoreError::Corrupt(_)) => {
                tracing::error!(error = %self, "unreadable row while serving a request");
                "internal error: a stored row cannot be read; an operator must look at it"
                    .to_string()
            }
            Self::Store(_) | Self::Registry(_) => {
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
