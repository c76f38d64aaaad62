//! The loop of a worker that does one round every so often until shutdown
//! (the backlog gauges, the overdue watch, retention), written once.
//!
//! The first round runs at once, the next ones an interval apart. A round
//! that takes longer than the interval delays the next one instead of being
//! followed by a burst of catch-up rounds. Shutdown is seen between rounds,
//! so a round is never cut off halfway; a round that could run long watches
//! the token itself.

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

/// Runs `round` every `interval` until `cancel`.
pub(crate) fn spawn<F, Fut>(
    interval: Duration,
    cancel: CancellationToken,
    mut round: F,
) -> JoinHandle<()>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            round().await;
        }
    })
}
