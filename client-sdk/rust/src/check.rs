//! The check-back endpoint: an axum router that authenticates trustmsg's call
//! and asks the producer's decision function.
//!
//! Authentication is the Standard Webhooks scheme: the signature covers the
//! `webhook-id`, the `webhook-timestamp` and the raw body, and the timestamp
//! must be within a tolerance of the local clock, so a captured request cannot
//! be replayed later. Anything that fails this check gets 401 and the decision
//! function is never called. A check-back answer is a statement about local
//! state, so answering the same (replayed-in-time) request twice is harmless.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use trustmsg_verify_api::signature::{self, SignatureError};
use trustmsg_verify_api::{webhook, CheckRequest, CheckResponse, Decision, ErrorBody, ErrorDetail};

/// Where [`check_router`] serves the endpoint unless told otherwise.
///
/// ```
/// assert_eq!(trustmsg_client::DEFAULT_CHECK_PATH, "/trustmsg/check");
/// ```
pub const DEFAULT_CHECK_PATH: &str = "/trustmsg/check";

/// How far `webhook-timestamp` may be from the local clock (the Standard
/// Webhooks recommendation).
///
/// ```
/// assert_eq!(trustmsg_client::DEFAULT_TOLERANCE.as_secs(), 300);
/// ```
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(5 * 60);

/// The check-back endpoint at [`DEFAULT_CHECK_PATH`] with [`DEFAULT_TOLERANCE`].
///
/// `secret` is the producer's `signing_secret` (`whsec_…`) from its
/// registration. `handler` gets the verified [`CheckRequest`] and returns the
/// decision; an `Err` is answered with 500, which trustmsg counts as a failed
/// attempt and asks again later.
///
/// # Panics
///
/// If `secret` is not `whsec_<base64>`: a misconfigured secret should stop the
/// service at start-up, not fail every check-back.
///
/// ```no_run
/// use trustmsg_client::{check_router, Decision};
///
/// # async fn run() -> std::io::Result<()> {
/// let app = check_router("whsec_c2VjcmV0", |req| async move {
///     // Look the order up in the local database...
///     let found = req.message_key.starts_with("order-");
///     Ok::<_, std::convert::Infallible>(if found { Decision::Commit } else { Decision::Rollback })
/// });
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
/// axum::serve(listener, app).await
/// # }
/// ```
pub fn check_router<F, Fut, E>(secret: impl Into<String>, handler: F) -> Router
where
    F: Fn(CheckRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Decision, E>> + Send + 'static,
    E: std::fmt::Display + 'static,
{
    CheckEndpoint::new(secret).router(handler)
}

/// A configurable check-back endpoint (path, timestamp tolerance).
///
/// ```
/// use std::time::Duration;
/// use trustmsg_client::{CheckEndpoint, Decision};
///
/// let app: axum::Router = CheckEndpoint::new("whsec_c2VjcmV0")
///     .path("/hooks/trustmsg")
///     .tolerance(Duration::from_secs(60))
///     .router(|_req| async { Ok::<_, std::convert::Infallible>(Decision::Unknown) });
/// # let _ = app;
/// ```
#[derive(Clone)]
pub struct CheckEndpoint {
    secret: String,
    path: String,
    tolerance: Duration,
}

impl std::fmt::Debug for CheckEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckEndpoint")
            .field("secret", &"***")
            .field("path", &self.path)
            .field("tolerance", &self.tolerance)
            .finish()
    }
}

impl CheckEndpoint {
    /// An endpoint verifying with `secret` (`whsec_…`).
    ///
    /// # Panics
    ///
    /// If `secret` is not `whsec_<base64>`.
    ///
    /// ```
    /// let e = trustmsg_client::CheckEndpoint::new("whsec_c2VjcmV0");
    /// assert!(format!("{e:?}").contains("***"));
    /// ```
    pub fn new(secret: impl Into<String>) -> Self {
        let secret = secret.into();
        assert!(
            signature::sign(&secret, "probe", 0, b"").is_ok(),
            "the check-back signing secret is not whsec_<base64>"
        );
        Self {
            secret,
            path: DEFAULT_CHECK_PATH.to_string(),
            tolerance: DEFAULT_TOLERANCE,
        }
    }

    /// Serves at `path` instead of [`DEFAULT_CHECK_PATH`].
    ///
    /// ```
    /// let e = trustmsg_client::CheckEndpoint::new("whsec_c2VjcmV0").path("/check");
    /// # let _ = e;
    /// ```
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// Accepts timestamps at most `tolerance` away from the local clock.
    ///
    /// ```
    /// use std::time::Duration;
    /// let e = trustmsg_client::CheckEndpoint::new("whsec_c2VjcmV0").tolerance(Duration::from_secs(30));
    /// # let _ = e;
    /// ```
    pub fn tolerance(mut self, tolerance: Duration) -> Self {
        self.tolerance = tolerance;
        self
    }

    /// The router: `POST <path>` verifies, parses and asks `handler`.
    ///
    /// ```
    /// use trustmsg_client::{CheckEndpoint, Decision};
    /// let app = CheckEndpoint::new("whsec_c2VjcmV0")
    ///     .router(|_req| async { Ok::<_, String>(Decision::Rollback) });
    /// let app = axum::Router::new().merge(app); // next to the service's own routes
    /// # let _ = app;
    /// ```
    pub fn router<F, Fut, E>(self, handler: F) -> Router
    where
        F: Fn(CheckRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Decision, E>> + Send + 'static,
        E: std::fmt::Display + 'static,
    {
        let inner = Arc::new(Inner {
            secret: self.secret,
            tolerance_secs: i64::try_from(self.tolerance.as_secs()).unwrap_or(i64::MAX),
            handler,
        });
        Router::new()
            .route(
                &self.path,
                post(move |headers: HeaderMap, body: Bytes| {
                    let inner = Arc::clone(&inner);
                    async move { inner.handle(headers, body).await }
                }),
            )
            .layer(DefaultBodyLimit::max(webhook::MAX_RESPONSE_BYTES))
    }
}

struct Inner<F> {
    secret: String,
    tolerance_secs: i64,
    handler: F,
}

impl<F, Fut, E> Inner<F>
where
    F: Fn(CheckRequest) -> Fut,
    Fut: Future<Output = Result<Decision, E>>,
    E: std::fmt::Display,
{
    async fn handle(&self, headers: HeaderMap, body: Bytes) -> Response {
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .filter(|v| !v.is_empty())
        };
        let (Some(id), Some(timestamp), Some(sig)) = (
            header(webhook::ID),
            header(webhook::TIMESTAMP),
            header(webhook::SIGNATURE),
        ) else {
            return error(
                StatusCode::UNAUTHORIZED,
                "missing_signature",
                "webhook-id, webhook-timestamp and webhook-signature are required",
            );
        };
        if let Err(e) = signature::verify(
            &self.secret,
            id,
            timestamp,
            &body,
            sig,
            now_unix(),
            self.tolerance_secs,
        ) {
            let code = match e {
                SignatureError::Expired => "signature_expired",
                SignatureError::BadTimestamp => "bad_timestamp",
                SignatureError::Mismatch | SignatureError::BadSecret => "bad_signature",
            };
            tracing::warn!(webhook_id = %id, error = %e, "check-back rejected");
            return error(StatusCode::UNAUTHORIZED, code, &e.to_string());
        }
        let req: CheckRequest = match serde_json::from_slice(&body) {
            Ok(r) => r,
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "bad_body",
                    &format!("not a check-back request: {e}"),
                )
            }
        };
        let message_id = req.message_id;
        let (biz_id, key) = (req.biz_id.clone(), req.message_key.clone());
        match (self.handler)(req).await {
            Ok(decision) => {
                tracing::info!(%biz_id, message_key = %key, message_id, ?decision, "check-back answered");
                Json(CheckResponse {
                    message_id,
                    decision,
                })
                .into_response()
            }
            Err(e) => {
                // The cause may be internal detail; trustmsg only needs to know to ask again.
                tracing::error!(%biz_id, message_key = %key, message_id, error = %e, "check-back decision failed");
                error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "decision_failed",
                    "the producer could not decide; ask again later",
                )
            }
        }
    }
}

fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        Json(ErrorBody {
            error: ErrorDetail {
                code: code.to_string(),
                message: message.to_string(),
            },
        }),
    )
        .into_response()
}
