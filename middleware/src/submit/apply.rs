//! Applying a batch of submitted records: check each (contract, signature,
//! the HTTP API's validation), write them in phases that keep each
//! message's operations in order, park commits whose prepare is missing,
//! and dead-letter what cannot be applied. See the module docs of
//! [`crate::submit`] for what is guaranteed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use trustmsg_verify_api::submit::{self, Op, SubmitSignatureError};

use super::dead_letters::{DeadLetter, DeadLetters};
use super::record::{self, Record, Submitted};
use super::SubmitSettings;
use crate::backoff::Backoff;
use crate::group_commit::producer_writes::{Decision, Via};
use crate::intake::{decided, prepared, validate, Intake, IntakeError};
use crate::store::{
    DecideOutcome, NewMessage, NewWaitingCommit, Producer, StoreError, WaitingCommit,
};

/// How often waiting commits are retried.
pub(super) const WAITING_RETRY: Duration = Duration::from_secs(1);
/// Waiting commits claimed at once.
const WAITING_CLAIM: u32 = 256;

/// Waits between attempts at a batch the database could not take.
const RETRY: Backoff = Backoff {
    base: Duration::from_millis(100),
    max: Duration::from_secs(5),
};

/// What one checked record writes.
enum Write {
    Prepare {
        new: Box<NewMessage>,
        digest: Vec<u8>,
    },
    Decide,
}

/// One checked record's operation.
struct Step {
    /// Its record's place in the batch.
    record: usize,
    op: Op,
    biz_id: String,
    message_key: String,
    write: Write,
}

/// Applies batches of submitted records (one consumer at a time) and
/// retries waiting commits.
pub(crate) struct Ingest {
    intake: Intake,
    settings: SubmitSettings,
    dead: Arc<DeadLetters>,
    /// Wakes the retries of waiting commits after prepares were written.
    wake: Arc<Notify>,
    /// Whether commits may be waiting (this instance parked one, or the
    /// last retry found some): only then do prepares wake the retries.
    maybe_waiting: AtomicBool,
}

fn count(op: &str, outcome: &'static str) {
    metrics::counter!("trustmsg_submit_records_total", "op" => op.to_string(), "outcome" => outcome)
        .increment(1);
}

fn letter(r: &Record, e: &IntakeError) -> DeadLetter {
    DeadLetter {
        key: r.key.clone(),
        headers: r.headers.clone(),
        value: r.value.clone(),
        code: e.code(),
        error: e.to_string(),
    }
}

/// Whether a failed write may succeed unchanged later: everything but a
/// row this version cannot read.
fn retryable(e: &StoreError) -> bool {
    !matches!(e, StoreError::Corrupt(_))
}

impl Ingest {
    pub(super) fn new(
        intake: Intake,
        settings: SubmitSettings,
        dead: Arc<DeadLetters>,
        wake: Arc<Notify>,
    ) -> Self {
        Self {
            intake,
            settings,
            dead,
            wake,
            maybe_waiting: AtomicBool::new(true),
        }
    }

    /// Applies `records` whole: true once everything they did is durable
    /// (rows written, commits parked, dead letters acknowledged). What the
    /// database or the broker could not take is retried until it can, or
    /// until shutdown, when false says the batch is not done (its offsets
    /// must not be committed).
    pub(super) async fn apply(&self, records: &[Record], shutdown: &CancellationToken) -> bool {
        let mut attempt = 0;
        let (steps, dead) = loop {
            let mut dead = Vec::new();
            match self.checked(records, &mut dead).await {
                Ok(steps) => break (steps, dead),
                Err(e) => {
                    tracing::warn!(error = %e, "checking submitted records: the registry is unavailable; retrying");
                    if !self.pause(&mut attempt, shutdown).await {
                        return false;
                    }
                }
            }
        };
        let mut dead = dead;
        for phase in phases(records, &steps) {
            let mut pending = phase;
            let mut attempt = 0;
            loop {
                pending = self.write_phase(records, &steps, pending, &mut dead).await;
                if pending.is_empty() {
                    break;
                }
                if !self.pause(&mut attempt, shutdown).await {
                    return false;
                }
            }
        }
        for d in &dead {
            let mut attempt = 0;
            while let Err(e) = self.dead.send(d).await {
                tracing::warn!(error = %e, topic = %self.settings.dead_letters, "producing a dead letter failed; retrying");
                if !self.pause(&mut attempt, shutdown).await {
                    return false;
                }
            }
        }
        true
    }

    /// Waits before the next attempt; false at shutdown.
    async fn pause(&self, attempt: &mut u32, shutdown: &CancellationToken) -> bool {
        *attempt += 1;
        tokio::select! {
            () = shutdown.cancelled() => false,
            () = tokio::time::sleep(RETRY.delay(*attempt)) => true,
        }
    }

    /// Each record's operation, checked as the HTTP API checks a request;
    /// what is refused goes to `dead`. Err only when the registry could not
    /// be read (transient: the whole check is done again).
    async fn checked(
        &self,
        records: &[Record],
        dead: &mut Vec<DeadLetter>,
    ) -> Result<Vec<Step>, IntakeError> {
        let mut producers: HashMap<String, (Option<Arc<Producer>>, bool)> = HashMap::new();
        let mut steps = Vec::with_capacity(records.len());
        for (i, r) in records.iter().enumerate() {
            let s = match record::parse(r) {
                Ok(s) => s,
                Err(e) => {
                    count("unknown", "dead_letter");
                    dead.push(letter(r, &e));
                    continue;
                }
            };
            let checked = match self.authenticated(&s, &r.value, &mut producers).await {
                Ok(producer) => self.write_of(&s, r, &producer),
                Err(e) => Err(e),
            };
            match checked {
                Ok(write) => steps.push(Step {
                    record: i,
                    op: s.op,
                    biz_id: s.biz_id,
                    message_key: s.message_key,
                    write,
                }),
                Err(e) if e.is_transient() => return Err(e),
                Err(e) => {
                    count(s.op.as_str(), "dead_letter");
                    dead.push(letter(r, &e));
                }
            }
        }
        Ok(steps)
    }

    /// The producer `s` names, if its signature is one of that producer's.
    /// A mismatch, or no registration, reads the registration again once
    /// (bypassing the cache), so a producer signing with a just-rotated
    /// secret, or registered a moment ago, is not refused.
    async fn authenticated(
        &self,
        s: &Submitted,
        value: &[u8],
        producers: &mut HashMap<String, (Option<Arc<Producer>>, bool)>,
    ) -> Result<Arc<Producer>, IntakeError> {
        validate::biz_id(&s.biz_id)?;
        validate::message_key(&s.message_key)?;
        let registry = &self.intake.registry;
        if !producers.contains_key(&s.biz_id) {
            let p = registry.get(&s.biz_id).await?;
            producers.insert(s.biz_id.clone(), (p, false));
        }
        loop {
            let (producer, fresh) = producers[&s.biz_id].clone();
            let Some(producer) = producer else {
                if !fresh {
                    // Registered since the cache last looked, perhaps.
                    registry.invalidate(&s.biz_id).await;
                    let p = registry.get(&s.biz_id).await?;
                    producers.insert(s.biz_id.clone(), (p, true));
                    continue;
                }
                return Err(IntakeError::Unauthorized(format!(
                    "no producer {:?} is registered: register it (PUT /v1/producers/{}) and sign \
                     its records with the signing secret the registration returns",
                    s.biz_id, s.biz_id
                )));
            };
            match submit::verify(&producer.signing_secret, &s.signed(value), &s.signature) {
                Ok(()) => return Ok(producer),
                Err(SubmitSignatureError::Ambiguous(what)) => {
                    return Err(IntakeError::invalid(
                        "invalid_request",
                        SubmitSignatureError::Ambiguous(what).to_string(),
                    ))
                }
                Err(SubmitSignatureError::Signature(_)) if !fresh => {
                    registry.invalidate(&s.biz_id).await;
                    let p = registry.get(&s.biz_id).await?;
                    producers.insert(s.biz_id.clone(), (p, true));
                }
                Err(SubmitSignatureError::Signature(e)) => {
                    return Err(IntakeError::Unauthorized(format!(
                        "the record's {} does not match producer {:?}'s signing secret ({e}); \
                         sign it with the secret its registration returned (see docs/kafka-submit.md)",
                        submit::SIGNATURE,
                        s.biz_id
                    )))
                }
            }
        }
    }

    /// What `s` writes: a prepare checked as the HTTP API checks one.
    fn write_of(
        &self,
        s: &Submitted,
        r: &Record,
        producer: &Producer,
    ) -> Result<Write, IntakeError> {
        match s.op {
            Op::Commit | Op::Rollback => Ok(Write::Decide),
            Op::Prepare => {
                let (req, traceparent, tracestate) = s.prepare_request()?;
                let (traceparent, tracestate) =
                    crate::observability::trace::stored_context(traceparent, tracestate);
                let new = self.intake.new_message(
                    Some(producer),
                    req,
                    Some(r.value.clone()),
                    traceparent,
                    tracestate,
                )?;
                let digest = new.digest();
                Ok(Write::Prepare {
                    new: Box::new(new),
                    digest,
                })
            }
        }
    }

    /// Writes the steps of one phase (prepares and decisions at once);
    /// returns those to try again.
    async fn write_phase(
        &self,
        records: &[Record],
        steps: &[Step],
        phase: Vec<usize>,
        dead: &mut Vec<DeadLetter>,
    ) -> Vec<usize> {
        let (prepares, decisions): (Vec<usize>, Vec<usize>) = phase
            .into_iter()
            .partition(|&i| matches!(steps[i].write, Write::Prepare { .. }));
        let news = prepares
            .iter()
            .filter_map(|&i| match &steps[i].write {
                Write::Prepare { new, .. } => Some(NewMessage::clone(new)),
                Write::Decide => None,
            })
            .collect();
        let decides = decisions
            .iter()
            .map(|&i| {
                let (s, r) = (&steps[i], &records[steps[i].record]);
                decision(
                    &s.biz_id,
                    &s.message_key,
                    s.op == Op::Commit,
                    r.partition,
                    r.offset,
                )
            })
            .collect();
        let writes = &self.intake.writes;
        let (inserted, outcomes) =
            tokio::join!(writes.prepare_now(news), writes.decide_now(decides));
        let mut again = Vec::new();
        let mut wrote_prepares = false;
        for (i, result) in prepares.into_iter().zip(inserted) {
            let (s, r) = (&steps[i], &records[steps[i].record]);
            let Write::Prepare { digest, .. } = &s.write else {
                continue;
            };
            let outcome = match result {
                Ok(inserted) if inserted.repeated_after_rollback(digest) => Ok(()),
                Ok(inserted) => prepared(inserted, digest).map(drop),
                Err(e) if retryable(&e) => {
                    again.push(i);
                    continue;
                }
                Err(e) => Err(IntakeError::Store(e)),
            };
            match outcome {
                Ok(()) => {
                    wrote_prepares = true;
                    count(s.op.as_str(), "applied");
                }
                Err(e) => {
                    count(s.op.as_str(), "dead_letter");
                    dead.push(letter(r, &e));
                }
            }
        }
        for (i, result) in decisions.into_iter().zip(outcomes) {
            let (s, r) = (&steps[i], &records[steps[i].record]);
            let commit = s.op == Op::Commit;
            let outcome = match result {
                Ok(DecideOutcome::NotFound) if commit => {
                    match self.park(s, r).await {
                        Ok(()) => count(s.op.as_str(), "waiting"),
                        Err(e) => {
                            tracing::warn!(error = %e, "parking a commit that came before its prepare; retrying");
                            again.push(i);
                        }
                    }
                    continue;
                }
                Ok(outcome) => decided(outcome, commit, &s.biz_id, &s.message_key).map(drop),
                Err(e) if retryable(&e) => {
                    again.push(i);
                    continue;
                }
                Err(e) => Err(IntakeError::Store(e)),
            };
            if let Err(e) = outcome {
                count(s.op.as_str(), "dead_letter");
                dead.push(letter(r, &e));
            } else {
                count(s.op.as_str(), "applied");
            }
        }
        if !again.is_empty() {
            tracing::warn!(
                count = again.len(),
                "the database did not take submitted records; retrying them"
            );
        }
        if wrote_prepares && self.maybe_waiting.load(Ordering::Relaxed) {
            self.wake.notify_one();
        }
        again
    }

    /// Keeps a commit whose prepare has not been seen, for
    /// `--submit-commit-wait`.
    async fn park(&self, s: &Step, r: &Record) -> Result<(), StoreError> {
        let waiting = NewWaitingCommit {
            biz_id: s.biz_id.clone(),
            message_key: s.message_key.clone(),
            partition: r.partition,
            offset: r.offset,
            record_key: r.key.clone(),
            headers: r
                .headers
                .iter()
                .map(|(n, v)| {
                    let v = v.as_deref().unwrap_or_default();
                    (n.clone(), String::from_utf8_lossy(v).into_owned())
                })
                .collect(),
            wait: self.settings.commit_wait,
        };
        let parked = self.intake.store.park_commit(&waiting).await?;
        self.maybe_waiting.store(true, Ordering::Relaxed);
        tracing::info!(
            biz_id = %s.biz_id,
            message_key = %s.message_key,
            partition = r.partition,
            offset = r.offset,
            replayed = !parked,
            "a submitted commit came before its prepare; it waits for it"
        );
        Ok(())
    }

    /// Retries the waiting commits that are due: applied once their prepare
    /// is in, dead-lettered at their bound, else tried again later.
    pub(super) async fn retry_waiting(&self) {
        let store = &self.intake.store;
        let lease = self.settings.kafka_timeout.saturating_mul(2) + WAITING_RETRY;
        let claimed = match store.claim_waiting_commits(WAITING_CLAIM, lease).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "claiming waiting commits");
                return;
            }
        };
        self.maybe_waiting
            .store(!claimed.is_empty(), Ordering::Relaxed);
        if claimed.is_empty() {
            return;
        }
        let decisions = claimed
            .iter()
            .map(|w| decision(&w.biz_id, &w.message_key, true, w.partition, w.offset))
            .collect();
        let outcomes = self.intake.writes.decide_now(decisions).await;
        for (w, outcome) in claimed.iter().zip(outcomes) {
            let settled = match outcome {
                // Its claim runs out and it is tried again.
                Err(e) => {
                    tracing::warn!(error = %e, id = w.id, "retrying a waiting commit");
                    continue;
                }
                Ok(DecideOutcome::NotFound) if w.now < w.give_up_at => {
                    if let Err(e) = store.retry_waiting_commit(w.id, WAITING_RETRY).await {
                        tracing::warn!(error = %e, id = w.id, "rescheduling a waiting commit");
                    }
                    continue;
                }
                Ok(DecideOutcome::NotFound) => Err(IntakeError::not_found(
                    "message_not_found",
                    format!(
                        "no prepare of message {:?} of {:?} arrived within --submit-commit-wait \
                         ({}) of its commit (partition {}, offset {}); nothing was committed: \
                         submit the prepare, then the commit again",
                        w.message_key,
                        w.biz_id,
                        humantime::format_duration(self.settings.commit_wait),
                        w.partition,
                        w.offset
                    ),
                )),
                Ok(outcome) => decided(outcome, true, &w.biz_id, &w.message_key).map(drop),
            };
            if let Err(e) = settled {
                if let Err(k) = self.dead.send(&waiting_letter(w, &e)).await {
                    tracing::warn!(error = %k, id = w.id, "dead-lettering a waiting commit; retrying later");
                    continue;
                }
                count("commit", "dead_letter");
            } else {
                count("commit", "applied");
            }
            if let Err(e) = store.unpark_commit(w.id).await {
                tracing::warn!(error = %e, id = w.id, "removing a settled waiting commit");
            }
        }
    }
}

/// A decision submitted at `partition`, `offset` of the submit topic.
fn decision(
    biz_id: &str,
    message_key: &str,
    commit: bool,
    partition: i32,
    offset: i64,
) -> Decision {
    Decision {
        biz_id: biz_id.to_string(),
        message_key: message_key.to_string(),
        commit,
        via: Via::Kafka { partition, offset },
    }
}

fn waiting_letter(w: &WaitingCommit, e: &IntakeError) -> DeadLetter {
    DeadLetter {
        key: w.record_key.clone(),
        headers: w
            .headers
            .iter()
            .map(|(n, v)| (n.clone(), Some(v.clone().into_bytes())))
            .collect(),
        value: Vec::new(),
        code: e.code(),
        error: e.to_string(),
    }
}

/// The phases the steps are written in, each a list of step indices: a
/// message's steps in the order of their records (a commit whose prepare
/// comes later in the batch moved just after it), and the decisions of one
/// partition in phases that never go back, so their order in a phase's
/// batched UPDATE is the order of their records.
fn phases(records: &[Record], steps: &[Step]) -> Vec<Vec<usize>> {
    type Key<'a> = (&'a str, &'a str);
    fn key(s: &Step) -> Key<'_> {
        (&s.biz_id, &s.message_key)
    }
    let mut last_prepare: HashMap<Key<'_>, usize> = HashMap::new();
    for (i, s) in steps.iter().enumerate() {
        if s.op == Op::Prepare {
            last_prepare.insert(key(s), i);
        }
    }
    let mut sequence = Vec::with_capacity(steps.len());
    let mut deferred: HashMap<Key<'_>, Vec<usize>> = HashMap::new();
    for (i, s) in steps.iter().enumerate() {
        if s.op == Op::Commit && last_prepare.get(&key(s)).is_some_and(|&p| p > i) {
            deferred.entry(key(s)).or_default().push(i);
            continue;
        }
        sequence.push(i);
        if s.op == Op::Prepare {
            if let Some(later) = deferred.remove(&key(s)) {
                sequence.extend(later);
            }
        }
    }
    let mut phases: Vec<Vec<usize>> = Vec::new();
    let mut of_key: HashMap<Key<'_>, usize> = HashMap::new();
    let mut of_partition: HashMap<i32, usize> = HashMap::new();
    for i in sequence {
        let s = &steps[i];
        let mut phase = of_key.get(&key(s)).map_or(0, |p| p + 1);
        if !matches!(s.write, Write::Prepare { .. }) {
            let partition = records[s.record].partition;
            phase = phase.max(of_partition.get(&partition).copied().unwrap_or(0));
            of_partition.insert(partition, phase);
        }
        of_key.insert(key(s), phase);
        if phases.len() <= phase {
            phases.resize_with(phase + 1, Vec::new);
        }
        phases[phase].push(i);
    }
    phases
}
