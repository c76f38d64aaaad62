//! Waiting for something the system does on its own time (a worker's round,
//! a delivery): poll a condition until it holds, and fail with what was
//! awaited when it does not in time.

use std::time::Duration;

use tokio::time::Instant;

/// Evaluates `cond` every 20 ms until it holds; panics naming `what` after
/// `secs` seconds.
pub async fn eventually(secs: u64, what: &str, mut cond: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond().await {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
