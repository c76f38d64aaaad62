//! The overdue watch: one alert for a message that has waited far longer
//! than it should, even though nothing failed for good.
//!
//! A send that keeps timing out ("possibly persisted") or finds the cluster
//! unreachable is postponed without counting an attempt, and a check-back
//! that keeps being handed back (its producer at its concurrency limit) is
//! never counted either: both are right (waiting out an outage must not use
//! up the attempt limit) but would leave such a message waiting forever with
//! no alert. The watch closes that gap: on an interval it asks the store for
//! messages whose send has been PENDING longer than
//! `--alert-send-overdue-after` since their commit, or that are still PREPARED
//! longer than `--alert-verify-overdue-after` after their prepare, and fires
//! one `send_overdue` / `verify_overdue` alert for each.
//!
//! Exactly once per wait: the store flags each message it returns with a
//! guarded UPDATE of that wait's flag (`send_overdue_alerted`,
//! `verify_overdue_alerted`) and writes its alert to the outbox in the same
//! transaction, so of all the instances' watches exactly one raises each
//! message's alert, once for each kind of wait. An operator's redeliver or
//! re-verify clears its flag and starts the wait again, so a message put
//! back in its queue that waits too long again is alerted again. The flag
//! changes neither the state nor the version, so a claim in flight on the
//! row is not disturbed.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::store::{deadline, DynStore, Wait};
use crate::workers::periodic;

/// Messages flagged per kind of wait and round; more wait for the next round.
const BATCH: u32 = 256;

/// When a message is overdue (`None`: that alert is off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OverdueSettings {
    /// A committed message not in Kafka this long after its commit.
    pub(crate) send_after: Option<Duration>,
    /// A message still PREPARED this long after its prepare.
    pub(crate) verify_after: Option<Duration>,
}

impl OverdueSettings {
    /// How often to look: a quarter of the shortest threshold, between 1 s
    /// and 1 min, so an alert comes at most about a quarter late. None when
    /// both alerts are off.
    fn interval(&self) -> Option<Duration> {
        let shortest = [self.send_after, self.verify_after]
            .into_iter()
            .flatten()
            .min()?;
        Some((shortest / 4).clamp(Duration::from_secs(1), Duration::from_secs(60)))
    }
}

/// Starts the watch; None when both alerts are off. It ends on `cancel`.
/// Each look takes at most `limit` (see [`crate::store::deadline`]).
pub(crate) fn spawn(
    store: DynStore,
    settings: OverdueSettings,
    limit: Duration,
    cancel: CancellationToken,
) -> Option<JoinHandle<()>> {
    let interval = settings.interval()?;
    Some(periodic::spawn(interval, cancel, move || {
        let store = store.clone();
        async move {
            for (wait, after) in [
                (Wait::Send, settings.send_after),
                (Wait::Decision, settings.verify_after),
            ] {
                if let Some(after) = after {
                    look(&store, wait, after, limit).await;
                }
            }
            metrics::counter!("trustmsg_overdue_rounds_total").increment(1);
        }
    }))
}

/// One round for one kind of wait: the store flags and alerts.
async fn look(store: &DynStore, wait: Wait, after: Duration, limit: Duration) {
    let flag = store.flag_overdue(wait, after, BATCH);
    match deadline::within(limit, "flag overdue messages", flag).await {
        Ok(flagged) if !flagged.is_empty() => {
            tracing::debug!(flagged = flagged.len(), ?wait, "overdue messages alerted");
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(error = %e, ?wait, "could not look for overdue messages; trying again next round")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(send: Option<u64>, verify: Option<u64>) -> OverdueSettings {
        OverdueSettings {
            send_after: send.map(Duration::from_secs),
            verify_after: verify.map(Duration::from_secs),
        }
    }

    #[test]
    fn the_watch_looks_a_quarter_of_the_shortest_threshold_apart_within_a_second_and_a_minute() {
        assert_eq!(settings(None, None).interval(), None);
        assert_eq!(
            settings(Some(40), Some(7200)).interval(),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            settings(None, Some(7200)).interval(),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            settings(Some(1), None).interval(),
            Some(Duration::from_secs(1))
        );
    }
}
