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
//! `--verify-concurrency` calls in all, and a limit per producer that adapts
//! to how its endpoint answers ([`limit`]): it starts at
//! [`INITIAL_PER_PRODUCER`], grows while answers come quickly, halves on
//! timeouts, failed connections, 429 and 5xx, and never exceeds
//! `--verify-concurrency-per-producer`. A claimed row whose producer is at
//! its limit waits in this instance's queue for that producer (at most the
//! producer's limit of rows) and starts when one of its calls ends, as long as
//! its claim still outlasts a call; the rest are given back in one statement
//! (due again next round, no attempt counted). Queued rows count against the
//! claim's size, so what one round claims is what the free call slots can
//! start soon, and rounds do not wait for slow calls: one slow producer
//! cannot hold up the others.
//!
//! What an answer does:
//! - `commit` / `rollback`: the row goes from PREPARED to the answer,
//!   guarded by the claim's version, counted as an attempt and audited as
//!   `verifier`; a commit claims the send and is handed to this instance's
//!   forwarder (the fast path). The call records and the decisions of calls
//!   that finish together are written in batches ([`writes`]);
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
mod limit;
mod writes;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use std::time::Instant;

use tokio::sync::{Notify, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use trustmsg_verify_api::{CheckRequest, Decision, MessageStatus};

use crate::address_policy::AddressPolicy;
use crate::alert::{Alert, AlertKind, Alerter};
use crate::backoff::Backoff;
use crate::handoff::CommitListener;
use crate::registry::Registry;
use crate::store::{Actor, CheckAttempt, DynStore, Message, StoreResult, Transition};
use client::{CheckClient, CheckFailure, Endpoint};
use limit::{Load, Permit, ProducerLimits};
use writes::{Reschedule, Writes};

/// Check-back calls a producer gets at once before its endpoint has shown how
/// fast it answers.
pub const INITIAL_PER_PRODUCER: usize = 8;

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
    /// Calls in flight to one producer at most; each producer's limit starts
    /// at [`INITIAL_PER_PRODUCER`] (or this, when lower) and adapts.
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
    /// Given back without a call: its producer was at its concurrency limit
    /// with a full queue, or its claim ran too short while it waited.
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
    limits: Arc<ProducerLimits>,
    writes: Writes,
    queue: Mutex<Queue>,
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
                registry,
                client: CheckClient::new(policy),
                alerter,
                commits,
                slots: Arc::new(Semaphore::new(cfg.concurrency)),
                limits: ProducerLimits::new(INITIAL_PER_PRODUCER, cfg.concurrency_per_producer),
                writes: Writes::start(store.clone(), cfg.concurrency),
                queue: Mutex::new(Queue::default()),
                store,
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
            match self.start_batch(&mut calls).await {
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
            self.give_back(&queued).await;
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
        let claimed = self
            .inner
            .store
            .claim_due_verifies(limit, cfg.lease)
            .await?;
        let claimed_at = Instant::now();
        report.claimed = claimed.messages.len();
        report.quarantined = claimed.quarantined.len();
        self.inner.alerter.quarantined(&claimed.quarantined);
        let mut give_back = Vec::new();
        for m in claimed.messages {
            let Some(m) = self.try_start(m, calls) else {
                report.started += 1;
                continue;
            };
            let room = self.inner.limits.limit(&m.biz_id);
            let mut queue = self.inner.lock_queue();
            if queue.waiting(&m.biz_id) < room {
                queue.push(m, claimed_at);
                report.queued += 1;
            } else {
                give_back.push(m);
            }
        }
        let released = self.give_back(&give_back).await;
        report.outcomes.extend(released);
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

    /// Starts the call for `m` if its producer and the verifier have a free
    /// slot; otherwise hands `m` back.
    fn try_start(&self, m: Message, calls: &mut JoinSet<Outcome>) -> Option<Message> {
        let Some(producer) = self.inner.limits.try_acquire(&m.biz_id) else {
            return Some(m);
        };
        let Ok(overall) = self.inner.slots.clone().try_acquire_owned() else {
            return Some(m);
        };
        let inner = self.inner.clone();
        calls.spawn(async move {
            let _slot = overall;
            inner.check_one(m, producer).await
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
    /// back those whose claim could no longer outlast a call.
    async fn start_queued(&self, calls: &mut JoinSet<Outcome>) -> FromQueue {
        let cfg = &self.inner.cfg;
        let mut started = 0;
        let mut expired = Vec::new();
        // A call started later than this after its claim could outlive it.
        let usable = cfg
            .lease
            .saturating_sub(cfg.max_timeout.saturating_add(QUEUE_MARGIN));
        {
            let mut queue = self.inner.lock_queue();
            let producers: Vec<String> = queue.rows.keys().cloned().collect();
            for biz_id in producers {
                while let Some((m, claimed_at)) = queue.pop(&biz_id) {
                    if claimed_at.elapsed() > usable {
                        expired.push(m);
                        continue;
                    }
                    match self.try_start(m, calls) {
                        None => started += 1,
                        Some(m) => {
                            queue.push_front(m, claimed_at);
                            break;
                        }
                    }
                }
            }
        }
        FromQueue {
            started,
            released: self.give_back(&expired).await,
        }
    }

    /// Gives claimed rows back in one statement; one outcome per row.
    async fn give_back(&self, rows: &[Message]) -> Vec<Outcome> {
        if rows.is_empty() {
            return Vec::new();
        }
        let claims: Vec<(u64, u64)> = rows.iter().map(|m| (m.id, m.version)).collect();
        let given_back = self
            .inner
            .store
            .release_verifies(&claims, self.inner.cfg.interval)
            .await;
        let outcome = match given_back {
            Ok(_) => Outcome::Released,
            Err(e) => {
                tracing::warn!(rows = rows.len(), error = %e,
                    "giving back check-back claims failed; they come back after their lease");
                Outcome::Error
            }
        };
        vec![outcome; rows.len()]
    }
}

/// What [`Verifier::start_queued`] did.
struct FromQueue {
    /// Calls started.
    started: usize,
    /// One outcome per row given back because its claim ran too short.
    released: Vec<Outcome>,
}

/// How much longer than a call a queued row's claim must still last for the
/// call to start.
const QUEUE_MARGIN: Duration = Duration::from_secs(1);

/// Claimed rows waiting for a free call slot of their producer, oldest claim
/// first.
#[derive(Default)]
struct Queue {
    rows: HashMap<String, VecDeque<(Message, Instant)>>,
    len: usize,
}

impl Queue {
    fn waiting(&self, biz_id: &str) -> usize {
        self.rows.get(biz_id).map_or(0, VecDeque::len)
    }

    fn push(&mut self, m: Message, claimed_at: Instant) {
        self.add_one(&m).push_back((m, claimed_at));
    }

    /// Puts back a row just popped: it keeps its place at the head.
    fn push_front(&mut self, m: Message, claimed_at: Instant) {
        self.add_one(&m).push_front((m, claimed_at));
    }

    /// Counts one more row and returns its producer's queue.
    fn add_one(&mut self, m: &Message) -> &mut VecDeque<(Message, Instant)> {
        self.len += 1;
        self.rows.entry(m.biz_id.clone()).or_default()
    }

    fn pop(&mut self, biz_id: &str) -> Option<(Message, Instant)> {
        let rows = self.rows.get_mut(biz_id)?;
        let row = rows.pop_front();
        if rows.is_empty() {
            self.rows.remove(biz_id);
        }
        if row.is_some() {
            self.len -= 1;
        }
        row
    }

    fn take_all(&mut self) -> Vec<Message> {
        self.len = 0;
        self.rows
            .drain()
            .flat_map(|(_, rows)| rows.into_iter().map(|(m, _)| m))
            .collect()
    }
}

impl Inner {
    fn lock_queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn check_one(&self, m: Message, permit: Permit) -> Outcome {
        let outcome = match self.try_check_one(&m, &permit).await {
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

    async fn try_check_one(&self, m: &Message, permit: &Permit) -> anyhow::Result<Outcome> {
        let attempt = m.verify_attempts.saturating_add(1);
        let producer = self.registry.get(&m.biz_id).await?;
        let started = std::time::Instant::now();
        let ((status, answer), max_attempts, timeout) = match producer {
            None => (
                (None, Err(CheckFailure::NotRegistered(m.biz_id.clone()))),
                self.cfg.default_max_attempts,
                self.cfg.max_timeout,
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
                    endpoint.timeout,
                )
            }
        };
        let took = started.elapsed();
        permit.observe(match &answer {
            Ok(_) => Load::of_answer(took, timeout),
            Err(failure) => failure.load(),
        });
        // The record and the outcome are written at the same time (each in
        // its own batch): a check waits for one round trip, not two.
        let record = self.record(m, attempt, took, status, &answer);
        let apply = self.apply(m, attempt, max_attempts, &answer);
        let ((), outcome) = tokio::join!(record, apply);
        outcome
    }

    /// What the answer (or failure) does to the row.
    async fn apply(
        &self,
        m: &Message,
        attempt: u32,
        max_attempts: u32,
        answer: &Result<Decision, CheckFailure>,
    ) -> anyhow::Result<Outcome> {
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
        let again = Reschedule {
            id: m.id,
            version: m.version,
            error: reason,
            delay,
        };
        Ok(if self.writes.reschedule(again).await? {
            Outcome::Rescheduled
        } else {
            Outcome::Lost
        })
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
        if let Err(e) = self.writes.record(a).await {
            tracing::warn!(message_id = m.id, attempt, error = %e, "could not record the check-back call");
        }
    }

    /// Applies the producer's answer, guarded by the claim: a claimer whose
    /// lease ran out (and whose row someone else took) changes nothing.
    async fn decide(&self, m: &Message, commit: bool, attempt: u32) -> anyhow::Result<Outcome> {
        let (word, to) = if commit {
            ("commit", MessageStatus::Committed)
        } else {
            ("rollback", MessageStatus::RolledBack)
        };
        let t = Transition {
            id: m.id,
            from: MessageStatus::Prepared,
            version: m.version,
            to,
            send_lease: self.cfg.send_lease,
            verify_attempt: true,
            error: None,
            actor: Actor::Verifier,
            reason: format!("check-back {attempt}: producer answered {word}"),
        };
        let Some(row) = self.writes.transition(t, m).await? else {
            if let Some(now) = self.store.find_message_by_id(m.id).await? {
                if now.status.is_final() && now.status != to {
                    tracing::warn!(
                        message_id = m.id,
                        biz_id = %m.biz_id,
                        answered = word,
                        status = now.status.as_str(),
                        "check-back answer contradicts the message's final decision; kept the decision"
                    );
                }
            }
            return Ok(Outcome::Lost);
        };
        tracing::info!(message_id = m.id, biz_id = %m.biz_id, decision = word, attempt, "check-back decided");
        Ok(if commit {
            self.commits.committed(row);
            Outcome::Committed
        } else {
            Outcome::RolledBack
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
