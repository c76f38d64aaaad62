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

use futures::future::BoxFuture;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::store::{deadline, DynStore, StoreResult};

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

/// Gauges for `/metrics` read from the store ([`gauges`]): what the read
/// is (for the log), the read, and what sets the gauges from it.
pub(crate) struct Gauges<T> {
    pub(crate) what: &'static str,
    pub(crate) read: for<'a> fn(&'a DynStore) -> BoxFuture<'a, StoreResult<T>>,
    pub(crate) publish: fn(T),
}

/// Reads `gauges` from the store every `interval` until `cancel`, each
/// read within `limit` (see [`crate::store::deadline`]), and sets them from
/// what it read; a read that fails or runs out of time is logged (`could
/// not <what> for /metrics`) and the gauges keep their last values until
/// the next round.
pub(crate) fn gauges<T: Send + 'static>(
    store: DynStore,
    interval: Duration,
    limit: Duration,
    cancel: CancellationToken,
    gauges: Gauges<T>,
) -> JoinHandle<()> {
    let Gauges {
        what,
        read,
        publish,
    } = gauges;
    spawn(interval, cancel, move || {
        let store = store.clone();
        async move {
            match deadline::within(limit, what, read(&store)).await {
                Ok(read) => publish(read),
                Err(e) => tracing::warn!(error = %e, "could not {what} for /metrics"),
            }
        }
    })
}
