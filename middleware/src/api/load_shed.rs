//! Load shedding: at most `--max-concurrent-requests` API requests are served
//! at once; one more is answered 503 `overloaded` with `Retry-After` at once,
//! without being read.
//!
//! Every request in flight may hold a body being buffered (up to 6 × the
//! payload limit for a prepare) and waits for the store: without a bound, a
//! burst costs memory and connections without limit and every caller waits
//! longer. Refusing early keeps the requests already admitted fast, and the
//! caller's retry lands when there is room. Health, readiness and metrics are
//! not counted, so probes still answer under load.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use super::error::ApiError;

/// The slots requests take while they are served; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct InFlight {
    slots: Arc<Semaphore>,
    max: usize,
}

impl InFlight {
    /// Room for `max` requests at once.
    pub(crate) fn new(max: usize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(max)),
            max,
        }
    }
}

/// Middleware: serves the request in a free slot (held until the response is
/// ready), or answers 503 when there is none.
pub(crate) async fn shed_load(
    State(in_flight): State<InFlight>,
    req: Request,
    next: Next,
) -> Response {
    let Ok(_slot) = in_flight.slots.clone().try_acquire_owned() else {
        return ApiError::Overloaded(format!(
            "{} requests are already in flight (--max-concurrent-requests); retry shortly",
            in_flight.max
        ))
        .into_response();
    };
    next.run(req).await
}
