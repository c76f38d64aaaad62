//! The relay of one source: take the source's lock (or wait as a standby),
//! then claim pending rows in batches, write each batch's messages to
//! trustmsg (prepare and commit, as the producer would have), mark the
//! rows relayed or failed, commit, and purge what retention lets go. Any
//! error drops the connection (its batch rolls back) and starts again
//! after a backoff.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::row;
use super::source::{RelayConn, SourceRow, LANES};
use super::{OutboxSettings, RelayState, Source};
use crate::backoff::Backoff;
use crate::group_commit::producer_writes::{outbox_reason, Decision, Via};
use crate::intake::{decided, prepared, Intake};
use crate::store::{Actor, DecideOutcome, NewCommitted, OutboxFailure, Producer, StoreError};

/// Waits between attempts at a source that failed.
const RETRY: Backoff = Backoff {
    base: Duration::from_millis(200),
    max: Duration::from_secs(10),
};

/// How often a standby asks for the lock again, and a source waiting for
/// its producer's registration looks again.
const STANDBY_POLL: Duration = Duration::from_secs(1);

/// How often the lock holder purges what retention lets go.
const PURGE_EVERY: Duration = Duration::from_secs(10);

/// How long the first claim after one that found the source empty waits;
/// each next empty one doubles it, up to `--outbox-interval`.
const IDLE_FIRST: Duration = Duration::from_millis(1);

/// Rows purged per statement.
const PURGE_CHUNK: u32 = 1000;

/// Most content written to trustmsg in one prepare (and one decision)
/// transaction: a batch of large rows is written in parts.
const WRITE_BYTES: usize = 8 << 20;

/// `rows` in consecutive parts of at most `budget` bytes of content each
/// (a row larger than the budget is a part of its own).
fn by_bytes(rows: &[SourceRow], budget: usize) -> impl Iterator<Item = &[SourceRow]> {
    let mut rest = rows;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0;
        let mut n = 0;
        for r in rest {
            let size = r.payload.len() + r.headers.as_ref().map_or(0, Vec::len);
            if n > 0 && bytes + size > budget {
                break;
            }
            bytes += size;
            n += 1;
        }
        let (part, tail) = rest.split_at(n);
        rest = tail;
        Some(part)
    })
}

/// A lane's part.
enum Lane {
    /// The lane holding the source's lock, on its connection.
    First(RelayConn),
    /// A lane that joins in while the source is busy.
    Helper,
}

/// Why a session with the source ended.
enum Ended {
    Shutdown,
    /// The source failed (its connection is dropped).
    Source(String),
}

/// What became of one claimed row.
enum Outcome {
    Relayed,
    Failed {
        reason: String,
        message_id: u64,
    },
    /// An ordered producer's row behind a row of its record key that failed
    /// in this batch: left pending, claimed again once an operator has
    /// retried or given up the failed row.
    Held,
}

pub(crate) struct Relay {
    pub(crate) source: Arc<Source>,
    pub(crate) intake: Intake,
    pub(crate) settings: Arc<OutboxSettings>,
}

/// `fut`, or an error once `deadline` has passed.
async fn within<T, E: std::fmt::Display>(
    deadline: Duration,
    what: &str,
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(deadline, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what}: {e}")),
        Err(_) => Err(format!(
            "{what}: no answer within {}",
            humantime::format_duration(deadline)
        )),
    }
}

impl Relay {
    /// Relays until `shutdown`, starting again after every failure.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        let biz_id = self.source.biz_id.clone();
        let mut attempt = 0u32;
        loop {
            match self.session(&shutdown, &mut attempt).await {
                Ended::Shutdown => break,
                Ended::Source(e) => {
                    tracing::warn!(source = %biz_id, error = %e, "outbox source: the relay starts again after a pause");
                    self.source.error("source", e);
                    self.source.set_state(RelayState::Down);
                    attempt += 1;
                    tokio::select! {
                        () = shutdown.cancelled() => break,
                        () = tokio::time::sleep(RETRY.delay(attempt)) => {}
                    }
                }
            }
        }
    }

    /// One connection's life: lock, then batches on [`LANES`] lanes until an
    /// error or shutdown.
    async fn session(&self, shutdown: &CancellationToken, attempt: &mut u32) -> Ended {
        let s = &self.settings;
        let mut conn = match within(s.deadline, "connecting", self.source.db.relay_conn()).await {
            Ok(c) => c,
            Err(e) => return Ended::Source(e),
        };
        let standby_since = Instant::now();
        loop {
            match within(s.deadline, "taking the source's lock", conn.try_lock()).await {
                Ok(true) => break,
                Ok(false) => {
                    self.source.set_state(RelayState::Standby);
                    // A standby is healthy: its pause starts again from the
                    // shortest, but only once it has stood by longer than
                    // the longest pause. Right after a failed session the
                    // lock is often still held by that session's own
                    // connection, which the server has not closed yet; that
                    // must not reset the doubling.
                    if standby_since.elapsed() >= RETRY.max {
                        *attempt = 0;
                    }
                }
                Err(e) => return Ended::Source(e),
            }
            tokio::select! {
                () = shutdown.cancelled() => return Ended::Shutdown,
                () = tokio::time::sleep(STANDBY_POLL) => {}
            }
        }
        tracing::info!(source = %self.source.biz_id, "outbox source: this instance relays it");
        // The first lane holds the lock and polls; the others join in only
        // while its batches come back at least half full, each on a connection of its
        // own, and never for an ordered producer (one lane keeps the order).
        let busy = Notify::new();
        let busy = &busy;
        let claimed = AtomicBool::new(false);
        let claimed = &claimed;
        let lanes = std::iter::once(Lane::First(conn))
            .chain((1..LANES).map(|_| Lane::Helper))
            .map(|lane| Box::pin(self.lane(lane, busy, claimed, shutdown)));
        let (ended, _, _) = futures::future::select_all(lanes).await;
        // The pause starts again from its shortest only after a session that
        // claimed: a source whose connection and lock work but whose table
        // is missing (or refuses the claim) keeps doubling its pause up to
        // the longest, instead of being tried every 0.2 s.
        if claimed.load(Ordering::Relaxed) {
            *attempt = 0;
        }
        ended
    }

    /// The producer of this source, or why there is none now (the lane
    /// waits and looks again).
    async fn producer(&self, first: bool, shutdown: &CancellationToken) -> Option<Arc<Producer>> {
        match self.intake.registry.get(&self.source.biz_id).await {
            Ok(Some(p)) => return Some(p),
            Ok(None) if first => {
                if self.source.state() != RelayState::WaitingForProducer {
                    tracing::warn!(
                        source = %self.source.biz_id,
                        "outbox source: no producer {:?} is registered; its rows wait until \
                         it is (PUT /v1/producers/{})",
                        self.source.biz_id, self.source.biz_id
                    );
                }
                self.source.set_state(RelayState::WaitingForProducer);
                self.intake.registry.invalidate(&self.source.biz_id).await;
            }
            Ok(None) => {}
            Err(e) if first => {
                self.source
                    .error("trustmsg", format!("reading the registration: {e}"));
            }
            Err(_) => {}
        }
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = tokio::time::sleep(STANDBY_POLL) => {}
        }
        None
    }

    /// One lane: claims and relays batches until an error or shutdown. The
    /// first claims again at once after a batch, and after
    /// `--outbox-interval` when it found nothing, and purges; a helper waits
    /// to be woken by a batch of the first that was at least half full and
    /// works until its own claims come back less than half full.
    async fn lane(
        &self,
        lane: Lane,
        busy: &Notify,
        claimed: &AtomicBool,
        shutdown: &CancellationToken,
    ) -> Ended {
        let s = &self.settings;
        let (first, mut conn) = match lane {
            Lane::First(conn) => (true, Some(conn)),
            Lane::Helper => (false, None),
        };
        let mut attempt = 0u32;
        let mut last_purge: Option<Instant> = None;
        // Claims in a row that found the source empty: the next waits
        // 1 ms, then twice as long each time, up to `--outbox-interval`.
        let mut empties = 0u32;
        loop {
            if !first {
                tokio::select! {
                    () = shutdown.cancelled() => return Ended::Shutdown,
                    () = busy.notified() => {}
                }
            }
            loop {
                if shutdown.is_cancelled() {
                    return Ended::Shutdown;
                }
                let Some(producer) = self.producer(first, shutdown).await else {
                    if first {
                        continue;
                    }
                    break;
                };
                if !first && producer.ordered {
                    break;
                }
                if first && self.source.state() != RelayState::Relaying {
                    self.source.set_state(RelayState::Relaying);
                }
                let c = match &mut conn {
                    Some(c) => c,
                    None => {
                        match within(s.deadline, "connecting", self.source.db.relay_conn()).await {
                            Ok(c) => conn.insert(c),
                            Err(e) => return Ended::Source(e),
                        }
                    }
                };
                let claimed_in = Instant::now();
                let claim = c.claim(s.batch, producer.ordered);
                let rows = match within(s.deadline, "claiming rows", claim).await {
                    Ok(rows) => rows,
                    Err(e) => return Ended::Source(e),
                };
                claimed.store(true, Ordering::Relaxed);
                tracing::debug!(rows = rows.len(), took = ?claimed_in.elapsed(), "outbox: claimed");
                // Busy: half a batch or more came at once. The helpers join
                // in, and keep on while it stays so.
                let busy_now = rows.len() * 2 >= s.batch as usize;
                let empty = rows.is_empty();
                if busy_now && first && !producer.ordered {
                    busy.notify_waiters();
                }
                if !rows.is_empty() {
                    match self.relay_batch(c, &producer, rows).await {
                        Ok(()) => attempt = 0,
                        Err(BatchError::Source(e)) => return Ended::Source(e),
                        Err(BatchError::Trustmsg(e)) => {
                            if let Err(e) = within(s.deadline, "rolling back", c.rollback()).await {
                                return Ended::Source(e);
                            }
                            self.pause_for_trustmsg(e, &mut attempt, shutdown).await;
                            continue;
                        }
                    }
                }
                if first && last_purge.is_none_or(|at| at.elapsed() >= PURGE_EVERY) {
                    last_purge = Some(Instant::now());
                    if let Err(e) = self.purge(c).await {
                        return Ended::Source(e);
                    }
                }
                if !first && !busy_now {
                    break;
                }
                // Rows keep coming: the next claim follows at once (a row
                // waits one batch, not an interval). A source found empty
                // is looked at again soon, then less and less often, up
                // to `--outbox-interval`: rows that trickle in (one every
                // few milliseconds) wait about as long as between two of
                // them, an idle source costs a claim per interval.
                if first && empty {
                    empties = empties.saturating_add(1);
                    let idle = Backoff {
                        base: IDLE_FIRST,
                        max: s.interval,
                    };
                    tokio::select! {
                        () = shutdown.cancelled() => return Ended::Shutdown,
                        () = tokio::time::sleep(idle.delay(empties)) => {}
                    }
                } else {
                    empties = 0;
                }
            }
        }
    }

    /// trustmsg's own database failed: the batch was given back; wait.
    async fn pause_for_trustmsg(&self, e: String, attempt: &mut u32, shutdown: &CancellationToken) {
        tracing::warn!(source = %self.source.biz_id, error = %e, "outbox source: trustmsg's database did not take a batch; the rows stay pending");
        self.source.error("trustmsg", e);
        *attempt += 1;
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = tokio::time::sleep(RETRY.delay(*attempt)) => {}
        }
    }

    /// Deletes relayed and given-up rows older than the retention.
    async fn purge(&self, conn: &mut RelayConn) -> Result<(), String> {
        let s = &self.settings;
        loop {
            let deleted = within(
                s.deadline,
                "purging relayed rows",
                conn.purge(s.retention, PURGE_CHUNK),
            )
            .await?;
            if deleted > 0 {
                metrics::counter!("trustmsg_outbox_purged_total", "source" => self.source.biz_id.clone())
                    .increment(deleted);
            }
            if deleted < u64::from(PURGE_CHUNK) {
                return Ok(());
            }
        }
    }

    /// Writes a claimed batch's messages to trustmsg, records its failures,
    /// then marks the rows and commits the source transaction.
    async fn relay_batch(
        &self,
        conn: &mut RelayConn,
        producer: &Producer,
        rows: Vec<SourceRow>,
    ) -> Result<(), BatchError> {
        let s = &self.settings;
        let started = Instant::now();
        let outcomes = within(s.deadline, "writing to trustmsg", async {
            let mut outcomes = Vec::with_capacity(rows.len());
            for part in by_bytes(&rows, WRITE_BYTES) {
                outcomes.extend(self.write(producer, part).await?);
            }
            Ok::<_, StoreError>(outcomes)
        })
        .await
        .map_err(BatchError::Trustmsg)?;
        let mut relayed = Vec::with_capacity(rows.len());
        let mut failed = Vec::new();
        for (row, outcome) in rows.iter().zip(outcomes) {
            match outcome {
                Outcome::Relayed => relayed.push(row.id),
                Outcome::Held => {}
                Outcome::Failed { reason, message_id } => {
                    let failure = OutboxFailure {
                        biz_id: producer.biz_id.clone(),
                        source_row_id: row.id,
                        attempt: row.retry_count,
                        message_key: String::from_utf8_lossy(&row.message_key).into_owned(),
                        reason: reason.clone(),
                        message_id,
                    };
                    within(
                        s.deadline,
                        "recording a failed row",
                        self.intake.store.record_outbox_failure(&failure),
                    )
                    .await
                    .map_err(BatchError::Trustmsg)?;
                    tracing::warn!(source = %producer.biz_id, row = row.id, message_key = %failure.message_key, %reason, "outbox source: a row is marked failed");
                    failed.push((row.id, reason));
                }
            }
        }
        let written = started.elapsed();
        let keep = !s.retention.is_zero();
        within(
            s.deadline,
            "marking relayed rows",
            conn.finish(&relayed, &failed, keep),
        )
        .await
        .map_err(BatchError::Source)?;
        self.source
            .relayed(relayed.len() as u64, failed.len() as u64);
        tracing::debug!(
            rows = rows.len(),
            ?written,
            marked = ?started.elapsed().saturating_sub(written),
            "outbox: batch relayed"
        );
        Ok(())
    }

    /// Each row's outcome: prepared and committed, or refused for good.
    /// Err when trustmsg's database could not take the batch (nothing is
    /// marked; the rows are relayed again, and what was written is found).
    async fn write(
        &self,
        producer: &Producer,
        rows: &[SourceRow],
    ) -> Result<Vec<Outcome>, StoreError> {
        let mut outcomes: Vec<Option<Outcome>> = Vec::with_capacity(rows.len());
        // An ordered producer's record keys with a row failed in this batch:
        // the key's later rows are held, as the claim holds rows behind a
        // row failed before.
        let mut blocked: HashSet<Vec<u8>> = HashSet::new();
        let mut news = Vec::new();
        let mut at = Vec::new();
        for (i, r) in rows.iter().enumerate() {
            if producer.ordered && r.record_key.as_ref().is_some_and(|k| blocked.contains(k)) {
                outcomes.push(Some(Outcome::Held));
                continue;
            }
            match row::message(&self.intake, producer, r) {
                Ok(new) => {
                    at.push(i);
                    news.push(new);
                    outcomes.push(None);
                }
                Err(reason) => {
                    blocked.extend(r.record_key.clone());
                    outcomes.push(Some(Outcome::Failed {
                        reason,
                        message_id: 0,
                    }));
                }
            }
        }
        // The common batch, where trustmsg took every row: each becomes a
        // committed message in one step (one INSERT, no UPDATE). A batch
        // with a refused row (whose ordered key's other rows wait with it)
        // or a row relayed before goes the two steps below, which sort
        // those out.
        if !news.is_empty() && news.len() == rows.len() {
            let batch: Vec<NewCommitted> = news
                .into_iter()
                .zip(&at)
                .map(|(message, &i)| NewCommitted {
                    message,
                    actor: Actor::Outbox,
                    reason: outbox_reason(&producer.biz_id, rows[i].id),
                })
                .collect();
            let t = Instant::now();
            if self.intake.writes.create_committed(&batch).await?.is_some() {
                tracing::debug!(took = ?t.elapsed(), "outbox: created committed");
                return Ok(rows.iter().map(|_| Outcome::Relayed).collect());
            }
            news = batch.into_iter().map(|c| c.message).collect();
        }
        let digests: Vec<Vec<u8>> = news.iter().map(|n| n.digest()).collect();
        let keys: Vec<String> = news.iter().map(|n| n.message_key.clone()).collect();
        let t = Instant::now();
        let inserted = self.intake.writes.prepare_together(news).await;
        tracing::debug!(took = ?t.elapsed(), "outbox: prepared");
        let mut commits = Vec::new();
        let mut commit_at = Vec::new();
        for (j, (&i, result)) in at.iter().zip(inserted).enumerate() {
            let existing = match &result {
                Ok(crate::store::Inserted::Existing(m)) => m.id,
                _ => 0,
            };
            let held = producer.ordered
                && rows[i]
                    .record_key
                    .as_ref()
                    .is_some_and(|k| blocked.contains(k));
            match result.map(|ins| prepared(ins, &digests[j])) {
                // Prepared (or found) behind a row of its key that failed
                // just now: its commit waits with it (the prepared message's
                // first check-back is an hour off, see `row`).
                Ok(Ok(_)) if held => outcomes[i] = Some(Outcome::Held),
                Ok(Ok(_)) => {
                    commit_at.push(i);
                    commits.push(Decision {
                        biz_id: producer.biz_id.clone(),
                        message_key: keys[j].clone(),
                        commit: true,
                        via: Via::Outbox { row: rows[i].id },
                    });
                }
                Ok(Err(refused)) => {
                    blocked.extend(rows[i].record_key.clone());
                    outcomes[i] = Some(Outcome::Failed {
                        reason: format!("{}: {refused}", refused.code()),
                        message_id: existing,
                    });
                }
                Err(StoreError::Corrupt(e)) => {
                    outcomes[i] = Some(Outcome::Failed {
                        reason: format!("trustmsg cannot read the message under its key: {e}"),
                        message_id: 0,
                    });
                }
                Err(e) => return Err(e),
            }
        }
        let t = Instant::now();
        let outcomes_of_commits = self.intake.writes.decide_together(commits).await;
        tracing::debug!(took = ?t.elapsed(), "outbox: committed");
        for (&i, result) in commit_at.iter().zip(outcomes_of_commits) {
            let key = String::from_utf8_lossy(&rows[i].message_key).into_owned();
            match result {
                Ok(DecideOutcome::NotFound) => {
                    return Err(StoreError::Vanished("a relayed row's prepared message"))
                }
                Ok(outcome) => {
                    let id = match &outcome {
                        DecideOutcome::Conflict(m) => m.id,
                        _ => 0,
                    };
                    outcomes[i] = Some(match decided(outcome, true, &producer.biz_id, &key) {
                        Ok(_) => Outcome::Relayed,
                        Err(refused) => Outcome::Failed {
                            reason: format!("{}: {refused}", refused.code()),
                            message_id: id,
                        },
                    });
                }
                Err(e) => return Err(e),
            }
        }
        Ok(outcomes
            .into_iter()
            .map(|o| o.expect("every row has an outcome"))
            .collect())
    }
}

/// Why a batch was not finished.
enum BatchError {
    /// The source failed: drop the connection.
    Source(String),
    /// trustmsg's database failed: give the batch back and wait.
    Trustmsg(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(bytes: usize) -> SourceRow {
        SourceRow {
            id: 1,
            message_key: b"k".to_vec(),
            topic: b"t".to_vec(),
            record_key: None,
            payload: vec![0; bytes],
            headers: None,
            content_type: None,
            deliver_at: None,
            traceparent: None,
            retry_count: 0,
        }
    }

    #[test]
    fn a_batch_is_written_in_parts_within_the_byte_budget_and_in_order() {
        let rows: Vec<SourceRow> = [4, 4, 4, 10, 1, 1].into_iter().map(row).collect();
        let sizes: Vec<Vec<usize>> = by_bytes(&rows, 8)
            .map(|p| p.iter().map(|r| r.payload.len()).collect())
            .collect();
        assert_eq!(sizes, vec![vec![4, 4], vec![4], vec![10], vec![1, 1]]);
    }
}
