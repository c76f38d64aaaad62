//! An open loop's clock, shared by the HTTP load and the outbox latency
//! part: arrivals at fixed times, whatever the system under test does.

use std::time::{Duration, Instant};

/// An open loop's clock: arrivals `interval` apart from its start until
/// `duration` has passed, each at its intended time whatever the ones
/// before it are doing (a stalled service does not slow the arrivals).
pub(crate) struct OpenLoop {
    pub(crate) start: Instant,
    interval: Duration,
    end: Instant,
    next: u64,
}

impl OpenLoop {
    pub(crate) fn new(interval: Duration, duration: Duration) -> Self {
        let start = Instant::now();
        Self {
            start,
            interval,
            end: start + duration,
            next: 0,
        }
    }

    /// Waits for the next arrival's intended start: its number and that
    /// time; None once the loop's duration is over.
    pub(crate) async fn next(&mut self) -> Option<(u64, Instant)> {
        let intended = self.start + self.interval.mul_f64(self.next as f64);
        if intended >= self.end {
            return None;
        }
        tokio::time::sleep_until(intended.into()).await;
        self.next += 1;
        Some((self.next - 1, intended))
    }
}
