//! The verifier's writes after its calls, in batches: the call records and
//! the decisions of calls that finish while the store is busy are written
//! together, a multi-row INSERT for the records and one guarded UPDATE plus
//! one audit INSERT for the decisions, instead of a transaction each. A write
//! never waits for company: a worker takes the first job as soon as it
//! arrives, plus whatever else is queued.
//!
//! Reschedules (an answer that decided nothing) differ row by row and are
//! written one by one, but by the same few workers: a storm of undecided
//! answers holds at most [`WORKERS`] database connections, not one per call
//! in flight, and leaves the rest of the pool to the API.
//!
//! Each call still gets its own answer: [`Store::transition_batch`] falls
//! back to one by one when a guard lost a race, and a batch that fails as a
//! whole is retried one transition at a time.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, Mutex};
use trustmsg_verify_api::MessageStatus;

use crate::coalesce::next_batch;
use crate::store::{CheckAttempt, DynStore, Message, Store, StoreError, StoreResult, Transition};

/// Batches written at once, for each kind of write.
const WORKERS: usize = 4;

struct Job<T, R> {
    write: T,
    reply: oneshot::Sender<R>,
}

type RecordJob = Job<CheckAttempt, Result<(), String>>;
/// A decision and the claimed row it is decided from (as stored at the
/// claim's version).
type DecideJob = Job<(Transition, Message), StoreResult<Option<Message>>>;
type RescheduleJob = Job<Reschedule, StoreResult<bool>>;

/// [`Store::reschedule_verify`]'s arguments.
pub(crate) struct Reschedule {
    pub(crate) id: u64,
    pub(crate) version: u64,
    pub(crate) error: String,
    pub(crate) delay: Duration,
}

/// Hands the verifier's writes to the batching workers; they end when this
/// is dropped.
pub(crate) struct Writes {
    records: mpsc::Sender<RecordJob>,
    decisions: mpsc::Sender<DecideJob>,
    reschedules: mpsc::Sender<RescheduleJob>,
}

impl Writes {
    /// Starts the workers; a batch holds at most `max_batch` writes.
    pub(crate) fn start(store: DynStore, max_batch: usize) -> Self {
        let max_batch = max_batch.max(1);
        let (records, record_rx) = mpsc::channel::<RecordJob>(max_batch * WORKERS);
        let (decisions, decide_rx) = mpsc::channel::<DecideJob>(max_batch * WORKERS);
        let (reschedules, reschedule_rx) = mpsc::channel::<RescheduleJob>(max_batch * WORKERS);
        let (record_rx, decide_rx) = (
            Arc::new(Mutex::new(record_rx)),
            Arc::new(Mutex::new(decide_rx)),
        );
        let reschedule_rx = Arc::new(Mutex::new(reschedule_rx));
        for _ in 0..WORKERS {
            let (s, rx) = (store.clone(), record_rx.clone());
            tokio::spawn(async move {
                while let Some(jobs) = next_batch(&rx, max_batch).await {
                    write_records(s.as_ref(), jobs).await;
                }
            });
            let (s, rx) = (store.clone(), decide_rx.clone());
            tokio::spawn(async move {
                while let Some(jobs) = next_batch(&rx, max_batch).await {
                    write_decisions(s.as_ref(), jobs).await;
                }
            });
            let (s, rx) = (store.clone(), reschedule_rx.clone());
            tokio::spawn(async move {
                while let Some(jobs) = next_batch(&rx, max_batch).await {
                    for job in jobs {
                        let r = &job.write;
                        let done = s
                            .reschedule_verify(r.id, r.version, &r.error, r.delay)
                            .await;
                        let _ = job.reply.send(done);
                    }
                }
            });
        }
        Self {
            records,
            decisions,
            reschedules,
        }
    }

    /// [`Store::record_check_attempts`] for one call, batched with others.
    pub(crate) async fn record(&self, call: CheckAttempt) -> Result<(), String> {
        submit(&self.records, call)
            .await
            .unwrap_or_else(|| Err("the verifier is stopping".to_string()))
    }

    /// [`Store::reschedule_verify`], by one of the workers.
    pub(crate) async fn reschedule(&self, r: Reschedule) -> StoreResult<bool> {
        submit(&self.reschedules, r)
            .await
            .unwrap_or(Err(StoreError::ShuttingDown))
    }

    /// [`Store::transition`] of the claimed row `seen`, batched with others.
    pub(crate) async fn transition(
        &self,
        t: Transition,
        seen: &Message,
    ) -> StoreResult<Option<Message>> {
        submit(&self.decisions, (t, seen.clone()))
            .await
            .unwrap_or(Err(StoreError::ShuttingDown))
    }
}

/// Queues `write` for the workers and waits for its answer; None once they
/// have stopped.
async fn submit<T, R>(queue: &mpsc::Sender<Job<T, R>>, write: T) -> Option<R> {
    let (reply, rx) = oneshot::channel();
    queue.send(Job { write, reply }).await.ok()?;
    rx.await.ok()
}

async fn write_records(store: &dyn Store, jobs: Vec<RecordJob>) {
    let calls: Vec<CheckAttempt> = jobs.iter().map(|j| j.write.clone()).collect();
    metrics::histogram!("trustmsg_verify_record_batch_size").record(calls.len() as f64);
    let result = store
        .record_check_attempts(&calls)
        .await
        .map_err(|e| e.to_string());
    for job in jobs {
        let _ = job.reply.send(result.clone());
    }
}

async fn write_decisions(store: &dyn Store, jobs: Vec<DecideJob>) {
    metrics::histogram!("trustmsg_verify_decide_batch_size").record(jobs.len() as f64);
    // One batch per target state: a batched UPDATE sets the same columns.
    let (commits, rollbacks): (Vec<DecideJob>, Vec<DecideJob>) = jobs
        .into_iter()
        .partition(|j| j.write.0.to == MessageStatus::Committed);
    for group in [commits, rollbacks] {
        if group.is_empty() {
            continue;
        }
        // The claimed rows are what the store would read back; with them it
        // can skip that read (see `Store::transition_batch_seen`).
        let ts: Vec<Transition> = group.iter().map(|j| j.write.0.clone()).collect();
        let seen: Vec<&Message> = group.iter().map(|j| &j.write.1).collect();
        match store.transition_batch_seen(&ts, &seen).await {
            Ok(rows) => {
                for (job, row) in group.into_iter().zip(rows) {
                    let _ = job.reply.send(Ok(row));
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, size = group.len(), "batched check-back decisions failed; writing one by one");
                for job in group {
                    let _ = job.reply.send(store.transition(&job.write.0).await);
                }
            }
        }
    }
}
