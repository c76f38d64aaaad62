//! The queue behind every group commit, written once: callers queue jobs, each with its own reply,
//! and a few workers write whatever is queued as one batch.
//!
//! A job never waits for company on an idle batcher: a worker takes the
//! first job as soon as it arrives, plus whatever else is already queued, up
//! to `max_batch` (tokio's `recv_many` does the collecting), so an idle queue
//! answers with no added delay and a busy one batches more. The workers
//! share one receiver: the one holding it waits for the next batch while the
//! others write theirs, so at most `workers` batches are written at once and
//! a storm of jobs holds at most that many database connections.
//!
//! While another batch is being written, a worker that has its first jobs
//! waits for that batch to finish, at most [`LINGER`], and takes whatever
//! arrived meanwhile too: under load, batches are fuller (each costs the
//! database a statement, a commit and its wake-ups whatever its size), and a
//! batch that stalls still holds the next one up no longer than that.
//!
//! What a batch does (one statement, a fallback one by one, which jobs to
//! skip) is its [`BatchWrite`]'s business; each job is answered through
//! [`Job::answer`]. A job dropped unanswered, or queued after the workers
//! stopped, tells its caller the batcher is gone ([`Batcher::submit`] returns
//! `None`). The workers end when the last [`Batcher`] clone is dropped.
//!
//! Used by the API's prepares and decisions ([`crate::group_commit::producer_writes`]) and the
//! verifier's call records, decisions and reschedules.

use std::future::Future;
use std::sync::Arc;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use tokio::sync::{mpsc, oneshot, Mutex, Notify};

/// The longest a batch waits for another one being written to finish.
pub(crate) const LINGER: Duration = Duration::from_millis(2);

/// How many batches are being written, and a wake-up when one is done.
#[derive(Default)]
struct Writing {
    batches: AtomicUsize,
    done: Notify,
}

/// One queued write and where its answer goes.
pub(crate) struct Job<T, R> {
    /// What the caller asked to write.
    pub(crate) input: T,
    reply: oneshot::Sender<(R, SystemTime)>,
    /// When a worker began writing the batch it is in: the end of its wait
    /// in the queue, told to the caller with the answer (a request's span
    /// shows it, [`crate::observability::trace::stage`]).
    began: SystemTime,
}

impl<T, R> Job<T, R> {
    fn new(input: T) -> (Self, oneshot::Receiver<(R, SystemTime)>) {
        let (reply, answer) = oneshot::channel();
        let began = SystemTime::UNIX_EPOCH;
        (
            Self {
                input,
                reply,
                began,
            },
            answer,
        )
    }

    /// Gives the caller its answer (dropped if the caller has gone).
    pub(crate) fn answer(self, answer: R) {
        let _ = self.reply.send((answer, self.began));
    }

    /// Whether the caller has gone (its request was cut off, or it was
    /// dropped): its answer would go nowhere.
    pub(crate) fn is_abandoned(&self) -> bool {
        self.reply.is_closed()
    }
}

/// How one kind of job is written, a batch at a time.
pub(crate) trait BatchWrite<T, R>: Send + Sync + 'static {
    /// Writes `jobs` (at least one) and answers each. Whatever is left in
    /// `jobs` afterwards is dropped unanswered.
    fn write(&self, jobs: &mut Vec<Job<T, R>>) -> impl Future<Output = ()> + Send;
}

/// The queue in front of a batch writer's workers; cheap to clone.
pub(crate) struct Batcher<T, R> {
    queue: mpsc::Sender<Job<T, R>>,
}

impl<T, R> Clone for Batcher<T, R> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
        }
    }
}

impl<T: Send + 'static, R: Send + 'static> Batcher<T, R> {
    /// Starts `workers` workers writing through `write`, at most `max_batch`
    /// jobs at a time. Beyond `queue` waiting jobs a caller waits for room.
    pub(crate) fn start(
        write: Arc<impl BatchWrite<T, R>>,
        workers: usize,
        max_batch: usize,
        queue: usize,
    ) -> Self {
        Self::lingering(write, workers, max_batch, queue, LINGER)
    }

    /// [`Batcher::start`] waiting at most `linger` for a batch being written.
    fn lingering(
        write: Arc<impl BatchWrite<T, R>>,
        workers: usize,
        max_batch: usize,
        queue: usize,
        linger: Duration,
    ) -> Self {
        let (tx, rx) = mpsc::channel::<Job<T, R>>(queue.max(1));
        let rx = Arc::new(Mutex::new(rx));
        let writing = Arc::new(Writing::default());
        let max_batch = max_batch.max(1);
        for _ in 0..workers.max(1) {
            let (rx, write, writing) = (rx.clone(), write.clone(), writing.clone());
            tokio::spawn(async move {
                // Kept from batch to batch: its room is allocated once.
                let mut jobs = Vec::new();
                while next_batch(&rx, &mut jobs, max_batch, &writing, linger).await {
                    let began = SystemTime::now();
                    for job in &mut jobs {
                        job.began = began;
                    }
                    writing.batches.fetch_add(1, Ordering::SeqCst);
                    write.write(&mut jobs).await;
                    jobs.clear();
                    writing.batches.fetch_sub(1, Ordering::SeqCst);
                    writing.done.notify_waiters();
                }
            });
        }
        Self { queue: tx }
    }

    /// Queues `input` and waits for its answer; `None` once the workers have
    /// stopped.
    pub(crate) async fn submit(&self, input: T) -> Option<R> {
        self.submit_stamped(input).await.map(|(answer, _)| answer)
    }

    /// [`Batcher::submit`], with the time its batch began to be written.
    pub(crate) async fn submit_stamped(&self, input: T) -> Option<(R, SystemTime)> {
        let (job, answer) = Job::new(input);
        self.queue.send(job).await.ok()?;
        answer.await.ok()
    }
}

/// Writes `inputs` at once, on the caller's task, through `write`, in
/// batches of at most `max_batch` in order: for a caller that has gathered a
/// batch itself and needs its writes in that order (the Kafka way in). One
/// answer per input, in order; `None` for an input `write` left unanswered.
pub(crate) async fn write_now<T, R>(
    write: &impl BatchWrite<T, R>,
    inputs: Vec<T>,
    max_batch: usize,
) -> Vec<Option<R>> {
    let mut answers = Vec::with_capacity(inputs.len());
    let mut inputs = inputs.into_iter().peekable();
    while inputs.peek().is_some() {
        let mut jobs = Vec::with_capacity(max_batch.max(1));
        let mut replies = Vec::with_capacity(max_batch.max(1));
        for input in inputs.by_ref().take(max_batch.max(1)) {
            let (job, answer) = Job::new(input);
            jobs.push(job);
            replies.push(answer);
        }
        write.write(&mut jobs).await;
        drop(jobs);
        for answer in replies {
            answers.push(answer.await.ok().map(|(answer, _)| answer));
        }
    }
    answers
}

/// Waits for one job, then takes whatever else is queued, up to `max`;
/// while another batch is being written, waits for it (at most `linger`)
/// and takes what arrived meanwhile too. False once every sender is gone
/// and the queue is empty.
async fn next_batch<T>(
    rx: &Mutex<mpsc::Receiver<T>>,
    jobs: &mut Vec<T>,
    max: usize,
    writing: &Writing,
    linger: Duration,
) -> bool {
    let mut rx = rx.lock().await;
    if rx.recv_many(jobs, max).await == 0 {
        return false;
    }
    if jobs.len() < max {
        // Listening before looking, so a batch that ends in between is not missed.
        let done = writing.done.notified();
        if writing.batches.load(Ordering::SeqCst) > 0 {
            let _ = tokio::time::timeout(linger, done).await;
            while jobs.len() < max {
                match rx.try_recv() {
                    Ok(job) => jobs.push(job),
                    Err(_) => break,
                }
            }
        }
    }
    true
}

/// Drops the jobs whose caller has gone, counting them in
/// `trustmsg_writes_abandoned_total`: when the database is slow or away the
/// queue fills with such jobs, and writing them late would only delay the
/// callers still waiting.
pub(crate) fn skip_abandoned<T, R>(jobs: &mut Vec<Job<T, R>>) {
    let before = jobs.len();
    jobs.retain(|j| !j.is_abandoned());
    let skipped = before - jobs.len();
    if skipped > 0 {
        metrics::counter!("trustmsg_writes_abandoned_total").increment(skipped as u64);
        tracing::debug!(skipped, "skipped writes whose callers have gone");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Answers each job with the size of the batch it came in.
    struct BatchSizes(Arc<AtomicUsize>);

    impl BatchWrite<u32, usize> for BatchSizes {
        async fn write(&self, jobs: &mut Vec<Job<u32, usize>>) {
            self.0.fetch_add(1, Ordering::SeqCst);
            let n = jobs.len();
            for job in jobs.drain(..) {
                job.answer(n);
            }
        }
    }

    #[tokio::test]
    async fn a_lone_job_is_written_at_once_and_queued_ones_go_together_up_to_the_limit() {
        let batches = Arc::new(AtomicUsize::new(0));
        let b = Batcher::start(Arc::new(BatchSizes(batches.clone())), 1, 3, 16);
        assert_eq!(b.submit(1).await, Some(1), "no waiting for company");
        // Seven at once on a current-thread runtime: all are queued before
        // the worker runs, so it takes them three, three and one.
        let answers = futures::future::join_all((0..7).map(|i| b.submit(i))).await;
        let mut sizes: Vec<usize> = answers.into_iter().map(Option::unwrap).collect();
        sizes.sort_unstable();
        assert_eq!(sizes, [1, 3, 3, 3, 3, 3, 3]);
        assert_eq!(batches.load(Ordering::SeqCst), 4);
    }

    /// Answers each job with the size of its batch, after `0` of writing.
    struct SlowBatchSizes(Duration);

    impl BatchWrite<u32, usize> for SlowBatchSizes {
        async fn write(&self, jobs: &mut Vec<Job<u32, usize>>) {
            tokio::time::sleep(self.0).await;
            let n = jobs.len();
            for job in jobs.drain(..) {
                job.answer(n);
            }
        }
    }

    #[tokio::test]
    async fn while_a_batch_is_written_the_next_waits_for_it_at_most_the_linger() {
        // Writing takes 100 ms, under the linger: the jobs that arrive one
        // by one meanwhile go together once it is done.
        let slow = Arc::new(SlowBatchSizes(Duration::from_millis(100)));
        let b = Batcher::lingering(slow, 2, 64, 64, Duration::from_secs(5));
        let submit = |i: u32| {
            let b = b.clone();
            tokio::spawn(async move { b.submit(i).await })
        };
        let first = submit(0);
        tokio::time::sleep(Duration::from_millis(10)).await;
        let mut later = Vec::new();
        for i in 1..=4 {
            later.push(submit(i));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(
            first.await.unwrap(),
            Some(1),
            "the first goes alone, at once"
        );
        for job in later {
            assert_eq!(job.await.unwrap(), Some(4), "the rest go together");
        }
        // Writing takes 1 s, the linger 50 ms: the second batch goes after
        // the linger, written alongside the first, not after it.
        let slow = Arc::new(SlowBatchSizes(Duration::from_secs(1)));
        let b = Batcher::lingering(slow, 2, 64, 64, Duration::from_millis(50));
        let start = tokio::time::Instant::now();
        let first = tokio::spawn({
            let b = b.clone();
            async move { b.submit(0).await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(b.submit(1).await, Some(1));
        let took = start.elapsed();
        assert!(
            took < Duration::from_millis(1800),
            "{took:?}: alongside the first, not after it"
        );
        assert_eq!(first.await.unwrap(), Some(1));
    }

    #[tokio::test]
    async fn a_job_left_unanswered_tells_its_caller_the_batcher_is_gone() {
        struct Forgets;
        impl BatchWrite<u32, u32> for Forgets {
            async fn write(&self, _jobs: &mut Vec<Job<u32, u32>>) {}
        }
        let b = Batcher::start(Arc::new(Forgets), 2, 8, 8);
        assert_eq!(b.submit(1).await, None);
    }

    #[tokio::test]
    async fn written_now_inputs_go_in_order_in_batches_of_the_limit() {
        let batches = Arc::new(AtomicUsize::new(0));
        let answers = write_now(&BatchSizes(batches.clone()), (0..7).collect(), 3).await;
        assert_eq!(
            answers,
            [3, 3, 3, 3, 3, 3, 1].map(Some).to_vec(),
            "three, three and one"
        );
        assert_eq!(batches.load(Ordering::SeqCst), 3);
        let none = write_now(&BatchSizes(batches), Vec::new(), 3).await;
        assert!(none.is_empty());
    }
}
