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
//! Each call still gets its own answer: [`crate::store::MessageStore::transition_batch`] falls
//! back to one by one when a guard lost a race, and a batch that fails as a
//! whole is retried one transition at a time.
//!
//! The queues and workers are [`crate::group_commit::batcher`]'s; this module says what a
//! batch of each kind writes.

use std::sync::Arc;
use std::time::Duration;

use trustmsg_verify_api::MessageStatus;

use crate::group_commit::batcher::{BatchWrite, Batcher, Job};
use crate::store::{
    deadline, CheckAttempt, DynStore, Message, Reschedule, StoreError, StoreResult, Transition,
};

/// Batches written at once, for each kind of write.
const WORKERS: usize = 4;

type RecordJob = Job<CheckAttempt, Result<(), String>>;
/// A decision and the claimed row it is decided from (as stored at the
/// claim's version, without its payload).
type DecideJob = Job<(Transition, Message), StoreResult<Option<Message>>>;
type RescheduleJob = Job<Reschedule, StoreResult<bool>>;

/// Hands the verifier's writes to the batching workers; they end when this
/// is dropped.
pub(crate) struct Writes {
    records: Batcher<CheckAttempt, Result<(), String>>,
    decisions: Batcher<(Transition, Message), StoreResult<Option<Message>>>,
    reschedules: Batcher<Reschedule, StoreResult<bool>>,
}

impl Writes {
    /// Starts the workers; a batch holds at most `max_batch` writes, each
    /// statement at most `limit` (see [`crate::store::deadline`]).
    pub(crate) fn start(store: DynStore, max_batch: usize, limit: Duration) -> Self {
        let max_batch = max_batch.max(1);
        let queue = max_batch * WORKERS;
        let records = WriteRecords(store.clone(), limit);
        let decisions = WriteDecisions(store.clone(), limit);
        Self {
            records: Batcher::start(Arc::new(records), WORKERS, max_batch, queue),
            decisions: Batcher::start(Arc::new(decisions), WORKERS, max_batch, queue),
            reschedules: Batcher::start(
                Arc::new(WriteReschedules(store, limit)),
                WORKERS,
                max_batch,
                queue,
            ),
        }
    }

    /// [`crate::store::VerifyStore::record_check_attempts`] for one call, batched with others.
    pub(crate) async fn record(&self, call: CheckAttempt) -> Result<(), String> {
        self.records
            .submit(call)
            .await
            .unwrap_or_else(|| Err("the verifier is stopping".to_string()))
    }

    /// [`crate::store::VerifyStore::reschedule_verify`], by one of the workers.
    pub(crate) async fn reschedule(&self, r: Reschedule) -> StoreResult<bool> {
        self.reschedules
            .submit(r)
            .await
            .unwrap_or(Err(StoreError::ShuttingDown))
    }

    /// [`crate::store::MessageStore::transition`] of the claimed row `seen`, batched with others.
    pub(crate) async fn transition(
        &self,
        t: Transition,
        seen: &Message,
    ) -> StoreResult<Option<Message>> {
        self.decisions
            .submit((t, seen.clone()))
            .await
            .unwrap_or(Err(StoreError::ShuttingDown))
    }
}

/// Call records: one multi-row INSERT per batch, its result for every call.
struct WriteRecords(DynStore, Duration);

impl BatchWrite<CheckAttempt, Result<(), String>> for WriteRecords {
    async fn write(&self, jobs: &mut Vec<RecordJob>) {
        let calls: Vec<CheckAttempt> = jobs.iter().map(|j| j.input.clone()).collect();
        metrics::histogram!("trustmsg_verify_record_batch_size").record(calls.len() as f64);
        let write = self.0.record_check_attempts(&calls);
        let result = deadline::within(self.1, "record check-back calls", write)
            .await
            .map_err(|e| e.to_string());
        for job in jobs.drain(..) {
            job.answer(result.clone());
        }
    }
}

/// Decisions: one batched transition per target state, one by one if the
/// batch fails.
struct WriteDecisions(DynStore, Duration);

impl BatchWrite<(Transition, Message), StoreResult<Option<Message>>> for WriteDecisions {
    async fn write(&self, jobs: &mut Vec<DecideJob>) {
        let store = self.0.as_ref();
        metrics::histogram!("trustmsg_verify_decide_batch_size").record(jobs.len() as f64);
        // One batch per target state: a batched UPDATE sets the same columns.
        let (commits, rollbacks): (Vec<DecideJob>, Vec<DecideJob>) = jobs
            .drain(..)
            .partition(|j| j.input.0.to == MessageStatus::Committed);
        for group in [commits, rollbacks] {
            if group.is_empty() {
                continue;
            }
            let ts: Vec<Transition> = group.iter().map(|j| j.input.0.clone()).collect();
            let written = if ts[0].to == MessageStatus::Committed {
                // A commit goes to the forwarder, which needs the payload the
                // claim did not read (`ClaimKind::columns`): read back whole.
                let write = store.transition_batch(&ts);
                deadline::within(self.1, "write check-back decisions", write).await
            } else {
                // The claimed rows are what the store would read back; with
                // them it can skip that read (see `MessageStore::transition_batch_seen`).
                let seen: Vec<&Message> = group.iter().map(|j| &j.input.1).collect();
                let write = store.transition_batch_seen(&ts, &seen);
                deadline::within(self.1, "write check-back decisions", write).await
            };
            match written {
                Ok(rows) => {
                    for (job, row) in group.into_iter().zip(rows) {
                        job.answer(Ok(row));
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, size = group.len(), "batched check-back decisions failed; writing one by one");
                    for job in group {
                        let write = store.transition(&job.input.0);
                        let done =
                            deadline::within(self.1, "write a check-back decision", write).await;
                        job.answer(done);
                    }
                }
            }
        }
    }
}

/// Reschedules: they differ row by row, so one by one, but by the same few
/// workers.
struct WriteReschedules(DynStore, Duration);

impl BatchWrite<Reschedule, StoreResult<bool>> for WriteReschedules {
    async fn write(&self, jobs: &mut Vec<RescheduleJob>) {
        for job in jobs.drain(..) {
            let write = self.0.reschedule_verify(&job.input);
            let done = deadline::within(self.1, "reschedule a check-back", write).await;
            job.answer(done);
        }
    }
}
