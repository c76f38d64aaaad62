//! The exactly-once forwarder (`serve --exactly-once`): what it sends, it
//! sends in Kafka transactions of its own name, so that a consumer reading
//! `read_committed` sees each message once, whatever crashed when.
//!
//! - **Claims carry the owner's name.** Commits here claim nothing (their
//!   rows are due at once) and wake this worker, which claims due rows
//!   under its name ([`crate::store::SendStore::claim_owned_sends`]) and
//!   sends them in one transaction with their progress record
//!   ([`super::transactions`]). The SENT marks follow, written by the
//!   marker as in the default mode.
//! - **A restart takes back its own claims at once.** Opening the producer
//!   fences the predecessor of the same name; then the marks of its last
//!   committed progress record are written and every claim it still holds
//!   is given back (due at once). No lease is waited out, and nothing the
//!   predecessor committed is sent again.
//! - **Another owner's claims, only after fencing it.** A claim taken by
//!   another name is never taken over while it holds; once it has run out,
//!   this worker fences that owner, writes the marks of its progress and
//!   gives its claims back, and only then can anyone claim its rows. A
//!   zombie (stopped past its lease, then woken) finds its producer fenced:
//!   what it had open is aborted and it cannot begin again without opening
//!   its producer anew, which begins with the same recovery.
//! - **One transaction at a time.** A transaction is settled (committed or
//!   aborted) before the next claim, so a row this worker claims again
//!   after its own claim ran out cannot be in a transaction still open.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::budget::Held;
use super::fault;
use super::kafka::{KafkaSettings, SendError};
use super::marks::{Marker, PendingMarks};
use super::release::Releaser;
use super::transactions::{Aborted, Transactions};
use super::Forwarder;
use crate::backoff::Backoff;
use crate::handoff::CommitListener;
use crate::store::{deadline, Message, SendOwner, SentMark, StoreResult};

/// How this instance forwards exactly once.
#[derive(Debug, Clone)]
pub(crate) struct ExactlyOnceConfig {
    /// Its name: the claims' owner and the producer's `transactional.id`.
    pub(crate) owner: SendOwner,
    /// The compacted topic of the progress records.
    pub(crate) progress_topic: String,
}

/// Most SENT marks a progress record lists; beyond it no transaction
/// begins until the marker has written some (the database is behind).
const PROGRESS_MOST: usize = 8_192;

/// The wait before opening the producer again after it failed.
const REOPEN: Backoff = Backoff {
    base: Duration::from_millis(200),
    max: Duration::from_secs(10),
};

/// This instance's [`CommitListener`] in the exactly-once mode: a commit
/// claimed nothing, so there is nothing to hand over; it wakes the worker,
/// which claims it at once.
#[derive(Debug, Clone, Default)]
pub(crate) struct Wake(Arc<Notify>);

impl CommitListener for Wake {
    fn committed(&self, _message: Message) {
        self.0.notify_one();
    }
}

/// Starts the exactly-once worker over `forwarder`'s store and settings;
/// the listener wakes it on every commit.
pub(crate) fn spawn(
    forwarder: Forwarder,
    kafka: KafkaSettings,
    eos: ExactlyOnceConfig,
    cancel: CancellationToken,
) -> (Wake, JoinHandle<()>) {
    let wake = Wake::default();
    let task = tokio::spawn(run(forwarder, kafka, eos, wake.0.clone(), cancel));
    (wake, task)
}

async fn run(
    forwarder: Forwarder,
    kafka: KafkaSettings,
    eos: ExactlyOnceConfig,
    wake: Arc<Notify>,
    cancel: CancellationToken,
) {
    let me = eos.owner.clone();
    let mut attempt = 0;
    let mut txns = loop {
        match Transactions::open(kafka.clone(), me.clone(), eos.progress_topic.clone()).await {
            Ok(t) => break t,
            Err(e) => {
                attempt += 1;
                tracing::warn!(error = %e, owner = %me, "could not open the exactly-once producer; trying again");
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(REOPEN.delay(attempt)) => {}
                }
            }
        }
    };
    let worker = Worker {
        forwarder: forwarder.clone(),
        me: me.clone(),
    };
    while !cancel.is_cancelled() {
        match worker.recover(&txns, &me).await {
            Ok(()) => break,
            Err(e) => {
                tracing::warn!(error = %e, owner = %me, "could not take back this instance's claims; trying again");
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(REOPEN.delay(1)) => {}
                }
            }
        }
    }
    tracing::info!(owner = %me, "exactly-once forwarder ready: its predecessor is fenced and its claims taken back");

    let cfg = forwarder.inner.cfg.clone();
    let (mark_tx, mark_rx) = mpsc::channel::<SentMark>(4096);
    let promoted = Arc::new(Notify::new());
    let pending = PendingMarks::default();
    let marker = Marker::new(
        forwarder.inner.store.clone(),
        pending.clone(),
        cfg.sweep_batch.max(1) as usize,
        cfg.statement_timeout,
    );
    let marker = tokio::spawn(marker.run(mark_rx, promoted.clone()));
    let releaser = Releaser::start(forwarder.inner.store.clone());
    let mut tick = tokio::time::interval(cfg.sweep_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut backlog = false;
    let mut fenced_at: Option<std::time::Instant> = None;
    loop {
        if !backlog {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => break,
                _ = wake.notified() => {}
                _ = promoted.notified() => {}
                _ = tick.tick() => {}
            }
        } else if cancel.is_cancelled() {
            break;
        }
        backlog = false;
        // Lapsed claims are a sweep's business: looked for once per
        // `--sweep-interval`, not on every commit's wake-up.
        if fenced_at.is_none_or(|at| at.elapsed() >= cfg.sweep_interval) {
            if let Err(e) = worker.fence_lapsed(&txns).await {
                tracing::warn!(error = %e, "could not fence the owners of lapsed claims; trying next round");
                continue;
            }
            fenced_at = Some(std::time::Instant::now());
        }
        if pending.len() >= PROGRESS_MOST {
            // The database is behind with the marks: each progress record
            // would carry them all.
            continue;
        }
        let batch = match worker.claim(&pending, &releaser).await {
            Ok((batch, full)) => {
                backlog = full;
                batch
            }
            Err(e) => {
                tracing::warn!(error = %e, "exactly-once forwarder could not claim due sends; retrying next tick");
                continue;
            }
        };
        if batch.is_empty() {
            continue;
        }
        fault::after_claim();
        let (messages, held): (Vec<(Message, Vec<u8>)>, Vec<Held>) = batch
            .into_iter()
            .map(|(mut m, h)| {
                let payload = std::mem::take(&mut m.payload);
                ((m, payload), h)
            })
            .unzip();
        let kept: Vec<Message> = messages.iter().map(|(m, _)| m.clone()).collect();
        let began = std::time::Instant::now();
        let sent = txns.send(messages, pending.all()).await;
        tracing::debug!(messages = kept.len(), took = ?began.elapsed(), pending = pending.len(), "a Kafka transaction");
        drop(held);
        match sent {
            Ok(marks) => {
                fault::after_kafka_commit();
                metrics::counter!("trustmsg_forwarder_sent_total").increment(marks.len() as u64);
                for mark in marks {
                    crate::workers::flow::count(crate::workers::flow::Event::Sent);
                    // Pending before the next transaction's progress is
                    // read, whatever the marker's pace.
                    pending.add(mark);
                    let _ = mark_tx.send(mark).await;
                }
            }
            Err(Aborted {
                errors,
                cause,
                reopen,
            }) => {
                tracing::warn!(error = %cause, messages = kept.len(), "a Kafka transaction was aborted; its messages are retried");
                for (m, e) in kept.iter().zip(errors) {
                    let e = e.unwrap_or_else(|| {
                        SendError::Stalled(format!("aborted with its transaction: {cause}"))
                    });
                    forwarder.inner.record_failure(m, e).await;
                }
                if reopen && !worker.reopen(&mut txns, &cancel).await {
                    break;
                }
            }
        }
    }
    drop(mark_tx);
    if tokio::time::timeout(Duration::from_secs(5), marker)
        .await
        .is_err()
    {
        tracing::warn!("could not write the last SENT marks in time; the next start writes them from the progress topic");
    }
    tokio::task::spawn_blocking(move || drop(txns)).await.ok();
    tracing::info!("exactly-once forwarder stopped");
}

/// What the loop asks of the store and the producer.
struct Worker {
    forwarder: Forwarder,
    me: SendOwner,
}

impl Worker {
    fn limit(&self) -> Duration {
        self.forwarder.inner.cfg.statement_timeout
    }

    /// After `owner`'s producer is fenced: the marks of its last progress
    /// written, then its claims given back.
    async fn recover(&self, txns: &Transactions, owner: &SendOwner) -> anyhow::Result<()> {
        let store = &self.forwarder.inner.store;
        let marks = txns.progress_of(owner).await?;
        let marked = if marks.is_empty() {
            0
        } else {
            deadline::within(
                self.limit(),
                "mark SENT from progress",
                store.mark_sent(&marks),
            )
            .await?
        };
        let released = deadline::within(
            self.limit(),
            "release an owner's claims",
            store.release_owner(owner),
        )
        .await?;
        if marked > 0 || released > 0 {
            tracing::info!(
                owner = %owner,
                marked,
                released,
                "took back an owner's sends: its committed records marked SENT, its other claims due again"
            );
        }
        Ok(())
    }

    /// Fences and recovers every other owner whose claims ran out.
    async fn fence_lapsed(&self, txns: &Transactions) -> anyhow::Result<()> {
        let store = &self.forwarder.inner.store;
        let lapsed =
            deadline::within(self.limit(), "lapsed owners", store.lapsed_owners(&self.me)).await?;
        for owner in lapsed {
            tracing::warn!(owner = %owner, "claims of another instance ran out: fencing it before taking them");
            txns.fence(&owner).await?;
            self.recover(txns, &owner).await?;
        }
        Ok(())
    }

    /// Claims due rows under this owner's name, as many as fit the payload
    /// budget: each with its share of the budget held
    /// ([`Forwarder::admit`]). Whether the claim was full (more may be due).
    async fn claim(
        &self,
        pending: &PendingMarks,
        releaser: &Releaser,
    ) -> StoreResult<(Vec<(Message, Held)>, bool)> {
        let Some(room) = self.forwarder.claim_room() else {
            return Ok((Vec::new(), false));
        };
        let cfg = &self.forwarder.inner.cfg;
        let limit = cfg.sweep_batch;
        let claim =
            self.forwarder
                .inner
                .store
                .claim_owned_sends(&self.me, limit, room, cfg.send_lease);
        let claimed = deadline::within(cfg.statement_timeout, "claim due sends", claim).await?;
        let full = claimed.taken() == limit as usize && !claimed.out_of_room;
        let batch = claimed
            .messages
            .into_iter()
            .filter_map(|m| self.forwarder.admit(m, pending, releaser))
            .collect();
        Ok((batch, full))
    }

    /// Opens the producer again and takes back this owner's claims; false
    /// when stopped first.
    async fn reopen(&self, txns: &mut Transactions, cancel: &CancellationToken) -> bool {
        let mut attempt = 0;
        loop {
            let reopened = match txns.reopen().await {
                Ok(()) => self.recover(txns, &self.me).await,
                Err(e) => Err(e),
            };
            match reopened {
                Ok(()) => return true,
                Err(e) => {
                    attempt += 1;
                    tracing::warn!(error = %e, "could not open the exactly-once producer again; trying again");
                    tokio::select! {
                        _ = cancel.cancelled() => return false,
                        _ = tokio::time::sleep(REOPEN.delay(attempt)) => {}
                    }
                }
            }
        }
    }
}
