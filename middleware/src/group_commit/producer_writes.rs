//! What the producer API writes in one batch: its prepares and decisions.
//!
//! Prepares and decisions that arrive while the store is busy are gathered
//! into one batch and written together: one multi-row INSERT, or one guarded
//! UPDATE plus one audit INSERT, in one transaction — one durable commit for
//! the lot instead of one each. A request never waits for company: a worker
//! takes the first job as soon as it arrives, plus whatever else is already
//! queued (up to `max_batch`), so an idle service answers with no added delay
//! and a busy one batches more.
//!
//! Each job gets exactly the outcome it would have had alone (the store's
//! batch operations fall back to one-by-one when a guard loses a race). If a
//! batch fails as a whole, each job is retried alone so every caller gets its
//! own result — unless the database could not be reached at all: then every
//! job of the batch gets that answer at once, since each retry would only
//! wait out the same failure.
//!
//! A job whose caller has gone (its request was cut off at
//! `--request-timeout`, or the client hung up) is skipped, not written: when
//! the database is slow or away, the queue fills with such jobs, and writing
//! them late would only delay the callers still waiting. Skipping is checked
//! when a batch is taken and before each one-by-one retry.
//!
//! A commit is handed to this instance's forwarder (the fast path, which its
//! claim is for) here, by the worker that wrote it, not by the request that
//! asked for it: a request cut off after its commit was written, or whose
//! client hung up, would otherwise leave the row claimed for a forwarder that
//! never hears of it, unsent until the claim runs out.
//!
//! The queues, the workers and the batch collection are [`crate::group_commit::batcher`]'s;
//! this module says what a batch of prepares or decisions writes.
//!
//! A store call of a batch is given up (its connection dropped) after twice
//! `--request-timeout`. Without that, a connection that hangs without closing
//! (a frozen server, a partition that drops packets) would hold the worker
//! until TCP gives up, and every job queued behind it would wait with it.
//! Twice, not once: by then the jobs queued behind it during the first
//! timeout have been answered 503 and are skipped, not sent into the same
//! hung database. A write given up that was already on the wire may still be
//! applied; its caller got 503 and retries, and prepare and decisions are
//! idempotent.
//!
//! Rows this instance just prepared are kept for a while (bounded by bytes,
//! `--prepared-cache-mib`), so that their commit or rollback, which usually
//! comes to the same instance within milliseconds, skips the read of the row:
//! the guarded UPDATE checks the row's version anyway, and a row that changed
//! meanwhile (the verifier claimed it, another instance decided it) loses
//! that guard and is decided the slow way, by reading it.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use moka::future::Cache;

use trustmsg_verify_api::MessageStatus;

use crate::group_commit::batcher::{skip_abandoned, write_now, BatchWrite, Batcher, Job};
use crate::handoff::CommitListener;
use crate::observability::trace;
use crate::store::{
    self, Actor, DecideOutcome, DecideRequest, DynStore, Inserted, Message, NewCommitted,
    NewMessage, StoreError, StoreResult, Target,
};
use crate::workers::flow::{self, Event};

/// Rows this instance prepared and nobody has decided yet, by (biz_id, key).
type PreparedRows = Cache<(String, String), Arc<Message>>;

/// How long a prepared row is kept for its decision. A producer decides
/// within milliseconds or it crashed (and the verifier takes over).
const PREPARED_ROW_TTL: Duration = Duration::from_secs(60);

fn prepared_rows(max_bytes: u64) -> Option<PreparedRows> {
    (max_bytes > 0).then(|| {
        Cache::builder()
            .max_capacity(max_bytes)
            // What a row holds in memory, roughly: its bytes and the struct.
            .weigher(|(biz_id, key): &(String, String), m: &Arc<Message>| {
                let headers: usize = m.headers.iter().map(|(k, v)| k.len() + v.len()).sum();
                let bytes = 2 * (biz_id.len() + key.len())
                    + m.payload.len()
                    + headers
                    + m.topic.as_ref().map_or(0, String::len)
                    + m.key.as_ref().map_or(0, String::len)
                    + std::mem::size_of::<Message>();
                u32::try_from(bytes).unwrap_or(u32::MAX)
            })
            .time_to_live(PREPARED_ROW_TTL)
            .build()
    })
}

/// A producer's commit or rollback of one message.
pub(crate) struct Decision {
    pub(crate) biz_id: String,
    pub(crate) message_key: String,
    pub(crate) commit: bool,
    /// How it reached us, for its audit row.
    pub(crate) via: Via,
}

/// The way a producer's decision came in.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Via {
    /// The HTTP API.
    Http,
    /// A record submitted to the submit topic (`crate::submit`).
    Kafka {
        /// The record's partition.
        partition: i32,
        /// The record's offset.
        offset: i64,
    },
    /// A row of the producer's outbox table, committed by the producer's
    /// own transaction and relayed (`crate::outbox`).
    Outbox {
        /// The row's id in the source table.
        row: u64,
    },
}

type PrepareJob = Job<NewMessage, StoreResult<Inserted>>;
type DecideJob = Job<Decision, StoreResult<DecideOutcome>>;

/// Hands prepares and producer decisions to the batching workers: one set
/// of queues and workers per shard of the store, so that a batch is written
/// to one database, and a shard that does not answer holds up and fails
/// only its own keys' calls.
#[derive(Clone)]
pub(crate) struct Coalescer {
    store: DynStore,
    /// By shard.
    prepares: Vec<Batcher<NewMessage, StoreResult<Inserted>>>,
    /// By shard.
    decisions: Vec<Batcher<Decision, StoreResult<DecideOutcome>>>,
    /// The writers themselves, for batches a caller gathered
    /// ([`Coalescer::prepare_now`], [`Coalescer::decide_now`]).
    write_prepares: Arc<WritePrepares>,
    write_decisions: Arc<WriteDecisions>,
    max_batch: usize,
}

fn gone() -> StoreError {
    StoreError::ShuttingDown
}

/// Each answer, or [`gone`] for a job the writer left unanswered.
fn answered<R>(answers: Vec<Option<StoreResult<R>>>) -> Vec<StoreResult<R>> {
    answers
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(gone())))
        .collect()
}

/// How writes are batched (`--write-workers`, `--write-batch`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct WriteSettings {
    /// Batches written at once, for each kind of write.
    pub(crate) workers: NonZeroUsize,
    /// Most jobs in one batch.
    pub(crate) max_batch: NonZeroUsize,
    /// The send claim a commit takes for this instance's forwarder (zero
    /// without one: due at once for any other).
    pub(crate) send_lease: Duration,
    /// How long one store call of a batch may take (twice `--request-timeout`).
    pub(crate) deadline: Duration,
    /// Bytes of just-prepared rows kept for their decision (0: none).
    pub(crate) prepared_cache_bytes: u64,
}

impl Coalescer {
    /// Starts the batching tasks for each kind of write; every commit they
    /// write is told to `commits`. They end when the last `Coalescer` clone
    /// is dropped.
    pub(crate) fn start(
        store: DynStore,
        settings: WriteSettings,
        commits: Arc<dyn CommitListener>,
    ) -> Self {
        let (workers, max_batch) = (settings.workers.get(), settings.max_batch.get());
        let queue = max_batch.saturating_mul(workers).saturating_mul(4);
        let rows = prepared_rows(settings.prepared_cache_bytes);
        let prepares = Arc::new(WritePrepares {
            store: store.clone(),
            deadline: settings.deadline,
            rows: rows.clone(),
        });
        let decisions = Arc::new(WriteDecisions {
            store: store.clone(),
            commits,
            send_lease: settings.send_lease,
            deadline: settings.deadline,
            rows,
        });
        let shards = store.shards();
        Self {
            store,
            prepares: (0..shards)
                .map(|_| Batcher::start(prepares.clone(), workers, max_batch, queue))
                .collect(),
            decisions: (0..shards)
                .map(|_| Batcher::start(decisions.clone(), workers, max_batch, queue))
                .collect(),
            write_prepares: prepares,
            write_decisions: decisions,
            max_batch,
        }
    }

    /// Prepares a batch the caller gathered, at once and on its own task,
    /// in `--write-batch` chunks: the Kafka way in, whose batch is the
    /// records it read. One result per message, in order.
    pub(crate) async fn prepare_now(&self, batch: Vec<NewMessage>) -> Vec<StoreResult<Inserted>> {
        let shard_of = |m: &NewMessage| self.store.shard_of_new(m);
        per_shard(batch, shard_of, |part| {
            write_now(self.write_prepares.as_ref(), part, self.max_batch)
        })
        .await
    }

    /// Decides a batch the caller gathered, as [`Coalescer::prepare_now`]:
    /// in order, so that of one ordered key's commits the earlier record
    /// takes the earlier place.
    pub(crate) async fn decide_now(&self, batch: Vec<Decision>) -> Vec<StoreResult<DecideOutcome>> {
        let shard_of = |d: &Decision| self.store.shard_of_key(&d.biz_id, &d.message_key);
        per_shard(batch, shard_of, |part| {
            write_now(self.write_decisions.as_ref(), part, self.max_batch)
        })
        .await
    }

    /// Creates a batch of messages their producers' own transactions
    /// committed (the outbox relay's rows) as committed rows in one step
    /// where the store can ([`crate::store::MessageStore::insert_committed_batch`]),
    /// each then handed to the fast path and counted as a commit is. None:
    /// nothing was written; prepare and decide them instead.
    pub(crate) async fn create_committed(
        &self,
        batch: &[NewCommitted],
    ) -> StoreResult<Option<Vec<Message>>> {
        let decisions = &self.write_decisions;
        let created = self
            .store
            .insert_committed_batch(batch, decisions.send_lease)
            .await?;
        for m in created.iter().flatten() {
            flow::count(Event::Prepared);
            decisions.hand_off(&DecideOutcome::Decided(m.clone()));
        }
        Ok(created)
    }

    /// Prepares a batch the caller gathered and bounded itself as one
    /// batch per shard (one multi-row INSERT, one durable commit), not in
    /// `--write-batch` chunks: the outbox relay, whose batch is the rows it
    /// claimed. One result per message, in order.
    pub(crate) async fn prepare_together(
        &self,
        batch: Vec<NewMessage>,
    ) -> Vec<StoreResult<Inserted>> {
        let shard_of = |m: &NewMessage| self.store.shard_of_new(m);
        let whole = batch.len().max(1);
        per_shard(batch, shard_of, |part| {
            write_now(self.write_prepares.as_ref(), part, whole)
        })
        .await
    }

    /// Decides a batch as [`Coalescer::prepare_together`] prepares one: one
    /// guarded UPDATE and its audit INSERT per shard, in order.
    pub(crate) async fn decide_together(
        &self,
        batch: Vec<Decision>,
    ) -> Vec<StoreResult<DecideOutcome>> {
        let shard_of = |d: &Decision| self.store.shard_of_key(&d.biz_id, &d.message_key);
        let whole = batch.len().max(1);
        per_shard(batch, shard_of, |part| {
            write_now(self.write_decisions.as_ref(), part, whole)
        })
        .await
    }

    /// [`crate::store::MessageStore::insert_prepared`], batched with concurrent calls.
    pub(crate) async fn prepare(&self, message: NewMessage) -> StoreResult<Inserted> {
        let shard = self.store.shard_of_new(&message);
        let submitted = self.prepares[shard].submit_stamped(message).await;
        written(submitted)
    }

    /// A producer's commit or rollback ([`store::decide`]), batched with concurrent calls.
    pub(crate) async fn decide(
        &self,
        biz_id: String,
        message_key: String,
        commit: bool,
    ) -> StoreResult<DecideOutcome> {
        let shard = self.store.shard_of_key(&biz_id, &message_key);
        let decision = Decision {
            biz_id,
            message_key,
            commit,
            via: Via::Http,
        };
        let submitted = self.decisions[shard].submit_stamped(decision).await;
        written(submitted)
    }
}

/// A batched write's answer; its batch's start and its answer are the
/// request's `write` stages ([`trace::stage`]).
fn written<R>(submitted: Option<(StoreResult<R>, SystemTime)>) -> StoreResult<R> {
    let (answer, began) = submitted.ok_or_else(gone)?;
    trace::stage(trace::Stage::WriteBegan, || began);
    trace::stage(trace::Stage::Written, SystemTime::now);
    answer
}

/// `write`s `inputs` one shard's at a time, all shards at once, each shard's
/// in their order (of one key's decisions, the earlier record takes the
/// earlier place): a shard that does not answer fails only its own. One
/// answer per input, in order.
async fn per_shard<T, R, W, Fut>(
    inputs: Vec<T>,
    shard_of: impl Fn(&T) -> usize,
    write: W,
) -> Vec<StoreResult<R>>
where
    W: Fn(Vec<T>) -> Fut,
    Fut: std::future::Future<Output = Vec<Option<StoreResult<R>>>>,
{
    let mut parts: std::collections::BTreeMap<usize, (Vec<usize>, Vec<T>)> = Default::default();
    let total = inputs.len();
    for (i, input) in inputs.into_iter().enumerate() {
        let part = parts.entry(shard_of(&input)).or_default();
        part.0.push(i);
        part.1.push(input);
    }
    let written = futures::future::join_all(parts.into_values().map(|(at, part)| {
        let answers = write(part);
        async move { (at, answers.await) }
    }))
    .await;
    let mut out: Vec<Option<StoreResult<R>>> = (0..total).map(|_| None).collect();
    for (at, answers) in written {
        for (i, answer) in at.into_iter().zip(answers) {
            out[i] = answer;
        }
    }
    answered(out)
}

/// The answer for every job of a batch that failed because the database
/// could not be reached.
fn unreachable(e: &StoreError) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

/// `call`, or [`StoreError::Unavailable`] once `deadline` has passed (its
/// connection is dropped; a write already on the wire may still be applied,
/// and every write here is idempotent).
async fn within<T>(
    deadline: Duration,
    call: impl std::future::Future<Output = StoreResult<T>>,
) -> StoreResult<T> {
    tokio::time::timeout(deadline, call)
        .await
        .unwrap_or_else(|_| {
            Err(StoreError::Unavailable(format!(
                "the database did not answer within {}",
                humantime::format_duration(deadline)
            )))
        })
}

/// Writes prepares: one multi-row INSERT per batch.
struct WritePrepares {
    store: DynStore,
    deadline: Duration,
    rows: Option<PreparedRows>,
}

impl BatchWrite<NewMessage, StoreResult<Inserted>> for WritePrepares {
    async fn write(&self, jobs: &mut Vec<PrepareJob>) {
        let (store, deadline) = (&self.store, self.deadline);
        skip_abandoned(jobs);
        if jobs.is_empty() {
            return;
        }
        let batch: Vec<NewMessage> = jobs.iter().map(|j| j.input.clone()).collect();
        metrics::histogram!("trustmsg_prepare_batch_size").record(batch.len() as f64);
        match within(deadline, store.insert_prepared_batch(&batch)).await {
            Ok(results) => {
                for (job, result) in jobs.drain(..).zip(results) {
                    if matches!(result, Inserted::Created(_)) {
                        flow::count(Event::Prepared);
                    }
                    // A created row is a PREPARED one; a row that was already
                    // there may be decided, and is read when its decision comes.
                    if let (Some(rows), Inserted::Created(m)) = (&self.rows, &result) {
                        let key = (m.biz_id.clone(), m.message_key.clone());
                        rows.insert(key, Arc::new(m.clone())).await;
                    }
                    job.answer(Ok(result));
                }
            }
            Err(e) if e.is_unreachable() => {
                tracing::warn!(error = %e, size = jobs.len(), "batched prepare failed: database unreachable");
                for job in jobs.drain(..) {
                    job.answer(Err(unreachable(&e)));
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, size = jobs.len(), "batched prepare failed; writing one by one");
                for job in jobs.drain(..) {
                    if job.is_abandoned() {
                        continue;
                    }
                    let inserted = within(deadline, store.insert_prepared(&job.input)).await;
                    if let Ok(Inserted::Created(_)) = &inserted {
                        flow::count(Event::Prepared);
                    }
                    job.answer(inserted);
                }
            }
        }
    }
}

fn request(d: &Decision, send_lease: Duration) -> DecideRequest<'_> {
    DecideRequest {
        target: Target::Key {
            biz_id: &d.biz_id,
            message_key: &d.message_key,
        },
        commit: d.commit,
        actor: match d.via {
            Via::Http => Actor::Producer(d.biz_id.clone()),
            Via::Kafka { .. } => Actor::Kafka,
            Via::Outbox { .. } => Actor::Outbox,
        },
        reason: match d.via {
            Via::Http => store::producer_reason(d.commit),
            Via::Kafka { partition, offset } => format!(
                "{} by producer {}, submitted through Kafka (partition {partition}, offset {offset})",
                if d.commit { "commit" } else { "rollback" },
                d.biz_id
            ),
            Via::Outbox { row } => outbox_reason(&d.biz_id, row),
        },
        send_lease,
        verify_attempt: false,
    }
}

/// The audit reason of a message committed by `biz_id`'s own transaction,
/// relayed from `row` of its outbox table.
pub(crate) fn outbox_reason(biz_id: &str, row: u64) -> String {
    format!(
        "committed by producer {biz_id}'s own transaction: row {row} of its outbox table, relayed"
    )
}

/// Writes decisions: one guarded UPDATE plus one audit INSERT per batch.
struct WriteDecisions {
    store: DynStore,
    commits: Arc<dyn CommitListener>,
    send_lease: Duration,
    deadline: Duration,
    rows: Option<PreparedRows>,
}

impl WriteDecisions {
    /// A commit this batch made goes to the fast path whether or not its
    /// caller is still waiting (see the module docs); each decision made is
    /// counted in the flow.
    fn hand_off(&self, outcome: &DecideOutcome) {
        if let DecideOutcome::Decided(m) = outcome {
            flow::count_decided(m.status);
            if m.status == MessageStatus::Committed {
                self.commits.committed(m.clone());
            }
        }
    }
}

impl BatchWrite<Decision, StoreResult<DecideOutcome>> for WriteDecisions {
    async fn write(&self, jobs: &mut Vec<DecideJob>) {
        let (store, send_lease, deadline) = (&self.store, self.send_lease, self.deadline);
        skip_abandoned(jobs);
        if jobs.is_empty() {
            return;
        }
        metrics::histogram!("trustmsg_decide_batch_size").record(jobs.len() as f64);
        let reqs: Vec<DecideRequest<'_>> =
            jobs.iter().map(|j| request(&j.input, send_lease)).collect();
        // Taken out, not just read: whatever the outcome, the row is no longer
        // one this instance just prepared.
        let mut known = Vec::with_capacity(jobs.len());
        for j in jobs.iter() {
            known.push(match &self.rows {
                Some(rows) => {
                    rows.remove(&(j.input.biz_id.clone(), j.input.message_key.clone()))
                        .await
                }
                None => None,
            });
        }
        let known_rows: Vec<Option<&Message>> = known.iter().map(Option::as_deref).collect();
        match within(
            deadline,
            store::decide_batch_known(store.as_ref(), &reqs, &known_rows),
        )
        .await
        {
            Ok(outcomes) => {
                drop(reqs);
                for (job, outcome) in jobs.drain(..).zip(outcomes) {
                    self.hand_off(&outcome);
                    job.answer(Ok(outcome));
                }
            }
            Err(e) if e.is_unreachable() => {
                drop(reqs);
                tracing::warn!(error = %e, size = jobs.len(), "batched decision failed: database unreachable");
                for job in jobs.drain(..) {
                    job.answer(Err(unreachable(&e)));
                }
            }
            Err(e) => {
                drop(reqs);
                tracing::warn!(error = %e, size = jobs.len(), "batched decision failed; deciding one by one");
                for job in jobs.drain(..) {
                    if job.is_abandoned() {
                        continue;
                    }
                    let write = store::decide(store.as_ref(), request(&job.input, send_lease));
                    let outcome = within(deadline, write).await;
                    if let Ok(decided) = &outcome {
                        self.hand_off(decided);
                    }
                    job.answer(outcome);
                }
            }
        }
    }
}
