//! The consumption ledger's watch: the `consumption_stuck` alerts and the
//! per-group gauges in `/metrics`.
//!
//! - **Stuck.** Every second it asks the store to flag in-progress
//!   consumptions whose hold (`in_progress_timeout_ms` from their begin) ran
//!   out and that no delivery took over. The store flags each with a guarded
//!   UPDATE and writes its alert in the same transaction, so of all the
//!   instances' watches exactly one raises each, once per begin (a takeover
//!   begins again and re-arms it). A second between looks keeps an alert at
//!   most a second late: the shortest timeout a group may set is one second.
//! - **Gauges.** Every `--backlog-interval` it reads the per-group counts
//!   (one grouped count over the ledger, one lag count per group: see the
//!   store's `consumer_group_counts`) and sets
//!   `trustmsg_consumer_processed{group}`, `trustmsg_consumer_failing{group}`,
//!   `trustmsg_consumer_in_progress{group}` and `trustmsg_consumer_lag{group}`,
//!   so scrapes cost the database nothing.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::store::{deadline, ConsumerGroupCounts, DynStore};
use crate::workers::periodic;

/// Consumptions flagged per look; more wait for the next one.
const BATCH: u32 = 256;
/// How often the watch looks for stuck consumptions.
const STUCK_INTERVAL: Duration = Duration::from_secs(1);

/// Starts the stuck watch; it ends on `cancel`. Each look takes at most
/// `limit` (see [`crate::store::deadline`]).
pub(crate) fn spawn_stuck_watch(
    store: DynStore,
    limit: Duration,
    cancel: CancellationToken,
) -> JoinHandle<()> {
    periodic::spawn(STUCK_INTERVAL, cancel, move || {
        let store = store.clone();
        async move {
            let flag = store.flag_stuck_consumptions(BATCH);
            match deadline::within(limit, "flag stuck consumptions", flag).await {
                Ok(flagged) if !flagged.is_empty() => {
                    tracing::debug!(flagged = flagged.len(), "stuck consumptions alerted");
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(
                    error = %e,
                    "could not look for stuck consumptions; trying again next round"
                ),
            }
        }
    })
}

/// The consumer groups' gauges, read every `--backlog-interval`
/// ([`periodic::gauges`]).
pub(crate) const GAUGES: periodic::Gauges<Vec<ConsumerGroupCounts>> = periodic::Gauges {
    what: "count the consumer groups",
    read: |s| s.consumer_group_counts(),
    publish: |groups| {
        for g in groups {
            let set = |name: &'static str, v: u64| {
                metrics::gauge!(name, "group" => g.group.clone()).set(v as f64);
            };
            set("trustmsg_consumer_processed", g.processed);
            set("trustmsg_consumer_failing", g.failing);
            set("trustmsg_consumer_in_progress", g.in_progress);
            set("trustmsg_consumer_lag", g.lag);
        }
    },
};
