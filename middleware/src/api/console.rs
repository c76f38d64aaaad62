//! The operator console: a small web page at `/console` over the admin API.
//!
//! Its three files are compiled into the binary (no CDN, nothing fetched at
//! run time) and served with a strict Content-Security-Policy: scripts and
//! styles only from this origin, no inline script, no plugins, no framing,
//! requests only back to this service. The page itself needs no token; it
//! asks the operator for the admin token once, keeps it in the browser's
//! session storage (gone when the tab closes) and sends it with every admin
//! API call. Message payloads and headers are always put on the page as text
//! (`textContent`), never as HTML, so whatever a producer sent cannot run.

use axum::http::header;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

use super::AppState;

const INDEX: &str = include_str!("../../console/index.html");
const SCRIPT: &str = include_str!("../../console/app.js");
const STYLE: &str = include_str!("../../console/app.css");

/// What the console's pages may load and run.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; \
     base-uri 'none'";

/// `/console` and its assets.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/console",
            get(|| async { asset("text/html; charset=utf-8", INDEX) }),
        )
        .route(
            "/console/",
            get(|| async { Redirect::permanent("/console") }),
        )
        .route(
            "/console/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/console/app.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}
