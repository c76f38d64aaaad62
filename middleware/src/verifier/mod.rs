//! The verifier: check-back of PREPARED messages nobody decided.
//!
//! Every `--verify-interval` the worker claims due rows (`status = PREPARED AND next_verify_at <= now`, by
//! the database clock) with `FOR UPDATE SKIP LOCKED`, pushing their
//! `next_verify_at` out by `--verify-lease` and bumping `version`. Several
//! instances therefore split the due rows instead of checking one twice, and a
//! crashed instance's rows come back when the lease runs out.
//!
//! A round claims at most what the free call slots can take. When it got all
//! it asked for (or there were no free slots), more may be due, so the next
//! round starts at once, or as soon as a call frees a slot, instead of one
//! interval later: a backlog is worked at the speed of the calls, not of the
//! poll tick.
//!
//! Each claimed row gets one check-back call ([`client`]), within two bounds:
//! `--verify-concurrency` calls in all and `--verify-concurrency-per-producer`
//! calls to one producer. A row whose producer is at its bound is given back
//! at once (due again next round, no attempt counted), and rounds do not wait
//! for slow calls, so one slow producer cannot hold up the others.
//!
//! What an answer does:
//! - `commit` / `rollback`: the same guarded decision the producer API makes
//!   ([`store::decide`]), audited as `verifier`; a commit is handed to this
//!   instance's forwarder (the fast path);
//! - `unknown` or a failed call (timeout, non-2xx, redirect, garbage): the
//!   attempt is counted, its reason stored in `last_error`, and the next check
//!   scheduled after an exponential backoff with ±20 % jitter;
//! - at the producer's attempt limit: VERIFY_FAILED and one alert (only from
//!   the instance whose guarded UPDATE won). Nothing is decided by default.
//!
//! A due row the store cannot read is quarantined by the claim (see
//! [`crate::store`]) and alerted once (`quarantined`); it is never checked
//! back, and the rest of the round goes ahead.
//!
//! Writes after a call are guarded by the claim's `version`, so a claimer whose
//! lease ran out (and whose row someone else took) changes nothing.

mod client;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use trustmsg_verify_api::{CheckRequest, Decision, MessageStatus};

use crate::address_policy::AddressPolicy;
use crate::alert::{Alert, AlertKind, Alerter};
use crate::backoff::Backoff;
use crate::forwarder::CommitListener;
use crate::registry::Registry;
use crate::store::{
    self, Actor, CheckAttempt, DecideOutcome, DecideRequest, DynStore, Message, StoreResult,
    Target, Transition,
};
use client::{CheckClient, CheckFailure, Endpoint};

/// The verifier's settings (from `--verify-*` and friends).
#[derive(Debug, Clone)]
pub struct VerifierConfig {
    /// Poll period.
    pub interval: Duration,
    /// Rows claimed per round at most.
    pub batch: u32,
    /// How long a claim lasts.
    pub lease: Duration,
    /// The longest one call may take (`--verify-timeout-max`), whatever a
    /// registration says: the lease is longer, so a claim always outlasts
    /// its call.
    pub max_timeout: Duration,
    /// Calls in flight in all.
    pub concurrency: usize,
    /// Calls in flight to one producer.
    pub concurrency_per_producer: usize,
    /// Delays between attempts.
    pub backoff: Backoff,
    /// Attempt limit for a message whose producer is no longer registered.
    pub default_max_attempts: u32,
    /// The send claim a commit takes (see the forwarder).
    pub send_lease: Duration,
    /// How long in-flight calls may finish on shutdown.
    pub shutdown_grace: Duration,
}

/// What one claimed row came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The producer answered commit and this call committed it.
    Committed,
    /// The producer answered rollback and this call rolled it back.
    RolledBack,
    /// No decision; the next check is scheduled.
    Rescheduled,
    /// The attempt limit was reached: VERIFY_FAILED and an alert.
    VerifyFailed,
    /// Given back without a call: its producer was at its concurrency bound.
    Released,
    /// Someone else changed the row first; nothing written.
    Lost,
    /// A store error; the row comes back after its lease.
    Error,
}

/// What one round did, for tests and logs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchReport {
    /// Rows the round asked for (the free call slots, at most `batch`).
    pub limit: usize,
    /// Rows claimed.
    pub claimed: usize,
    /// Rows the claim could not read and quarantined (one alert each).
    pub quarantined: usize,
    /// Calls started (the other claimed rows were given back).
    pub started: usize,
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
    /// included) and made progress: started calls or set rows aside. A round
    /// whose rows were all given back (their producers at their bound) does
    /// not count, or a saturated producer's backlog would be claimed and given
    /// back in a loop.
    pub fn was_full(&self) -> bool {
        self.limit == 0
            || (self.claimed + self.quarantined >= self.limit
                && (self.started > 0 || self.quarantined > 0))
    }
}

/// The check-back worker; cheap to clone (clones share limits and client).
#[derive(Clone)]
pub struct Verifier {
    inner: Arc<Inner>,
}

struct Inner {
    store: DynStore,
    registry: Registry,
    client: CheckClient,
    alerter: Alerter,
    commits: Arc<dyn CommitListener>,
    cfg: VerifierConfig,
    slots: Arc<Semaphore>,
    producer_slots: Mutex<HashMap<String, Arc<Semaphore>>>,
    wake: Notify,
}

impl Verifier {
    /// A verifier over `store`, calling producers as `policy` allows.
    pub fn new(
        store: DynStore,
        registry: Registry,
        policy: Arc<AddressPolicy>,
        alerter: Alerter,
        commits: Arc<dyn CommitListener>,
        cfg: VerifierConfig,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                registry,
                client: CheckClient::new(policy),
                alerter,
                commits,
                slots: Arc::new(Semaphore::new(cfg.concurrency)),
                producer_slots: Mutex::new(HashMap::new()),
                wake: Notify::new(),
                cfg,
            }),
        }
    }

    /// Asks for a round now instead of at the next tick.
    pub fn wake(&self) {
        self.inner.wake.notify_one();
    }

    /// One round, waiting for every call it started: claim due rows, check
    /// each, write the outcomes. Tests step the verifier with this.
    pub async fn process_batch(&self) -> StoreResult<BatchReport> {
        let mut calls = JoinSet::new();
        let mut report = self.start_batch(&mut calls).await?;
        while let Some(done) = calls.join_next().await {
            report.outcomes.push(done.unwrap_or(Outcome::Error));
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
        // Set when the last round was full: more may be due, so a freed call
        // slot is a reason to claim again.
        let mut backlog = false;
        loop {
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                Some(done) = calls.join_next(), if !calls.is_empty() => {
                    if let Err(e) = done {
                        tracing::error!(error = %e, "check-back task failed");
                    }
                    if !backlog {
                        continue;
                    }
                }
                _ = self.inner.wake.notified() => {}
                _ = tick.tick() => {}
            }
            match self.start_batch(&mut calls).await {
                Ok(r) => {
                    backlog = r.was_full();
                    // Go again at once while slots are free; with none free,
                    // the next finished call starts the round.
                    if backlog && r.limit > 0 {
                        self.inner.wake.notify_one();
                    }
                }
                Err(e) => {
                    backlog = false;
                    tracing::warn!(error = %e, "claiming due check-backs failed; retrying");
                }
            }
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

    fn producer_slots(&self, biz_id: &str) -> Arc<Semaphore> {
        let mut map = self
            .inner
            .producer_slots
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        map.entry(biz_id.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(self.inner.cfg.concurrency_per_producer)))
            .clone()
    }

    /// Claims what the free call slots can take and starts a call per row.
    async fn start_batch(&self, calls: &mut JoinSet<Outcome>) -> StoreResult<BatchReport> {
        let cfg = &self.inner.cfg;
        let free = self.inner.slots.available_permits();
        let limit = u32::try_from(free).unwrap_or(u32::MAX).min(cfg.batch);
        let mut report = BatchReport {
            limit: limit as usize,
            ..BatchReport::default()
        };
        if limit == 0 {
            return Ok(report);
        }
        let claimed = self
            .inner
            .store
            .claim_due_verifies(limit, cfg.lease)
            .await?;
        report.claimed = claimed.messages.len();
        report.quarantined = claimed.quarantined.len();
        self.inner.alerter.quarantined(&claimed.quarantined);
        for m in claimed.messages {
            let producer = self.producer_slots(&m.biz_id).try_acquire_owned();
            let overall = self.inner.slots.clone().try_acquire_owned();
            match (producer, overall) {
                (Ok(p), Ok(o)) => {
                    let inner = self.inner.clone();
                    report.started += 1;
                    calls.spawn(async move {
                        let _slots = (p, o);
                        inner.check_one(m).await
                    });
                }
                _ => {
                    let given_back = self
                        .inner
                        .store
                        .release_verify(m.id, m.version, cfg.interval)
                        .await;
                    report.outcomes.push(match given_back {
                        Ok(_) => Outcome::Released,
                        Err(e) => {
                            tracing::warn!(message_id = m.id, error = %e, "giving back a check-back claim failed");
                            Outcome::Error
                        }
                    });
                }
            }
        }
        Ok(report)
    }
}

impl Inner {
    async fn check_one(&self, m: Message) -> Outcome {
        let outcome = match self.try_check_one(&m).await {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(message_id = m.id, biz_id = %m.biz_id, error = %e,
                    "check-back bookkeeping failed; the row comes back after its lease");
                Outcome::Error
            }
        };
        let label = match outcome {
            Outcome::Committed => "committed",
            Outcome::RolledBack => "rolled_back",
            Outcome::Rescheduled => "rescheduled",
            Outcome::VerifyFailed => "verify_failed",
            Outcome::Released => "released",
            Outcome::Lost => "lost",
            Outcome::Error => "error",
        };
        metrics::counter!("trustmsg_verify_checks_total", "outcome" => label).increment(1);
        outcome
    }

    async fn try_check_one(&self, m: &Message) -> anyhow::Result<Outcome> {
        let attempt = m.verify_attempts.saturating_add(1);
        let producer = self.registry.get(&m.biz_id).await?;
        let started = std::time::Instant::now();
        let ((status, answer), max_attempts) = match producer {
            None => (
                (None, Err(CheckFailure::NotRegistered(m.biz_id.clone()))),
                self.cfg.default_max_attempts,
            ),
            Some(p) => {
                let req = CheckRequest {
                    biz_id: m.biz_id.clone(),
                    message_key: m.message_key.clone(),
                    message_id: m.id,
                    attempt,
                    prepared_at: m.created_at,
                };
                let endpoint = Endpoint {
                    url: &p.verify_url,
                    secret: &p.signing_secret,
                    // A registration made under a higher --verify-timeout-max
                    // keeps its value; the call must still end within the lease.
                    timeout: Duration::from_millis(p.verify_timeout_ms.into())
                        .min(self.cfg.max_timeout),
                };
                (
                    self.client.check(endpoint, &req).await,
                    p.max_verify_attempts.max(1),
                )
            }
        };
        self.record(m, attempt, started.elapsed(), status, &answer)
            .await;
        let why = match answer {
            Ok(Decision::Commit) => return self.decide(m, true, attempt).await,
            Ok(Decision::Rollback) => return self.decide(m, false, attempt).await,
            Ok(Decision::Unknown) => "producer answered unknown".to_string(),
            Err(failure) => failure.to_string(),
        };
        let reason = format!("check-back {attempt}/{max_attempts}: {why}");
        tracing::debug!(message_id = m.id, biz_id = %m.biz_id, %reason, "check-back decided nothing");
        if attempt >= max_attempts {
            return self.give_up(m, attempt, reason).await;
        }
        let delay = self.cfg.backoff.delay(attempt);
        Ok(
            if self
                .store
                .reschedule_verify(m.id, m.version, &reason, delay)
                .await?
            {
                Outcome::Rescheduled
            } else {
                Outcome::Lost
            },
        )
    }

    /// Records the call for operators. Every call is recorded, whether or
    /// not its outcome can still be applied (a stale claim); a failure to
    /// record is logged and does not stop the check-back.
    async fn record(
        &self,
        m: &Message,
        attempt: u32,
        took: Duration,
        status: Option<reqwest::StatusCode>,
        answer: &Result<Decision, CheckFailure>,
    ) {
        let (outcome, error) = match answer {
            Ok(Decision::Commit) => ("commit", None),
            Ok(Decision::Rollback) => ("rollback", None),
            Ok(Decision::Unknown) => ("unknown", None),
            Err(failure) => ("failed", Some(failure.to_string())),
        };
        let a = CheckAttempt {
            message_id: m.id,
            attempt,
            duration_ms: u32::try_from(took.as_millis()).unwrap_or(u32::MAX),
            http_status: status.map(|s| s.as_u16()),
            outcome,
            error,
        };
        if let Err(e) = self.store.record_check_attempt(&a).await {
            tracing::warn!(message_id = m.id, attempt, error = %e, "could not record the check-back call");
        }
    }

    async fn decide(&self, m: &Message, commit: bool, attempt: u32) -> anyhow::Result<Outcome> {
        let word = if commit { "commit" } else { "rollback" };
        let outcome = store::decide(
            self.store.as_ref(),
            DecideRequest {
                target: Target::Id(m.id),
                commit,
                actor: Actor::Verifier,
                reason: format!("check-back {attempt}: producer answered {word}"),
                send_lease: self.cfg.send_lease,
                verify_attempt: true,
            },
        )
        .await?;
        Ok(match outcome {
            DecideOutcome::Decided(row) => {
                tracing::info!(message_id = m.id, biz_id = %m.biz_id, decision = word, attempt, "check-back decided");
                if commit {
                    self.commits.committed(row);
                    Outcome::Committed
                } else {
                    Outcome::RolledBack
                }
            }
            DecideOutcome::AlreadyDecided(_) | DecideOutcome::NotFound => Outcome::Lost,
            DecideOutcome::Conflict(row) => {
                tracing::warn!(
                    message_id = m.id,
                    biz_id = %m.biz_id,
                    answered = word,
                    status = row.status.as_str(),
                    "check-back answer contradicts the message's final decision; kept the decision"
                );
                Outcome::Lost
            }
        })
    }

    async fn give_up(&self, m: &Message, attempt: u32, reason: String) -> anyhow::Result<Outcome> {
        let t = Transition {
            id: m.id,
            from: MessageStatus::Prepared,
            version: m.version,
            to: MessageStatus::VerifyFailed,
            send_lease: Duration::ZERO,
            verify_attempt: true,
            error: Some(reason.clone()),
            actor: Actor::Verifier,
            reason: format!(
                "no decision after {attempt} check-backs; an operator must decide ({reason})"
            ),
        };
        let Some(row) = self.store.transition(&t).await? else {
            return Ok(Outcome::Lost);
        };
        // Only the caller whose guarded UPDATE won gets here: one alert per failure.
        self.alerter.fire(Alert {
            kind: AlertKind::VerifyFailed,
            message_id: row.id,
            biz_id: row.biz_id.clone(),
            message_key: row.message_key.clone(),
            attempts: row.verify_attempts,
            last_error: reason,
        });
        Ok(Outcome::VerifyFailed)
    }
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
            outcomes: Vec::new(),
        }
    }

    #[test]
    fn a_round_filled_with_quarantined_rows_goes_again_but_one_all_given_back_does_not() {
        assert!(
            round(4, 0, 4, 0).was_full(),
            "all set aside: progress, go on"
        );
        assert!(round(4, 2, 2, 2).was_full());
        assert!(!round(4, 4, 0, 0).was_full(), "all given back: wait");
        assert!(!round(4, 1, 2, 1).was_full(), "fewer than asked: caught up");
    }
}
