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
//!   this worker reads which of its claims ran out, fences that owner,
//!   writes the marks of its progress and gives back those claims (under
//!   the versions it read: one the owner took again since, having opened
//!   its producer anew, stays its own), and only then can anyone claim
//!   those rows. A
//!   zombie (stopped past its lease, then woken) finds its producer fenced:
//!   what it had open is aborted and it cannot begin again without opening
//!   its producer anew, which begins with the same recovery.
//! - **One transaction at a time, the next batch claimed meanwhile.** The
//!   worker's claimer claims the next batch while its sender runs the last
//!   one's transaction. A row of the open transaction that the claimer
//!   takes again (its claim ran out meanwhile) is not sent twice: the
//!   transaction's outcome is written under that newest claim
//!   ([`InFlight`]). The producer is opened again, and the owner's claims
//!   given back, with no claim under way; a batch claimed before that is
//!   not sent ([`Claims`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};
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
use crate::workers::liveness::Starting;

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
/// the listener wakes it on every commit. `starting` keeps `/readyz`
/// failing until its predecessor is fenced and its claims taken back.
pub(crate) fn spawn(
    forwarder: Forwarder,
    kafka: KafkaSettings,
    eos: ExactlyOnceConfig,
    starting: Starting,
    cancel: CancellationToken,
) -> (Wake, JoinHandle<()>) {
    let wake = Wake::default();
    let task = tokio::spawn(run(forwarder, kafka, eos, wake.0.clone(), starting, cancel));
    (wake, task)
}

async fn run(
    forwarder: Forwarder,
    kafka: KafkaSettings,
    eos: ExactlyOnceConfig,
    wake: Arc<Notify>,
    starting: Starting,
    cancel: CancellationToken,
) {
    let me = eos.owner.clone();
    let mut attempt = 0;
    let txns = loop {
        match Transactions::open(kafka.clone(), me.clone(), eos.progress_topic.clone()).await {
            Ok(t) => break Arc::new(t),
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
        txns: txns.clone(),
        claims: Arc::new(Claims::default()),
        in_flight: InFlight::default(),
        pending: PendingMarks::default(),
    };
    while !cancel.is_cancelled() {
        match worker.recover(&me, None).await {
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
    starting.ready();

    let cfg = forwarder.inner.cfg.clone();
    let (mark_tx, mark_rx) = mpsc::channel::<SentMark>(4096);
    let promoted = Arc::new(Notify::new());
    let marker = Marker::new(
        forwarder.inner.store.clone(),
        worker.pending.clone(),
        cfg.sweep_batch.max(1) as usize,
        cfg.statement_timeout,
    );
    let marker = tokio::spawn(marker.run(mark_rx, promoted.clone()));
    // The next batch is claimed while the last one's transaction runs: one
    // batch waits at most.
    let (batch_tx, batch_rx) = mpsc::channel::<Batch>(1);
    let claimer = tokio::spawn(
        worker
            .clone()
            .claim_loop(wake, promoted, batch_tx, cancel.clone()),
    );
    worker.send_loop(batch_rx, mark_tx, &cancel).await;
    claimer.abort();
    let _ = claimer.await;
    if tokio::time::timeout(Duration::from_secs(5), marker)
        .await
        .is_err()
    {
        tracing::warn!("could not write the last SENT marks in time; the next start writes them from the progress topic");
    }
    drop(worker);
    if let Some(txns) = Arc::into_inner(txns) {
        tokio::task::spawn_blocking(move || drop(txns)).await.ok();
    }
    tracing::info!("exactly-once forwarder stopped");
}

/// A claimed batch, each message with its share of the payload budget.
struct Batch {
    /// The claims' epoch ([`Claims`]) when it was claimed.
    epoch: u64,
    messages: Vec<(Message, Held)>,
}

/// The claims' epoch: claims are taken under its lock, and a recovery of
/// this owner (which gives back every claim it holds) takes the lock and
/// moves the epoch on. A batch claimed in an earlier epoch was given back:
/// it is not sent.
#[derive(Debug, Default)]
struct Claims {
    taking: tokio::sync::Mutex<()>,
    epoch: AtomicU64,
}

/// The rows claimed and not settled yet (waiting for their transaction or
/// in the open one), by id: the claims' epoch and the version of their
/// newest claim. A claim that takes one of them again (its lease ran out
/// meanwhile) does not send it twice: its transaction's outcome is written
/// under that newest claim (committed: its SENT mark; aborted: its retry),
/// as a mark still pending is retargeted ([`PendingMarks::retarget`]). A
/// row of an earlier epoch was given back; claimed again, it is sent.
#[derive(Debug, Clone, Default)]
struct InFlight(Arc<std::sync::Mutex<HashMap<u64, (u64, u64)>>>);

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (u64, u64)>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Row `id`, claimed under `version` in `epoch`: None when an unsettled
    /// claim of this epoch has it (which then answers for this claim), else
    /// what `then` says, and in flight from now on if that is to send it.
    /// `then` runs under this lock, so that a transaction settling
    /// meanwhile hands its marks to the pending ones first
    /// ([`Forwarder::admit`] asks those).
    fn admit<T>(
        &self,
        id: u64,
        version: u64,
        epoch: u64,
        then: impl FnOnce() -> Option<T>,
    ) -> Option<T> {
        let mut unsettled = self.lock();
        match unsettled.get_mut(&id) {
            Some((e, newest)) if *e == epoch => {
                *newest = version;
                metrics::counter!("trustmsg_forwarder_resends_spared_total").increment(1);
                None
            }
            _ => {
                let admitted = then()?;
                unsettled.insert(id, (epoch, version));
                Some(admitted)
            }
        }
    }

    /// A transaction committed: its marks, each under its newest claim,
    /// pending from now on.
    fn committed(&self, mut marks: Vec<SentMark>, pending: &PendingMarks) -> Vec<SentMark> {
        let mut unsettled = self.lock();
        for mark in &mut marks {
            if let Some((_, version)) = unsettled.remove(&mark.id) {
                mark.version = version;
            }
            pending.add(*mark);
        }
        marks
    }

    /// A transaction aborted, or a batch of `epoch` was not sent: the newest
    /// claim of each of `ids`, settled now.
    fn settled(&self, ids: impl IntoIterator<Item = u64>, epoch: u64) -> HashMap<u64, u64> {
        let mut unsettled = self.lock();
        ids.into_iter()
            .filter_map(|id| match unsettled.get(&id) {
                Some((e, _)) if *e == epoch => unsettled.remove(&id).map(|(_, v)| (id, v)),
                _ => None,
            })
            .collect()
    }
}

/// What the worker's two halves share: the claimer, which claims due
/// rows and fences lapsed owners, and the sender, which sends each batch in
/// one transaction.
#[derive(Clone)]
struct Worker {
    forwarder: Forwarder,
    me: SendOwner,
    txns: Arc<Transactions>,
    claims: Arc<Claims>,
    in_flight: InFlight,
    pending: PendingMarks,
}

impl Worker {
    fn limit(&self) -> Duration {
        self.forwarder.inner.cfg.statement_timeout
    }

    /// Claims due rows as they come (woken by commits, by ordered keys
    /// whose next message is due, or by the sweep's tick) and hands each
    /// batch to the sender: the next is claimed while the last one's
    /// transaction runs.
    async fn claim_loop(
        self,
        wake: Arc<Notify>,
        promoted: Arc<Notify>,
        batches: mpsc::Sender<Batch>,
        cancel: CancellationToken,
    ) {
        let cfg = self.forwarder.inner.cfg.clone();
        let releaser = Releaser::start(self.forwarder.inner.store.clone());
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
            // A fence that fails holds back nobody's claims but the lapsed
            // owner's: this instance's own go on being claimed meanwhile.
            if fenced_at.is_none_or(|at| at.elapsed() >= cfg.sweep_interval) {
                if let Err(e) = self.fence_lapsed().await {
                    tracing::warn!(error = %e, "could not fence the owners of lapsed claims; trying next round");
                }
                fenced_at = Some(std::time::Instant::now());
            }
            if self.pending.len() >= PROGRESS_MOST {
                // The database is behind with the marks: each progress
                // record would carry them all.
                continue;
            }
            // Claimed only when the sender has room for it: one batch
            // waits at most, its claims fresh.
            let Ok(room) = batches.reserve().await else {
                break;
            };
            let batch = match self.claim(&releaser).await {
                Ok((batch, full)) => {
                    backlog = full;
                    batch
                }
                Err(e) => {
                    tracing::warn!(error = %e, "exactly-once forwarder could not claim due sends; retrying next tick");
                    continue;
                }
            };
            if batch.messages.is_empty() {
                continue;
            }
            fault::after_claim();
            room.send(batch);
        }
    }

    /// Sends each batch in one transaction, one transaction at a time, and
    /// hands the committed ones' marks to the marker; when stopped, the
    /// batch already claimed is sent before it returns.
    async fn send_loop(
        &self,
        mut batches: mpsc::Receiver<Batch>,
        marks: mpsc::Sender<SentMark>,
        cancel: &CancellationToken,
    ) {
        loop {
            let batch = tokio::select! {
                biased;
                b = batches.recv() => b,
                _ = cancel.cancelled() => {
                    batches.close();
                    batches.recv().await
                }
            };
            let Some(batch) = batch else { break };
            if batch.epoch != self.claims.epoch.load(Ordering::Acquire) {
                // Claimed before this owner's claims were given back (after
                // its producer was opened again): the rows are nobody's now.
                let ids = batch.messages.iter().map(|(m, _)| m.id);
                self.in_flight.settled(ids, batch.epoch);
                continue;
            }
            if !self.send(batch, &marks, cancel).await {
                break;
            }
        }
    }

    /// Sends one batch in one transaction; false when the producer could
    /// not be opened again before the stop.
    async fn send(
        &self,
        batch: Batch,
        marks: &mpsc::Sender<SentMark>,
        cancel: &CancellationToken,
    ) -> bool {
        let batch_epoch = batch.epoch;
        let (messages, held): (Vec<(Message, Vec<u8>)>, Vec<Held>) = batch
            .messages
            .into_iter()
            .map(|(mut m, h)| {
                let payload = std::mem::take(&mut m.payload);
                ((m, payload), h)
            })
            .unzip();
        let kept: Vec<Message> = messages.iter().map(|(m, _)| m.clone()).collect();
        fault::hold_first_send().await;
        let began = std::time::Instant::now();
        let sent = self.txns.send(messages, self.pending.all()).await;
        tracing::debug!(messages = kept.len(), took = ?began.elapsed(), pending = self.pending.len(), "a Kafka transaction");
        drop(held);
        match sent {
            Ok(committed) => {
                fault::after_kafka_commit();
                metrics::counter!("trustmsg_forwarder_sent_total")
                    .increment(committed.len() as u64);
                // Pending before the next transaction's progress is read,
                // whatever the marker's pace.
                for mark in self.in_flight.committed(committed, &self.pending) {
                    crate::workers::flow::count(crate::workers::flow::Event::Sent);
                    let _ = marks.send(mark).await;
                }
                true
            }
            Err(Aborted {
                errors,
                cause,
                reopen,
            }) => {
                tracing::warn!(error = %cause, messages = kept.len(), "a Kafka transaction was aborted; its messages are retried");
                let newest = self
                    .in_flight
                    .settled(kept.iter().map(|m| m.id), batch_epoch);
                for (mut m, e) in kept.into_iter().zip(errors) {
                    m.version = newest.get(&m.id).copied().unwrap_or(m.version);
                    let e = e.unwrap_or_else(|| {
                        SendError::Stalled(format!("aborted with its transaction: {cause}"))
                    });
                    self.forwarder.inner.record_failure(&m, e).await;
                }
                !reopen || self.reopen(cancel).await
            }
        }
    }

    /// After `owner`'s producer is fenced: the marks of its last progress
    /// written, then its claims given back: all of them (`lapsed` None,
    /// this instance's own at its start or reopen), or those of `lapsed`
    /// that it still holds under the same versions (another owner's).
    async fn recover(
        &self,
        owner: &SendOwner,
        lapsed: Option<&[(u64, u64)]>,
    ) -> anyhow::Result<()> {
        let store = &self.forwarder.inner.store;
        let mut marks = self.txns.progress_of(owner).await?;
        // A row the owner claimed again after its transaction's progress
        // named it (its lease ran out while the batch waited or the
        // transaction was open: [`InFlight`]) is marked under the claim it
        // holds now; under the progress's version the mark would match
        // nothing, and the row, given back below, be sent again.
        let ids: Vec<u64> = marks.iter().map(|m| m.id).collect();
        let held: HashMap<u64, u64> = deadline::within(
            self.limit(),
            "an owner's held claims",
            store.held_claims(owner, &ids),
        )
        .await?
        .into_iter()
        .collect();
        for mark in &mut marks {
            if let Some(version) = held.get(&mark.id) {
                mark.version = *version;
            }
        }
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
        let release = async {
            match lapsed {
                None => store.release_owner(owner).await,
                Some(claims) => store.release_claims_of(owner, claims).await,
            }
        };
        let released = deadline::within(self.limit(), "release an owner's claims", release).await?;
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
    async fn fence_lapsed(&self) -> anyhow::Result<()> {
        let store = &self.forwarder.inner.store;
        let lapsed =
            deadline::within(self.limit(), "lapsed owners", store.lapsed_owners(&self.me)).await?;
        for owner in lapsed {
            tracing::warn!(owner = %owner, "claims of another instance ran out: fencing it before taking them");
            // The lapsed claims, read before the fence: the owner may open
            // its producer anew right after it and claim rows again (even
            // these, under new versions); those are its own to send.
            // Giving back all it holds once its progress is read gave back
            // a batch it was sending, and the batch went out twice.
            let claims = deadline::within(
                self.limit(),
                "an owner's lapsed claims",
                store.lapsed_claims(&owner),
            )
            .await?;
            self.txns.fence(&owner).await?;
            self.recover(&owner, Some(&claims)).await?;
        }
        Ok(())
    }

    /// Claims due rows under this owner's name, as many as fit the payload
    /// budget: each with its share of the budget held
    /// ([`Forwarder::admit`]), none of the open transaction's
    /// ([`InFlight::admit`]). Whether the claim was full (more may be due).
    async fn claim(&self, releaser: &Releaser) -> StoreResult<(Batch, bool)> {
        let _taking = self.claims.taking.lock().await;
        let epoch = self.claims.epoch.load(Ordering::Acquire);
        let mut batch = Batch {
            epoch,
            messages: Vec::new(),
        };
        let Some(room) = self.forwarder.claim_room() else {
            return Ok((batch, false));
        };
        let cfg = &self.forwarder.inner.cfg;
        let limit = cfg.sweep_batch;
        let claim =
            self.forwarder
                .inner
                .store
                .claim_owned_sends(&self.me, limit, room, cfg.send_lease);
        let began = std::time::Instant::now();
        let claimed = deadline::within(cfg.statement_timeout, "claim due sends", claim).await?;
        let full = claimed.taken() == limit as usize && !claimed.out_of_room;
        tracing::debug!(
            taken = claimed.taken(),
            out_of_room = claimed.out_of_room,
            took = ?began.elapsed(),
            oldest_ms = claimed.messages.iter().filter_map(|m| m.decided_at).min().map(|d| (chrono::Utc::now() - d).num_milliseconds()),
            newest_ms = claimed.messages.iter().filter_map(|m| m.decided_at).max().map(|d| (chrono::Utc::now() - d).num_milliseconds()),
            "an exactly-once claim"
        );
        batch.messages = claimed
            .messages
            .into_iter()
            .filter_map(|m| {
                self.in_flight.admit(m.id, m.version, epoch, || {
                    self.forwarder.admit(m, &self.pending, releaser)
                })
            })
            .collect();
        Ok((batch, full))
    }

    /// Opens the producer again and takes back this owner's claims (no
    /// claim is taken meanwhile, and the batches claimed before are not
    /// sent); false when stopped first.
    async fn reopen(&self, cancel: &CancellationToken) -> bool {
        let _taking = self.claims.taking.lock().await;
        let mut attempt = 0;
        loop {
            let reopened = match self.txns.reopen().await {
                Ok(()) => self.recover(&self.me, None).await,
                Err(e) => Err(e),
            };
            match reopened {
                Ok(()) => {
                    self.claims.epoch.fetch_add(1, Ordering::AcqRel);
                    return true;
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(id: u64, version: u64) -> SentMark {
        SentMark {
            id,
            version,
            partition: 0,
            offset: id as i64,
            order: None,
        }
    }

    #[test]
    fn a_row_claimed_again_before_its_transaction_settles_is_not_sent_and_its_mark_takes_the_new_claim(
    ) {
        let (in_flight, pending) = (InFlight::default(), PendingMarks::default());
        for (id, version) in [(1, 5), (2, 7)] {
            assert_eq!(
                in_flight.admit(id, version, 0, || Some("sent")),
                Some("sent")
            );
        }
        assert_eq!(in_flight.admit(1, 6, 0, || Some("sent")), None);
        assert_eq!(in_flight.admit(3, 1, 0, || Some("sent")), Some("sent"));
        let marks = in_flight.committed(vec![mark(1, 5), mark(2, 7)], &pending);
        assert_eq!(
            marks.iter().map(|m| (m.id, m.version)).collect::<Vec<_>>(),
            [(1, 6), (2, 7)]
        );
        assert_eq!(
            pending.all(),
            marks,
            "pending before anything else is claimed"
        );
        // Settled: a later claim is the pending marks' business.
        assert_eq!(in_flight.admit(1, 8, 0, || Some("asked")), Some("asked"));
        // Row 3 is still unsettled.
        assert_eq!(in_flight.admit(3, 2, 0, || Some("sent")), None);
    }

    #[test]
    fn an_aborted_transaction_retries_each_row_under_its_newest_claim() {
        let in_flight = InFlight::default();
        for (id, version) in [(4, 1), (5, 3)] {
            in_flight.admit(id, version, 0, || Some(()));
        }
        assert_eq!(in_flight.admit(4, 2, 0, || Some(())), None);
        let newest = in_flight.settled([4, 5], 0);
        assert_eq!(newest.get(&4), Some(&2));
        assert_eq!(newest.get(&5), Some(&3));
        assert_eq!(
            in_flight.admit(4, 9, 0, || Some("claimed")),
            Some("claimed")
        );
    }

    #[test]
    fn a_row_given_back_and_claimed_again_is_sent_and_the_old_batch_settles_nothing_of_it() {
        let in_flight = InFlight::default();
        in_flight.admit(7, 1, 0, || Some(()));
        // The producer opened again: epoch 1, row 7 given back and claimed
        // again before the old batch was dropped.
        assert_eq!(in_flight.admit(7, 3, 1, || Some("sent")), Some("sent"));
        assert!(in_flight.settled([7], 0).is_empty());
        assert_eq!(in_flight.settled([7], 1).get(&7), Some(&3));
    }
}
