//! The verifier's loop: a round claims what the free call slots can take,
//! starts a call per row or queues it for its producer, and gives back the
//! rest; finished calls start queued rows and, when more is due, the next
//! round. On shutdown the queue is given back and calls in flight get the
//! grace period.

use std::time::Instant;

use tokio::task::{JoinHandle, JoinSet};
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::claim::Claim;
use super::{Inner, Outcome, Verifier};
use crate::store::{deadline, Message, StoreResult};

/// What one round did, for tests and logs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchReport {
    /// Rows the round asked for (the free call slots, at most `batch`).
    pub limit: usize,
    /// Rows claimed.
    pub claimed: usize,
    /// Rows the claim could not read and quarantined (one alert each).
    pub quarantined: usize,
    /// Calls started at once.
    pub started: usize,
    /// Rows queued for their producer's next free call slot (the other
    /// claimed rows were given back).
    pub queued: usize,
    /// Outcomes, one per claimed row.
    pub outcomes: Vec<Outcome>,
}

impl BatchReport {
    /// How many rows came to `o`.
    pub fn count(&self, o: Outcome) -> usize {
        self.outcomes.iter().filter(|x| **x == o).count()
    }

    /// Whether more may be due than the round took: it could ask for nothing
    /// (no free call slot), or it got all it asked for (quarantined rows
    /// included).
    pub fn was_full(&self) -> bool {
        self.limit == 0 || self.claimed + self.quarantined >= self.limit
    }
}

impl Verifier {
    /// One round, waiting for every call it started: claim due rows, check
    /// each, write the outcomes. Tests step the verifier with this.
    pub async fn process_batch(&self) -> StoreResult<BatchReport> {
        let mut calls = JoinSet::new();
        let mut report = self.start_batch(&mut calls).await?;
        while let Some(done) = calls.join_next().await {
            report.outcomes.push(done.unwrap_or(Outcome::Error));
            let queued = self.start_queued(&mut calls).await;
            report.outcomes.extend(queued.released);
        }
        Ok(report)
    }

    /// Runs rounds until `shutdown`, then lets in-flight calls finish within
    /// the grace period (rows of calls cut off come back after their lease).
    pub fn spawn(self, shutdown: CancellationToken) -> JoinHandle<()> {
        tokio::spawn(self.run(shutdown))
    }

    async fn run(self, shutdown: CancellationToken) {
        let cfg = &self.inner.cfg;
        tracing::info!(
            interval = ?cfg.interval,
            batch = cfg.batch,
            concurrency = cfg.concurrency,
            per_producer = cfg.concurrency_per_producer,
            "verifier started"
        );
        let mut calls = JoinSet::new();
        let mut tick = tokio::time::interval(cfg.interval);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // What the last round found: `more` when it got all it asked for
        // (more may be due), `stuck` when it could neither start nor queue
        // any of it (their producers are at their limit with full queues).
        let (mut more, mut stuck) = (false, false);
        loop {
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                Some(done) = calls.join_next(), if !calls.is_empty() => {
                    if let Err(e) = done {
                        tracing::error!(error = %e, "check-back task failed");
                    }
                    let moved = self.start_queued(&mut calls).await.started > 0;
                    // A finished call claims again only when that is worth a
                    // claim: more is due, the last round was not stuck or a
                    // queue moved since, and enough slots are free.
                    if !(more && (!stuck || moved) && self.room() >= self.min_claim()) {
                        continue;
                    }
                }
                _ = self.inner.wake.notified() => {}
                _ = tick.tick() => {}
            }
            let round = self.start_batch(&mut calls).await;
            // A round ran (whatever it found): operators see the verifier
            // polling, and tests wait for rounds instead of sleeping.
            metrics::counter!("trustmsg_verify_rounds_total").increment(1);
            match round {
                Ok(r) => {
                    more = r.was_full();
                    stuck = r.started + r.queued + r.quarantined == 0 && r.limit > 0;
                    // Go again at once while slots are free; with none free,
                    // the next finished call starts the round.
                    if more && !stuck && r.limit > 0 {
                        self.inner.wake.notify_one();
                    }
                }
                Err(e) => {
                    more = false;
                    tracing::warn!(error = %e, "claiming due check-backs failed; retrying");
                }
            }
        }
        let queued = self.inner.lock_queue().take_all();
        if !queued.is_empty() {
            self.inner.give_back(&queued).await;
        }
        let in_flight = calls.len();
        if in_flight > 0 {
            tracing::info!(in_flight, "verifier draining in-flight check-backs");
            let drained = tokio::time::timeout(cfg.shutdown_grace, async {
                while calls.join_next().await.is_some() {}
            })
            .await;
            if drained.is_err() {
                tracing::warn!(
                    left = calls.len(),
                    "check-backs still running after the grace period were cut off; \
                     their rows come back when the lease runs out"
                );
                calls.abort_all();
            }
        }
        tracing::info!("verifier stopped");
    }

    /// Claims what the free call slots can take (less the rows already
    /// queued) and starts a call per row, or queues it for its producer.
    async fn start_batch(&self, calls: &mut JoinSet<Outcome>) -> StoreResult<BatchReport> {
        let cfg = &self.inner.cfg;
        let limit = u32::try_from(self.room())
            .unwrap_or(u32::MAX)
            .min(cfg.batch);
        let mut report = BatchReport {
            limit: limit as usize,
            ..BatchReport::default()
        };
        if limit == 0 {
            return Ok(report);
        }
        // Before the claim: each row's claim is counted from here, so it runs
        // out on this instance's clock no later than in the database.
        let asked = Instant::now();
        let claim = self.inner.store.claim_due_verifies(limit, cfg.lease);
        let claimed =
            deadline::within(cfg.statement_timeout, "claim due check-backs", claim).await?;
        report.claimed = claimed.messages.len();
        // The claim wrote the quarantined rows' alerts.
        report.quarantined = claimed.quarantined.len();
        let mut give_back = Vec::new();
        for c in Claim::all(claimed.messages, claimed.claimed_at, asked, &cfg.lease) {
            let Some(c) = self.try_start(c, calls) else {
                report.started += 1;
                continue;
            };
            let room = self.inner.limits.limit(&c.message.biz_id);
            let mut queue = self.inner.lock_queue();
            if queue.waiting(&c.message.biz_id) < room {
                queue.push(c);
                report.queued += 1;
            } else {
                give_back.push(c.message);
            }
        }
        let released = self.inner.give_back(&give_back).await;
        report.outcomes.extend(vec![released; give_back.len()]);
        tracing::debug!(
            limit = report.limit,
            claimed = report.claimed,
            started = report.started,
            queued = report.queued,
            given_back = give_back.len(),
            "check-back round"
        );
        Ok(report)
    }

    /// Starts the call for `c` if its producer and the verifier have a free
    /// slot; otherwise hands `c` back.
    fn try_start(&self, c: Claim, calls: &mut JoinSet<Outcome>) -> Option<Claim> {
        let Some(producer) = self.inner.limits.try_acquire(&c.message.biz_id) else {
            return Some(c);
        };
        let Ok(overall) = self.inner.slots.clone().try_acquire_owned() else {
            return Some(c);
        };
        let inner = self.inner.clone();
        calls.spawn(async move {
            let _slot = overall;
            inner.check_one(c, producer).await
        });
        None
    }

    /// Call slots free for new claims: the free ones less the rows queued.
    fn room(&self) -> usize {
        self.inner
            .slots
            .available_permits()
            .saturating_sub(self.inner.lock_queue().len)
    }

    /// The fewest rows a round started by a finished call asks for: an
    /// eighth of the call slots, so a busy verifier claims in batches rather
    /// than a row per finished call.
    fn min_claim(&self) -> usize {
        let cfg = &self.inner.cfg;
        (cfg.concurrency / 8).clamp(1, cfg.batch.max(1) as usize)
    }

    /// Starts the queued rows whose producers have a free slot now, and gives
    /// back those whose own claim could no longer outlast their call.
    async fn start_queued(&self, calls: &mut JoinSet<Outcome>) -> FromQueue {
        let lease = &self.inner.cfg.lease;
        let mut started = 0;
        let mut expired = Vec::new();
        {
            let mut queue = self.inner.lock_queue();
            let producers: Vec<String> = queue.rows.keys().cloned().collect();
            for biz_id in producers {
                while let Some(c) = queue.pop(&biz_id) {
                    if !c.may_start(lease) {
                        expired.push(c.message);
                        continue;
                    }
                    match self.try_start(c, calls) {
                        None => started += 1,
                        Some(c) => {
                            queue.push_front(c);
                            break;
                        }
                    }
                }
            }
        }
        let released = self.inner.give_back(&expired).await;
        FromQueue {
            started,
            released: vec![released; expired.len()],
        }
    }
}

impl Inner {
    /// Gives claimed rows back in one statement (due again after one
    /// interval, no attempt counted); the outcome of each.
    pub(super) async fn give_back(&self, rows: &[Message]) -> Outcome {
        if rows.is_empty() {
            return Outcome::Released;
        }
        let claims: Vec<(u64, u64)> = rows.iter().map(|m| (m.id, m.version)).collect();
        match self
            .store
            .release_verifies(&claims, self.cfg.interval)
            .await
        {
            Ok(_) => Outcome::Released,
            Err(e) => {
                tracing::warn!(rows = rows.len(), error = %e,
                    "giving back check-back claims failed; they come back after their lease");
                Outcome::Error
            }
        }
    }
}

/// What [`Verifier::start_queued`] did.
struct FromQueue {
    /// Calls started.
    started: usize,
    /// One outcome per row given back because its claim ran too short.
    released: Vec<Outcome>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(limit: usize, claimed: usize, quarantined: usize, started: usize) -> BatchReport {
        BatchReport {
            limit,
            claimed,
            quarantined,
            started,
            queued: 0,
            outcomes: Vec::new(),
        }
    }

    #[test]
    fn a_round_that_got_all_it_asked_for_may_have_left_more_due() {
        assert!(
            round(4, 0, 4, 0).was_full(),
            "all set aside: more may be due"
        );
        assert!(round(4, 2, 2, 2).was_full());
        assert!(
            round(4, 4, 0, 0).was_full(),
            "all given back: more is due too"
        );
        assert!(!round(4, 1, 2, 1).was_full(), "fewer than asked: caught up");
        assert!(
            round(0, 0, 0, 0).was_full(),
            "no free slot: unknown, so maybe"
        );
    }
}
