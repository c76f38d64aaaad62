//! SENT marks: written back in batches once Kafka has acknowledged their
//! records, and never turned into a resend because the database was slow.
//!
//! - **A mark that fails is retried as a mark.** A mark that could not be
//!   written stays pending here and is written again after a backoff
//!   ([`RETRY`]), for as long as it takes the database to answer: its
//!   record is in Kafka, so its row must become SENT, not come back after
//!   its lease to be sent again. (Marks used to be given up after five
//!   tries, and their rows were resent.)
//! - **A statement that misses its deadline is split.** The marks of a
//!   statement cut off at its deadline go again in statements of half as
//!   many, down to one, and the size grows back (doubling) with each
//!   statement that answers: a batch too big for a slow database becomes
//!   batches that fit, instead of the same one timing out again.
//! - **A pending mark spares its row a resend here.** A mark may wait past
//!   its claim's lease. When this instance's sweeper claims the row again
//!   meanwhile, the record is not sent again: the mark moves to the new
//!   claim's version ([`PendingMarks::retarget`]) and is written as such.
//!   Another instance that claims the row sends the record again (at least
//!   once: consumers de-duplicate on the message id), and this mark then
//!   matches nothing, which is harmless.
//! - **Bounded, and it ends by itself.** At most [`PENDING_MOST`] marks
//!   wait; beyond that the marker takes no more from its channel and the
//!   sends behind it wait for room, so sending pauses while the database
//!   cannot take marks. Once its channel is closed (shutdown) the marker
//!   writes what is pending and ends at the first failure: those rows come
//!   back after their lease.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::{mpsc, Notify};

use crate::backoff::Backoff;
use crate::store::{deadline, DynStore, SendStore, SentMark, StoreResult};

/// How long the first SENT mark of a batch waits for others. A mark is off
/// every caller's path (the record is in Kafka, the row keeps its claim
/// meanwhile), so waiting costs nothing but the moment the row shows SENT,
/// and it saves a statement and an fsync per message under steady load.
const MARK_LINGER: Duration = Duration::from_millis(20);

/// Most marks waiting to be written (about 3 MB).
pub(super) const PENDING_MOST: usize = 65_536;

/// The wait before writing marks again after a failure.
const RETRY: Backoff = Backoff {
    base: Duration::from_millis(100),
    max: Duration::from_secs(5),
};

/// Where the marker writes: the store, or a test's stand-in.
#[async_trait]
pub(super) trait MarkSink: Send + Sync + 'static {
    /// [`crate::store::SendStore::mark_sent`].
    async fn mark_sent(&self, marks: &[SentMark]) -> StoreResult<u64>;
}

#[async_trait]
impl MarkSink for DynStore {
    async fn mark_sent(&self, marks: &[SentMark]) -> StoreResult<u64> {
        SendStore::mark_sent(self.as_ref(), marks).await
    }
}

/// How long the marks of a statement that matched fewer rows than it
/// named are kept for a claim of this instance to find ([`PendingMarks`]).
const UNSURE_FOR: Duration = Duration::from_secs(600);

/// Most such marks kept; beyond it the oldest go first.
const UNSURE_MOST: usize = 65_536;

/// How long an unsure mark is also listed in the exactly-once progress
/// records, and how many at most: the time a claim takes from its
/// statement to its retarget is what matters, and every transaction carries
/// the list.
const UNSURE_LISTED_FOR: Duration = Duration::from_secs(30);
const UNSURE_LISTED_MOST: usize = 4_096;

/// The SENT marks not written yet, by message id; shared by the marker,
/// which writes them, and the sweeper, which retargets one whose row it
/// claimed again. Cheap to clone.
///
/// A statement that matched fewer rows than it named does not say which
/// of its marks missed. One that missed may be a row this instance has
/// just claimed again (its lease ran out while the mark waited): the claim
/// took the row, with a new version, just before the statement, and is
/// retargeting the mark just after it. So the marks of such a statement are
/// kept a while as unsure: a claim of this instance that finds one is
/// spared a resend as a pending one is, and the mark goes back to pending
/// under that claim. A mark that did match leaves its row SENT, which no
/// claim takes again. Before, such a mark was simply dropped, and the row
/// sent a second time.
#[derive(Debug, Clone, Default)]
pub(crate) struct PendingMarks(Arc<Mutex<Marks>>);

#[derive(Debug, Default)]
struct Marks {
    pending: BTreeMap<u64, SentMark>,
    /// Written by a statement that matched fewer rows than it named, and
    /// when.
    unsure: BTreeMap<u64, (SentMark, Instant)>,
}

impl Marks {
    /// Unsure marks past [`UNSURE_FOR`] go, then the oldest beyond
    /// [`UNSURE_MOST`].
    fn forget_unsure(&mut self, now: Instant) {
        self.unsure
            .retain(|_, (_, at)| now.saturating_duration_since(*at) < UNSURE_FOR);
        let excess = self.unsure.len().saturating_sub(UNSURE_MOST);
        if excess == 0 {
            return;
        }
        // One sort for the lot, under the lock the claims wait on: not a
        // scan of the whole map per mark dropped.
        let mut by_age: Vec<(Instant, u64)> =
            self.unsure.iter().map(|(id, (_, at))| (*at, *id)).collect();
        by_age.sort_unstable();
        for (_, id) in by_age.into_iter().take(excess) {
            self.unsure.remove(&id);
        }
    }
}

impl PendingMarks {
    fn lock(&self) -> MutexGuard<'_, Marks> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn add(&self, mark: SentMark) {
        self.lock().pending.insert(mark.id, mark);
    }

    pub(super) fn len(&self) -> usize {
        self.lock().pending.len()
    }

    /// Every mark not written yet, and the recent unsure ones: what a
    /// progress record lists (a record whose mark may have missed is still
    /// one this instance sent, and a claim may be retargeting it).
    pub(super) fn all(&self) -> Vec<SentMark> {
        let marks = self.lock();
        let now = Instant::now();
        let unsure = marks
            .unsure
            .iter()
            .filter(|(id, (_, at))| {
                !marks.pending.contains_key(id)
                    && now.saturating_duration_since(*at) < UNSURE_LISTED_FOR
            })
            .map(|(_, (m, _))| *m)
            .take(UNSURE_LISTED_MOST);
        marks.pending.values().copied().chain(unsure).collect()
    }

    fn is_empty(&self) -> bool {
        self.lock().pending.is_empty()
    }

    /// The `n` oldest (lowest ids, the claims that run out first).
    fn oldest(&self, n: usize) -> Vec<SentMark> {
        self.lock().pending.values().take(n).copied().collect()
    }

    /// Takes out the marks of `batch`, just written, that are still as they
    /// were: one retargeted meanwhile stays, to be written with its new
    /// version. `all_matched` false: the statement matched fewer rows than
    /// it named, and the marks taken out are kept as unsure.
    fn written(&self, batch: &[SentMark], all_matched: bool) {
        let mut marks = self.lock();
        let now = Instant::now();
        for mark in batch {
            if marks.pending.get(&mark.id) == Some(mark) {
                marks.pending.remove(&mark.id);
                if !all_matched {
                    marks.unsure.insert(mark.id, (*mark, now));
                }
            }
        }
        if !all_matched {
            marks.forget_unsure(now);
        }
    }

    /// Row `id`, whose record Kafka acknowledged but whose mark is still
    /// pending (or unsure), was claimed again by this instance (its claim
    /// left `version`): the mark now names that claim, pending. True when
    /// there was such a mark: the record must not be sent again.
    pub(crate) fn retarget(&self, id: u64, version: u64) -> bool {
        let mut marks = self.lock();
        if let Some(mark) = marks.pending.get_mut(&id) {
            mark.version = version;
            return true;
        }
        match marks.unsure.remove(&id) {
            Some((mark, _)) => {
                marks.pending.insert(id, SentMark { version, ..mark });
                true
            }
            None => false,
        }
    }
}

/// What one statement of marks came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wrote {
    /// Nothing was pending.
    Nothing,
    /// Written; `ordered`: some of them were ordered messages, whose keys'
    /// next messages may be due now.
    Written { ordered: bool },
    /// Cut off at its deadline: the next statement is smaller; go again at once.
    Split,
    /// Failed: go again after a backoff.
    Failed,
}

/// Writes SENT marks; see the module docs.
pub(super) struct Marker<S> {
    sink: S,
    pending: PendingMarks,
    /// Marks per statement at most (`--sweep-batch`).
    most: usize,
    /// Marks per statement now.
    size: usize,
    /// The deadline of one statement.
    limit: Duration,
    /// Statements that failed in a row.
    failures: u32,
}

impl<S: MarkSink> Marker<S> {
    /// A marker writing to `sink` statements of at most `most` marks, each
    /// within `limit`.
    pub(super) fn new(sink: S, pending: PendingMarks, most: usize, limit: Duration) -> Self {
        let most = most.max(1);
        Self {
            sink,
            pending,
            most,
            size: most,
            limit,
            failures: 0,
        }
    }

    /// Writes the oldest pending marks, as many as the size allows, in one
    /// statement.
    pub(super) async fn write_once(&mut self) -> Wrote {
        let batch = self.pending.oldest(self.size);
        if batch.is_empty() {
            return Wrote::Nothing;
        }
        let write = self.sink.mark_sent(&batch);
        match deadline::race(self.limit, "mark SENT", write).await {
            Ok(Ok(matched)) => {
                self.pending.written(&batch, matched >= batch.len() as u64);
                self.failures = 0;
                self.size = self.size.saturating_mul(2).min(self.most);
                if matched < batch.len() as u64 {
                    tracing::info!(
                        marks = batch.len(),
                        matched,
                        "some SENT marks matched nothing: their claims were taken over (the new owner resends; consumers de-duplicate on the message id)"
                    );
                }
                Wrote::Written {
                    ordered: batch.iter().any(|m| m.order.is_some()),
                }
            }
            Ok(Err(e)) => {
                self.failures = self.failures.saturating_add(1);
                tracing::warn!(
                    error = %e,
                    marks = batch.len(),
                    pending = self.pending.len(),
                    failures = self.failures,
                    "could not write SENT marks; writing them again after a backoff"
                );
                Wrote::Failed
            }
            Err(deadline::Missed(e)) => {
                self.failures = self.failures.saturating_add(1);
                let split = self.size > 1;
                self.size = (self.size / 2).max(1);
                tracing::warn!(
                    error = %e,
                    marks = batch.len(),
                    pending = self.pending.len(),
                    next = self.size,
                    "a statement of SENT marks missed its deadline; writing them again in smaller ones"
                );
                if split {
                    Wrote::Split
                } else {
                    Wrote::Failed
                }
            }
        }
    }

    /// Takes marks from `rx` and writes them until `rx` is closed and
    /// nothing is pending (or a write fails after the close).
    pub(super) async fn run(mut self, mut rx: mpsc::Receiver<SentMark>, promoted: Arc<Notify>) {
        let mut open = true;
        loop {
            if self.pending.is_empty() {
                let Some(first) = rx.recv().await else {
                    return;
                };
                self.pending.add(first);
                open = self.linger(&mut rx).await;
            } else if open {
                open = self.take_arrived(&mut rx);
            }
            let wrote = self.write_once().await;
            metrics::gauge!("trustmsg_forwarder_pending_marks").set(self.pending.len() as f64);
            match wrote {
                Wrote::Written { ordered: true } => promoted.notify_one(),
                Wrote::Written { ordered: false } | Wrote::Nothing | Wrote::Split => {}
                Wrote::Failed if !open => {
                    tracing::error!(
                        marks = self.pending.len(),
                        "could not write the last SENT marks before stopping; those rows will be resent after their lease"
                    );
                    return;
                }
                Wrote::Failed => tokio::time::sleep(RETRY.delay(self.failures)).await,
            }
        }
    }

    /// After a first mark: takes what arrives within [`MARK_LINGER`], up to
    /// a statement's worth. False once `rx` is closed.
    async fn linger(&mut self, rx: &mut mpsc::Receiver<SentMark>) -> bool {
        let deadline = tokio::time::Instant::now() + MARK_LINGER;
        let mut arrived = Vec::with_capacity(self.size);
        while self.pending.len() + arrived.len() < self.size {
            let room = self.size - self.pending.len() - arrived.len();
            match tokio::time::timeout_at(deadline, rx.recv_many(&mut arrived, room)).await {
                Ok(0) => {
                    self.add_all(arrived);
                    return false;
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        self.add_all(arrived);
        true
    }

    /// Takes the marks that have arrived, without waiting, while fewer than
    /// [`PENDING_MOST`] are pending. False once `rx` is closed.
    fn take_arrived(&mut self, rx: &mut mpsc::Receiver<SentMark>) -> bool {
        while self.pending.len() < PENDING_MOST {
            match rx.try_recv() {
                Ok(mark) => self.pending.add(mark),
                Err(mpsc::error::TryRecvError::Empty) => return true,
                Err(mpsc::error::TryRecvError::Disconnected) => return false,
            }
        }
        true
    }

    fn add_all(&self, marks: Vec<SentMark>) {
        for mark in marks {
            self.pending.add(mark);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::store::StoreError;

    /// A database stand-in: hangs on a statement of more than `hangs_over`
    /// marks, fails the first `fails_first` statements, and records the
    /// marks of every statement it answers.
    #[derive(Default)]
    struct Db {
        hangs_over: Option<usize>,
        fails_first: usize,
        /// A row whose mark matches nothing (claimed again meanwhile).
        matches_none_of: Option<u64>,
        calls: AtomicUsize,
        sizes: Mutex<Vec<usize>>,
        written: Mutex<Vec<SentMark>>,
    }

    #[async_trait]
    impl MarkSink for Arc<Db> {
        async fn mark_sent(&self, marks: &[SentMark]) -> StoreResult<u64> {
            self.sizes.lock().unwrap().push(marks.len());
            if self.hangs_over.is_some_and(|n| marks.len() > n) {
                std::future::pending::<()>().await;
            }
            if self.calls.fetch_add(1, Ordering::SeqCst) < self.fails_first {
                return Err(StoreError::Unavailable("connection refused".into()));
            }
            let matched: Vec<SentMark> = marks
                .iter()
                .filter(|m| Some(m.id) != self.matches_none_of)
                .copied()
                .collect();
            self.written.lock().unwrap().extend_from_slice(&matched);
            Ok(matched.len() as u64)
        }
    }

    fn mark(id: u64) -> SentMark {
        SentMark {
            id,
            version: 1,
            partition: 0,
            offset: id as i64,
            order: None,
        }
    }

    /// Runs a marker over `db` with `marks` sent to it and its channel
    /// closed, until it ends.
    async fn run(db: &Arc<Db>, pending: PendingMarks, marks: u64) {
        let (tx, rx) = mpsc::channel(4096);
        for id in 1..=marks {
            tx.send(mark(id)).await.unwrap();
        }
        drop(tx);
        let marker = Marker::new(db.clone(), pending, 1024, Duration::from_secs(5));
        // An hour of (paused) time is far more than any of these takes.
        let ended = tokio::time::timeout(
            Duration::from_secs(3600),
            marker.run(rx, Arc::new(Notify::new())),
        );
        assert!(ended.await.is_ok(), "the marker did not end");
    }

    fn written_ids(db: &Db) -> Vec<u64> {
        let mut ids: Vec<u64> = db.written.lock().unwrap().iter().map(|m| m.id).collect();
        ids.sort_unstable();
        ids
    }

    #[tokio::test(start_paused = true)]
    async fn a_statement_of_marks_that_misses_its_deadline_is_split_until_it_fits() {
        let db = Arc::new(Db {
            hangs_over: Some(100),
            ..Db::default()
        });
        let pending = PendingMarks::default();
        run(&db, pending.clone(), 1000).await;
        assert_eq!(written_ids(&db), (1..=1000).collect::<Vec<_>>());
        assert_eq!(pending.len(), 0);
        let sizes = db.sizes.lock().unwrap().clone();
        // 1000 (cut off), 512, 256, 128 (cut off), then 64 at a time,
        // growing back to 128 and cut off again: never the whole lot twice.
        assert_eq!(&sizes[..5], &[1000, 512, 256, 128, 64], "{sizes:?}");
        assert_eq!(sizes.iter().filter(|&&n| n == 1000).count(), 1, "{sizes:?}");
        assert!(sizes
            .iter()
            .all(|&n| n <= 128 || n == 1000 || n == 512 || n == 256));
    }

    #[tokio::test(start_paused = true)]
    async fn a_mark_that_fails_is_written_again_until_the_database_takes_it() {
        // Twenty failures in a row: far more than the five tries marks had.
        let db = Arc::new(Db {
            fails_first: 20,
            ..Db::default()
        });
        let (tx, rx) = mpsc::channel(16);
        let pending = PendingMarks::default();
        let marker = Marker::new(db.clone(), pending.clone(), 1024, Duration::from_secs(5));
        let task = tokio::spawn(marker.run(rx, Arc::new(Notify::new())));
        for id in 1..=3 {
            tx.send(mark(id)).await.unwrap();
        }
        // An hour of (paused) time: twenty backoffs of at most 5 s fit.
        let written = tokio::time::timeout(Duration::from_secs(3600), async {
            while written_ids(&db).len() < 3 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        assert!(written.await.is_ok(), "the marks were given up");
        assert_eq!(written_ids(&db), vec![1, 2, 3]);
        assert_eq!(db.calls.load(Ordering::SeqCst), 21);
        drop(tx);
        task.await.unwrap();
        assert_eq!(pending.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_row_claimed_again_while_its_mark_waits_is_marked_with_the_new_claim() {
        let pending = PendingMarks::default();
        pending.add(mark(7));
        assert!(pending.retarget(7, 2), "the sweeper finds the pending mark");
        assert!(!pending.retarget(8, 2), "no mark, no record in Kafka");
        // A write of the mark as it was before the new claim matched
        // nothing, and leaves the retargeted mark pending.
        pending.written(&[mark(7)], false);
        written_under_the_new_claim(&pending).await;
    }

    /// Row 7's mark, pending under the claim of version 2 and no other, is
    /// written under it.
    async fn written_under_the_new_claim(pending: &PendingMarks) {
        let moved = SentMark {
            version: 2,
            ..mark(7)
        };
        assert_eq!(pending.oldest(10), vec![moved]);
        let db = Arc::new(Db::default());
        run(&db, pending.clone(), 0).await;
        assert_eq!(db.written.lock().unwrap().clone(), vec![moved]);
        assert_eq!(pending.len(), 0);
    }

    /// The other order: the claim took the row (a new version) just before
    /// the statement of its old mark, which matched nothing, and retargets
    /// it just after. The mark, unsure, is found: not sent again, and
    /// written under the new claim.
    #[tokio::test(start_paused = true)]
    async fn a_row_claimed_again_just_before_its_mark_matched_nothing_is_not_sent_again() {
        let db = Arc::new(Db {
            matches_none_of: Some(7),
            ..Db::default()
        });
        let pending = PendingMarks::default();
        run(&db, pending.clone(), 7).await;
        assert_eq!(pending.len(), 0, "all written");
        assert_eq!(
            pending.all().iter().map(|m| m.id).collect::<Vec<_>>(),
            (1..=7).collect::<Vec<_>>(),
            "a statement that missed one: its marks unsure, still listed for the progress"
        );
        assert!(
            pending.retarget(7, 2),
            "the claim finds the unsure mark: its record is in Kafka"
        );
        assert!(!pending.retarget(8, 2), "no mark, no record in Kafka");
        written_under_the_new_claim(&pending).await;
        // A statement that matched all its marks keeps none unsure.
        let all = PendingMarks::default();
        run(&Arc::new(Db::default()), all.clone(), 3).await;
        assert!(all.all().is_empty());
        assert!(!all.retarget(2, 5), "a mark that matched: its row is SENT");
    }

    #[test]
    fn past_their_most_the_oldest_unsure_marks_go_first() {
        let mut marks = Marks::default();
        let base = Instant::now();
        for id in 0..(UNSURE_MOST as u64 + 3) {
            let at = base + Duration::from_millis(id);
            marks.unsure.insert(id, (mark(id), at));
        }
        marks.forget_unsure(base);
        assert_eq!(marks.unsure.len(), UNSURE_MOST);
        assert_eq!(marks.unsure.keys().next(), Some(&3), "0, 1 and 2 went");
    }

    #[tokio::test(start_paused = true)]
    async fn after_its_channel_closes_the_marker_ends_at_its_first_failure() {
        let db = Arc::new(Db {
            fails_first: usize::MAX,
            ..Db::default()
        });
        let pending = PendingMarks::default();
        run(&db, pending.clone(), 5).await;
        assert_eq!(db.calls.load(Ordering::SeqCst), 1);
        assert_eq!(pending.len(), 5, "left to their lease");
    }
}
