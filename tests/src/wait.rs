//! Waiting for something the system does on its own time (a worker's round,
//! a delivery): poll a condition until it holds, and fail with what was
//! awaited when it does not in time.

use std::time::Duration;

use tokio::time::Instant;

/// Evaluates `cond` every 20 ms until it holds; panics naming `what` after
/// `secs` seconds.
pub async fn eventually(secs: u64, what: &str, cond: impl AsyncFnMut() -> bool) {
    assert!(within(secs, cond).await, "timed out waiting for: {what}");
}

/// Evaluates `cond` every 20 ms until it holds or `secs` seconds have
/// passed; returns whether it held, for a test that reports what was missing
/// itself (the lost messages, say) rather than only that time ran out.
pub async fn within(secs: u64, mut cond: impl AsyncFnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if cond().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
