//! The forwarder: publishes committed messages to Kafka.
//!
//! Guarantees:
//! - **Nothing committed is lost.** A row stays `PENDING` until Kafka's
//!   delivery report says the record is stored; only then is it marked `SENT`
//!   (with partition and offset). Until that mark is written the row keeps a
//!   claim (`next_send_at` = a lease in the future, `version` bumped) and comes
//!   back to some sweeper when the lease runs out, whatever happened to the
//!   instance holding it. Delivery is therefore at-least-once; every record
//!   carries the message id header for de-duplication.
//! - **Fast.** A commit claims the row in the same UPDATE and hands it to this
//!   instance's forwarder at once ([`ForwarderHandle`]); the sweeper only picks
//!   up retries, expired claims and anything the fast path could not take,
//!   which is released (due at once, see [`release`]) rather than left to
//!   wait out its claim. An instance without a forwarder claims nothing.
//! - **Not before its time.** A commit before the message's `deliver_at`
//!   makes it due at that time instead of claiming it (the store's rule), so
//!   the fast path skips it and a sweeper sends it once due, within
//!   `--sweep-interval`; a commit after `deliver_at` is sent at once as usual.
//! - **No double claim.** The sweeper claims with `FOR UPDATE SKIP LOCKED` and
//!   pushes the lease out, and every later write (SENT, retry, SEND_FAILED) is
//!   guarded by the claim's `version`, so a stale owner's write matches nothing.
//!   The lease is longer than librdkafka's `message.timeout.ms` (start-up
//!   refuses otherwise), so a send in flight has finished, one way or the other,
//!   before another instance can claim its row.
//! - **Errors say what happens next** ([`kafka::SendError`]): a transient error
//!   retries after a [`Backoff`] delay (doubling, capped, jittered); a send that timed out in
//!   flight ("possibly persisted") is always retried, never failed, since a
//!   duplicate is acceptable and a loss is not; a permanent error, or a
//!   transient one at the attempt limit, makes the row `SEND_FAILED` and fires
//!   exactly one alert (only the writer whose guarded UPDATE won alerts).
//! - **An outage uses up no attempts.** Only errors Kafka answered count
//!   towards `--max-send-attempts`; timeouts and an unreachable cluster
//!   reschedule the row (new due time, `last_error`) without counting, so a
//!   message that waited out a long outage still gets its retries after it.
//! - **A stuck producer is replaced, not waited out.** When the idempotent
//!   producer can no longer make progress (the broker lost or refuses its
//!   producer state, a fatal client error, timeouts while the cluster
//!   answers), the sink builds a new one at once ([`kafka`]); the sends that
//!   met the old one are due again after the first backoff step and count no
//!   attempt.
//! - **An unreadable row stalls nothing.** A due row the store cannot read
//!   is quarantined by the claim (see [`crate::store`]) and alerted once
//!   (`quarantined`); the rest of the batch is sent as usual.
//! - **Bounded memory.** Payloads held for sending (commits waiting in the
//!   fast path, rows a sweep read, records in librdkafka's queue) take at
//!   most `--payload-budget-mib` ([`budget`]); beyond it commits are released
//!   to the sweepers and sweeps claim fewer rows, so a backlog waits in the
//!   database, not in memory.
//! - **In order per key** (producers registered `ordered`, see
//!   `store/sql/ordering.rs`): only a key's head is ever due or handed over
//!   by a commit, so the forwarder sends at most one message of a key at a
//!   time; a head's SENT mark makes the next one due and wakes this
//!   sweeper at once, so a key's messages follow each other in send round
//!   trips, not sweep intervals.
//! - **An acknowledged record is marked, not resent.** A SENT mark the
//!   database does not take is written again until it does, in smaller
//!   statements when one missed its deadline, and a row this instance
//!   claims again while its mark waits is not sent again ([`marks`]).
//! - **Graceful shutdown.** On cancellation the worker stops claiming, lets
//!   in-flight sends finish up to the grace period, writes their SENT marks and
//!   leaves everything else to the lease.

mod budget;
pub(crate) mod exactly_once;
mod fault;
pub(crate) mod kafka;
mod marks;
mod release;
mod transactions;

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::trace::SpanKind;
use opentelemetry::KeyValue;
use tokio::sync::{mpsc, Notify, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::handoff::CommitListener;
use crate::observability::trace::OwnSpan;
use crate::store::{deadline, Actor, DynStore, Message, PayloadRoom, Reschedule, SentMark};
use budget::{Held, PayloadBudget};
use kafka::{KafkaSink, SendError};
use marks::{Marker, PendingMarks};
use release::Releaser;

/// How the forwarder behaves.
#[derive(Debug, Clone)]
pub(crate) struct ForwarderConfig {
    /// How long a claim lasts; must exceed the Kafka message timeout.
    pub(crate) send_lease: Duration,
    /// How often the sweeper looks for due rows.
    pub(crate) sweep_interval: Duration,
    /// Rows claimed per sweep.
    pub(crate) sweep_batch: u32,
    /// Delays between retries after transient errors.
    pub(crate) backoff: Backoff,
    /// Attempts before a transiently failing send becomes SEND_FAILED.
    pub(crate) max_send_attempts: u32,
    /// Sends in flight at once.
    pub(crate) concurrency: usize,
    /// How long in-flight sends may take to finish on shutdown.
    pub(crate) shutdown_grace: Duration,
    /// The longest one database statement may take (see [`crate::store::deadline`]).
    pub(crate) statement_timeout: Duration,
    /// Payload bytes held for sending at once (see [`budget`]).
    pub(crate) payload_budget: usize,
    /// The largest payload prepare accepts (`--max-payload-bytes`): what a
    /// claimed row may take of the budget, at worst.
    pub(crate) max_payload_bytes: usize,
    /// Sends in Kafka transactions of this instance's name
    /// (`--exactly-once`, see [`exactly_once`]).
    pub(crate) exactly_once: Option<Box<exactly_once::ExactlyOnceConfig>>,
}

/// What happened to one claimed message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// In Kafka; the mark still has to be written.
    Sent(SentMark),
    /// Rescheduled after a transient error or a possibly-persisted timeout.
    Retrying,
    /// SEND_FAILED, alert fired.
    Failed,
    /// The failure could not be recorded (claim lost or database error); the
    /// lease brings the row back.
    Unrecorded,
}

/// Sends claimed messages to Kafka; cheap to clone.
#[derive(Clone)]
pub(crate) struct Forwarder {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarder")
            .field("sink", &self.inner.sink)
            .field("cfg", &self.inner.cfg)
            .finish_non_exhaustive()
    }
}

struct Inner {
    store: DynStore,
    sink: KafkaSink,
    cfg: ForwarderConfig,
    budget: PayloadBudget,
}

impl Forwarder {
    /// A forwarder over `store` publishing through `sink`.
    pub(crate) fn new(store: DynStore, sink: KafkaSink, cfg: ForwarderConfig) -> Self {
        metrics::describe_histogram!(
            "trustmsg_forwarder_send_seconds",
            metrics::Unit::Seconds,
            "One record's send, from its hand-off to librdkafka to the broker's acknowledgement (or error)"
        );
        let budget = PayloadBudget::new(cfg.payload_budget);
        Self {
            inner: Arc::new(Inner {
                store,
                sink,
                cfg,
                budget,
            }),
        }
    }

    /// Sends one claimed message; on failure records the retry or the
    /// SEND_FAILED (and alerts). A success still needs its mark written.
    pub(crate) async fn deliver(&self, mut m: Message) -> Outcome {
        let payload = std::mem::take(&mut m.payload);
        // With exported spans, the record's traceparent names the send span.
        let mut span = OwnSpan::child_of_stored(
            "trustmsg send",
            SpanKind::Producer,
            m.traceparent.as_deref(),
            m.tracestate.as_deref(),
            None,
            || {
                vec![
                    KeyValue::new("messaging.system", "kafka"),
                    KeyValue::new("messaging.operation.type", "send"),
                    KeyValue::new(
                        "messaging.destination.name",
                        m.topic.clone().unwrap_or_default(),
                    ),
                    KeyValue::new("trustmsg.message_id", m.id as i64),
                    KeyValue::new("trustmsg.send_attempt", i64::from(m.send_attempts) + 1),
                ]
            },
        );
        m.traceparent = span.propagate(m.traceparent.as_deref());
        let began = std::time::Instant::now();
        let sent = self.inner.sink.send(&m, payload).await;
        metrics::histogram!("trustmsg_forwarder_send_seconds")
            .record(began.elapsed().as_secs_f64());
        match &sent {
            Ok((partition, offset)) => {
                span.set(|| KeyValue::new("messaging.kafka.offset", *offset));
                span.set(|| {
                    KeyValue::new("messaging.destination.partition.id", partition.to_string())
                });
            }
            Err(e) => span.fail(e),
        }
        span.end();
        match sent {
            Ok((partition, offset)) => {
                metrics::counter!("trustmsg_forwarder_sent_total").increment(1);
                crate::workers::flow::count(crate::workers::flow::Event::Sent);
                Outcome::Sent(SentMark {
                    id: m.id,
                    version: m.version,
                    partition,
                    offset,
                    order: m.order_pos(),
                })
            }
            Err(e) => self.inner.record_failure(&m, e).await,
        }
    }

    /// Starts the background worker. The handle is this instance's
    /// [`CommitListener`]; the task ends after `cancel` and the drain.
    pub(crate) fn spawn(self, cancel: CancellationToken) -> (ForwarderHandle, JoinHandle<()>) {
        // Room for a good burst of commits; beyond it a commit is released
        // to the sweeper (due at once) instead of blocking the API.
        let (tx, rx) = mpsc::channel(self.inner.cfg.concurrency.max(1) * 4);
        let releaser = Releaser::start(self.inner.store.clone());
        let budget = self.inner.budget.clone();
        let task = tokio::spawn(self.run(rx, releaser.clone(), cancel));
        (
            ForwarderHandle {
                tx,
                releaser,
                budget,
            },
            task,
        )
    }

    async fn run(
        self,
        mut fast: mpsc::Receiver<(Message, Held)>,
        releaser: Releaser,
        cancel: CancellationToken,
    ) {
        let cfg = self.inner.cfg.clone();
        let permits = Arc::new(Semaphore::new(cfg.concurrency.max(1)));
        let (mark_tx, mark_rx) = mpsc::channel::<SentMark>(4096);
        // Rung when a SENT mark made an ordered key's next message due: it
        // is swept at once, not a sweep interval later.
        let promoted = Arc::new(Notify::new());
        let pending = PendingMarks::default();
        let marker = Marker::new(
            self.inner.store.clone(),
            pending.clone(),
            cfg.sweep_batch.max(1) as usize,
            cfg.statement_timeout,
        );
        let marker = tokio::spawn(marker.run(mark_rx, promoted.clone()));
        let mut inflight = JoinSet::new();
        let mut tick = tokio::time::interval(cfg.sweep_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Set after a full batch: there is a backlog, sweep again without waiting.
        let mut backlog = false;

        loop {
            while inflight.try_join_next().is_some() {}
            tokio::select! {
                biased;
                _ = cancel.cancelled() => break,
                Some((m, held)) = fast.recv() => {
                    let permit = tokio::select! {
                        p = permits.clone().acquire_owned() => p.expect("semaphore is never closed"),
                        _ = cancel.cancelled() => {
                            releaser.release(&m);
                            break;
                        }
                    };
                    let (this, marks) = (self.clone(), mark_tx.clone());
                    inflight.spawn(async move {
                        this.deliver_and_mark(m, held, &marks).await;
                        drop(permit);
                    });
                }
                _ = async {}, if backlog && permits.available_permits() > 0 => {
                    backlog = self.sweep_into(&permits, &mark_tx, &pending, &releaser, &mut inflight).await;
                }
                _ = promoted.notified() => {
                    backlog = self.sweep_into(&permits, &mark_tx, &pending, &releaser, &mut inflight).await;
                }
                _ = tick.tick() => {
                    backlog = self.sweep_into(&permits, &mark_tx, &pending, &releaser, &mut inflight).await;
                }
            }
        }

        // Drain: no new claims; commits handed over but not started are
        // released to the other instances' sweepers; in-flight sends get the
        // grace period, then whatever is left is abandoned to its lease (a
        // duplicate at worst).
        fast.close();
        while let Ok((m, _held)) = fast.try_recv() {
            releaser.release(&m);
        }
        drop(releaser);
        let drained = tokio::time::timeout(cfg.shutdown_grace, async {
            while inflight.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                abandoned = inflight.len(),
                "shutdown grace ran out with sends in flight; their rows come back after the lease"
            );
            inflight.abort_all();
            while inflight.join_next().await.is_some() {}
        }
        drop(mark_tx);
        if tokio::time::timeout(Duration::from_secs(5), marker)
            .await
            .is_err()
        {
            tracing::warn!("could not write the last SENT marks in time; those rows will be resent after the lease");
        }
        // Destroying the librdkafka handle can block on its threads; keep that
        // off the async workers.
        let _ = tokio::task::spawn_blocking(move || drop(self)).await;
        tracing::info!("forwarder stopped");
    }

    /// Sends `m`, which holds `held` of the payload budget until its send
    /// is over, and queues its SENT mark.
    async fn deliver_and_mark(&self, m: Message, held: Held, marks: &mpsc::Sender<SentMark>) {
        let outcome = self.deliver(m).await;
        drop(held);
        if let Outcome::Sent(mark) = outcome {
            // Only fails once the marker is gone (shutdown past its deadline):
            // the row is then resent after its lease.
            let _ = marks.send(mark).await;
        }
    }

    /// Claims as many due rows as there are free send slots and payload
    /// budget for, and starts them. Returns whether the batch was full (more
    /// may be due).
    ///
    /// A claim reads its rows whole; it takes, in due order, the rows whose
    /// payloads fit the free budget by the lengths their prepares recorded
    /// (a row from before that record counts as the largest payload), so
    /// it never reads more than the budget has room for.
    async fn sweep_into(
        &self,
        permits: &Arc<Semaphore>,
        marks: &mpsc::Sender<SentMark>,
        pending: &PendingMarks,
        releaser: &Releaser,
        inflight: &mut JoinSet<()>,
    ) -> bool {
        let (cfg, budget) = (&self.inner.cfg, &self.inner.budget);
        let slots = permits.available_permits().min(cfg.sweep_batch as usize);
        if slots == 0 {
            return false;
        }
        let Some(room) = self.claim_room() else {
            return false;
        };
        let claim = self
            .inner
            .store
            .claim_due_sends(slots as u32, room, cfg.send_lease);
        let claimed = match deadline::within(cfg.statement_timeout, "claim due sends", claim).await
        {
            Ok(claimed) => claimed,
            Err(e) => {
                tracing::warn!(error = %e, "sweeper could not claim due sends; retrying next tick");
                return false;
            }
        };
        // Quarantined rows took part of the limit too: more may be due
        // (the claim wrote their alerts). Due rows that did not fit wait for
        // room, swept again at the next tick.
        if claimed.out_of_room {
            budget.count_full("sweep");
        }
        let full = claimed.taken() == slots && !claimed.out_of_room;
        if !claimed.messages.is_empty() {
            tracing::debug!(
                claimed = claimed.messages.len(),
                "sweeper claimed due sends"
            );
        }
        for m in claimed.messages {
            let Some((m, held)) = self.admit(m, pending, releaser) else {
                continue;
            };
            let permit = permits
                .clone()
                .try_acquire_owned()
                .expect("only this loop takes permits and it checked they were free");
            let (this, marks) = (self.clone(), marks.clone());
            inflight.spawn(async move {
                this.deliver_and_mark(m, held, &marks).await;
                drop(permit);
            });
        }
        full
    }
}

impl Forwarder {
    /// The payload room a claim may fill now, or None (counted) when the
    /// budget has none. The room is not held during the claim: commits
    /// keep taking the fast path meanwhile, and a claimed row that then
    /// finds its room gone is given back ([`Forwarder::admit`]).
    fn claim_room(&self) -> Option<PayloadRoom> {
        let (cfg, budget) = (&self.inner.cfg, &self.inner.budget);
        let room = PayloadRoom {
            bytes: budget.free() as u64,
            unknown: cfg.max_payload_bytes.clamp(1, budget.limit()) as u64,
        };
        if room.bytes == 0 {
            budget.count_full("sweep");
            return None;
        }
        Some(room)
    }

    /// A claimed row to send, with its payload's share of the budget held;
    /// None when it is not to be sent now.
    fn admit(
        &self,
        m: Message,
        pending: &PendingMarks,
        releaser: &Releaser,
    ) -> Option<(Message, Held)> {
        // Its record is in Kafka, its mark not written yet (the database
        // was slow) and its lease ran out: the mark now names this claim,
        // and the record is not sent again.
        if pending.retarget(m.id, m.version) {
            metrics::counter!("trustmsg_forwarder_resends_spared_total").increment(1);
            tracing::debug!(
                message_id = m.id,
                "claimed again while its SENT mark waits; not sent again"
            );
            return None;
        }
        let budget = &self.inner.budget;
        let Some(held) = budget.try_hold(m.payload.len()) else {
            // Commits took the room after the claim looked: due at once
            // again, for the next sweep with room.
            budget.count_full("sweep");
            releaser.release(&m);
            return None;
        };
        Some((m, held))
    }
}

impl Inner {
    async fn record_failure(&self, m: &Message, e: SendError) -> Outcome {
        let counted = e.counts_as_attempt();
        let attempts = m.send_attempts.saturating_add(u32::from(counted));
        let give_up = match &e {
            SendError::Permanent(_) => true,
            SendError::PossiblyPersisted(_) | SendError::Unreachable(_) | SendError::Stalled(_) => {
                false
            }
            SendError::Transient(_) => attempts >= self.cfg.max_send_attempts,
        };
        if !give_up {
            metrics::counter!("trustmsg_forwarder_retries_total").increment(1);
            let delay = if let SendError::Stalled(_) = &e {
                // The new producer is there already: due again after the
                // first backoff step, whatever the row's earlier attempts,
                // and without a warning per message (the rebuild logged one).
                let delay = self.cfg.backoff.delay(1);
                tracing::debug!(message_id = m.id, retry_in = ?delay, error = %e, "send met a stuck producer; will retry");
                delay
            } else {
                let delay = self.cfg.backoff.delay(attempts);
                tracing::warn!(
                    message_id = m.id,
                    attempts,
                    retry_in = ?delay,
                    error = %e,
                    "send failed; will retry"
                );
                delay
            };
            let later = Reschedule {
                id: m.id,
                version: m.version,
                error: e.to_string(),
                delay,
            };
            let limit = self.cfg.statement_timeout;
            let rescheduled = if counted {
                let write = self.store.reschedule_send(&later);
                deadline::within(limit, "reschedule a send", write).await
            } else {
                let write = self.store.postpone_send(&later);
                deadline::within(limit, "postpone a send", write).await
            };
            return match rescheduled {
                Ok(true) => Outcome::Retrying,
                Ok(false) => Outcome::Unrecorded,
                Err(db) => {
                    tracing::warn!(message_id = m.id, error = %db, "could not record the retry; the row comes back after its lease");
                    Outcome::Unrecorded
                }
            };
        }
        let reason = match &e {
            SendError::Permanent(_) => e.to_string(),
            _ => format!(
                "{e} (gave up after {attempts} attempts, --max-send-attempts {})",
                self.cfg.max_send_attempts
            ),
        };
        let write = self
            .store
            .mark_send_failed(m.id, m.version, &reason, &Actor::Forwarder);
        match deadline::within(self.cfg.statement_timeout, "mark SEND_FAILED", write).await {
            // The SEND_FAILED and its alert were written together.
            Ok(Some(_)) => {
                metrics::counter!("trustmsg_forwarder_failed_total").increment(1);
                crate::workers::flow::count(crate::workers::flow::Event::Failed);
                Outcome::Failed
            }
            Ok(None) => {
                tracing::info!(
                    message_id = m.id,
                    "claim was taken over before SEND_FAILED could be written; the new owner decides"
                );
                Outcome::Unrecorded
            }
            Err(db) => {
                tracing::warn!(message_id = m.id, error = %db, "could not record SEND_FAILED; the row comes back after its lease");
                Outcome::Unrecorded
            }
        }
    }
}

/// This instance's [`CommitListener`]: hands commits to the running worker,
/// or, when it has no room (its channel or the payload budget full, or it
/// is stopping), releases their claims.
#[derive(Debug, Clone)]
pub(crate) struct ForwarderHandle {
    tx: mpsc::Sender<(Message, Held)>,
    releaser: Releaser,
    budget: PayloadBudget,
}

impl CommitListener for ForwarderHandle {
    fn committed(&self, message: Message) {
        // An ordered message behind its key's head took no claim: it is not
        // due until the head's SENT mark makes it so. A commit before the
        // message's delivery time made it due then and claimed nothing: the
        // sweepers send it when it is due.
        if message.next_send_at.is_none() || message.scheduled_by_commit() {
            return;
        }
        let Some(held) = self.budget.try_hold(message.payload.len()) else {
            self.budget.count_full("fast");
            tracing::debug!("payload budget spent; the commit is released to the sweepers");
            self.releaser.release(&message);
            return;
        };
        if let Err(e) = self.tx.try_send((message, held)) {
            tracing::debug!(error = %e, "fast path unavailable; the commit is released to the sweepers");
            self.releaser.release(&e.into_inner().0);
        }
    }
}
