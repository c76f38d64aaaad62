//! The payload budget: how many payload bytes this instance may hold for
//! sending at once (`--payload-budget-mib`).
//!
//! Every payload on its way to Kafka holds its size of the budget, from the
//! moment it is taken for sending until its send is over (delivered, failed
//! or timed out): a commit waiting in the fast path's channel, a row a sweep
//! claimed, and a record in librdkafka's queue (the forwarder drops its own
//! copy once librdkafka has taken the record, and librdkafka's
//! `queue.buffering.max.kbytes` is set to the budget, so its queue never
//! refuses what the budget let through). Nothing waits for the budget on a
//! caller's path: a commit that finds it spent is released to the sweepers
//! (due at once, [`super::release`]), and a sweep claims only as many rows
//! as the free budget holds at `--max-payload-bytes` each. So however large
//! the payloads and however long Kafka is away, the payloads held for sending
//! stay within the budget; the rows themselves wait in the database.
//!
//! A payload larger than the whole budget (start-up refuses a budget below
//! `--kafka-message-max-bytes`, but a row may be older than a lowered limit)
//! counts as the whole budget, so it is sent alone rather than never.

use std::sync::Arc;

use metrics::Gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The payload bytes held for sending; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct PayloadBudget {
    bytes: Arc<Semaphore>,
    limit: usize,
    inflight: Gauge,
}

/// Bytes of the budget, held until dropped.
#[derive(Debug)]
pub(crate) struct Held {
    permit: OwnedSemaphorePermit,
    budget: PayloadBudget,
}

impl PayloadBudget {
    /// A budget of `limit` bytes (at least 1, at most what a semaphore counts).
    pub(crate) fn new(limit: usize) -> Self {
        let limit = limit.clamp(1, Semaphore::MAX_PERMITS);
        metrics::gauge!("trustmsg_payload_budget_bytes").set(limit as f64);
        let inflight = metrics::gauge!("trustmsg_payload_inflight_bytes");
        inflight.set(0.0);
        Self {
            bytes: Arc::new(Semaphore::new(limit)),
            limit,
            inflight,
        }
    }

    /// The whole budget, in bytes.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// What a payload of `len` bytes takes of the budget.
    fn cost(&self, len: usize) -> usize {
        len.min(self.limit)
    }

    /// `bytes` of the budget, if that much is free now.
    pub(crate) fn try_hold(&self, bytes: usize) -> Option<Held> {
        // One acquisition counts at most u32::MAX permits; a payload is far
        // below that (Kafka's limit is 1 GB).
        let n = u32::try_from(self.cost(bytes)).ok()?;
        let permit = self.bytes.clone().try_acquire_many_owned(n).ok()?;
        Some(self.held(permit))
    }

    /// Bytes free now.
    pub(crate) fn free(&self) -> usize {
        self.bytes.available_permits()
    }

    /// Counts a time the budget had no room: `path` is `fast` (a commit
    /// released to the sweepers) or `sweep` (a sweep that claimed less).
    pub(crate) fn count_full(&self, path: &'static str) {
        metrics::counter!("trustmsg_payload_budget_full_total", "path" => path).increment(1);
    }

    fn held(&self, permit: OwnedSemaphorePermit) -> Held {
        self.inflight.increment(permit.num_permits() as f64);
        Held {
            permit,
            budget: self.clone(),
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // The permits go back when `permit` is dropped, right after this.
        self.budget
            .inflight
            .decrement(self.permit.num_permits() as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_never_exceed_the_budget_and_come_back_when_dropped() {
        let budget = PayloadBudget::new(1000);
        let a = budget.try_hold(600).expect("fits");
        assert!(budget.try_hold(500).is_none(), "only 400 are free");
        assert_eq!(budget.free(), 400);
        let b = budget.try_hold(400).expect("fits exactly");
        assert!(budget.try_hold(1).is_none(), "all held");
        drop((a, b));
        assert_eq!(budget.free(), 1000);
    }

    #[test]
    fn a_payload_larger_than_the_budget_takes_all_of_it() {
        let budget = PayloadBudget::new(1000);
        let _all = budget.try_hold(5000).expect("counts as the whole budget");
        assert_eq!(budget.free(), 0);
        assert!(budget.try_hold(1).is_none());
    }
}
