//! Retention and the time partitions, one worker.
//!
//! Each round first keeps the time partitions (MySQL/MariaDB, PostgreSQL;
//! `store/sql/partitions.rs`): one instance at a time makes the partitions
//! ahead, moves new ids to the next period when the current one has lasted
//! `--partition-period`, and, with `--retention`, drops the partitions
//! whose messages are all finished — SENT, or ROLLED_BACK (tombstones
//! included) — and unchanged for longer than the window, with their audit,
//! check-attempt, consumption-ledger and content rows. A partition that
//! still holds a message an operator may need (PREPARED, VERIFY_FAILED,
//! PENDING, SEND_FAILED) waits.
//!
//! Then, with `--retention`, rows are deleted one by one where a partition
//! cannot go: the finished messages of the partitions held past retention
//! (every finished message on SQLite, which is not partitioned), and the
//! settled alerts (delivered, or without a webhook) unchanged for the
//! window; a pending alert never is. Deletion goes in batches of [`BATCH`]
//! messages, each in its own short transaction, with a pause between
//! batches, so a large clean-up never holds locks for long nor starves the
//! API. Every instance may run it; two deleting the same rows at once only
//! find less to delete. Deletions (messages and alerts) are counted in
//! `trustmsg_retention_deleted_total`, dropped partitions in
//! `trustmsg_partitions_dropped_total`.
//!
//! With an archive (`--archive`), nothing leaves unarchived. A partition
//! the upkeep would drop is archived first, batch after batch, and dropped
//! by a later upkeep once its archive has reached its end
//! ([`crate::store::HousekeepingStore::mark_archived`]); the finished
//! messages of held partitions are archived and then deleted row by row.
//! Each batch is read with everything that hangs off it, written to the
//! archive and read back ([`Archive::write_checked`]); only then is it
//! marked archived, or are exactly those messages deleted, each only if
//! unchanged since it was read
//! ([`crate::store::HousekeepingStore::delete_archived`]).
//! An archive that fails holds the deletion: nothing is deleted, the
//! failure is logged and counted (`trustmsg_archive_failures_total`), the
//! round ends and the next one tries again. One `archive_failed` alert is
//! raised per episode: at the first failure, and again only after an
//! archive write has succeeded in between. Archived messages are counted
//! in `trustmsg_archived_total`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::archive::{Archive, ArchiveError, Written};
use crate::store::{
    deadline, period_ids, ArchiveRange, DynStore, FinishedMessage, FinishedRange, PartitionPlan,
    PartitionRound,
};
use crate::workers::periodic;

/// Messages deleted per transaction (and archived per object).
pub const BATCH: u32 = 500;
/// The pause between two batches of one round.
const PAUSE: Duration = Duration::from_millis(50);
/// The most payload bytes one archive object holds (past its first
/// message): what a batch costs in memory while it is written and read back.
pub const ARCHIVE_BATCH_BYTES: u64 = 64 << 20;
/// The longest an archive write with its read-back may take before the
/// round counts it failed (the object store retries on its own within it).
const ARCHIVE_DEADLINE: Duration = Duration::from_secs(120);

/// What a round of partition upkeep may take at most: it drops whole
/// partitions and deletes a round's share of their keys.
const UPKEEP_LIMIT: Duration = Duration::from_secs(60);

/// Starts the worker; it ends on `cancel`. Each batch of the row purge
/// takes at most `limit` (see [`crate::store::deadline`]); a partition
/// upkeep at most [`UPKEEP_LIMIT`].
pub(crate) fn spawn(
    store: DynStore,
    plan: PartitionPlan,
    archive: Option<Archive>,
    limit: Duration,
    cancel: CancellationToken,
) -> JoinHandle<()> {
    let every = plan
        .retention
        .map_or(plan.period, |window| window.min(plan.period))
        / 10;
    let every = every.clamp(Duration::from_secs(1), Duration::from_secs(300));
    let retention = plan
        .retention
        .map(|window| Arc::new(Retention::new(store.clone(), window, archive, limit)));
    periodic::spawn(every, cancel.clone(), move || {
        let (store, cancel, retention) = (store.clone(), cancel.clone(), retention.clone());
        async move {
            let round = store.keep_partitions(&plan);
            let round = match deadline::within(
                UPKEEP_LIMIT.max(limit),
                "keep the time partitions",
                round,
            )
            .await
            {
                Ok(round) => {
                    report(&round);
                    Some(round)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not keep the time partitions; trying again next round");
                    None
                }
            };
            if let Some(retention) = retention {
                retention.after_upkeep(round.as_ref(), &cancel).await;
            }
        }
    })
}

/// Logs and counts what a round of partition upkeep did and saw.
fn report(round: &PartitionRound) {
    if !round.partitioned {
        return;
    }
    if let Some(period) = round.opened {
        tracing::info!(period, "new messages now go to the next time partition");
    }
    if !round.dropped.is_empty() {
        tracing::info!(periods = ?round.dropped, "dropped time partitions past retention");
        metrics::counter!("trustmsg_partitions_dropped_total")
            .increment(round.dropped.len() as u64);
    }
    if !round.held.is_empty() {
        tracing::warn!(
            periods = ?round.held,
            "time partitions past retention are held by messages waiting for an operator \
             (PREPARED, VERIFY_FAILED, PENDING or SEND_FAILED); their finished rows are \
             deleted one by one until those are settled"
        );
    }
    metrics::counter!("trustmsg_message_keys_deleted_total").increment(round.keys_deleted);
    if round.led {
        metrics::gauge!("trustmsg_partitions_held").set(round.held.len() as f64);
    }
    metrics::gauge!("trustmsg_partitions").set(round.partitions as f64);
    if let Some(oldest) = round.oldest_opened_at {
        let age = (chrono::Utc::now() - oldest).num_milliseconds() as f64 / 1000.0;
        metrics::gauge!("trustmsg_oldest_partition_age_seconds").set(age.max(0.0));
    }
}

/// The row-by-row part of retention, and its state across rounds: whether
/// the current archive failure episode has raised its alert.
pub struct Retention {
    store: DynStore,
    window: Duration,
    archive: Option<Archive>,
    limit: Duration,
    alerted: AtomicBool,
}

/// Why a round stopped before it ran out of work.
#[derive(Debug)]
enum Stop {
    /// The database did not answer; logged.
    Database,
    /// The archive failed; logged, counted, alerted.
    Archive,
}

impl Retention {
    /// Retention of finished messages older than `window`, through
    /// `archive` when given; each statement within `limit`.
    pub fn new(
        store: DynStore,
        window: Duration,
        archive: Option<Archive>,
        limit: Duration,
    ) -> Self {
        Self {
            store,
            window,
            archive,
            limit,
            alerted: AtomicBool::new(false),
        }
    }

    /// What follows a round of partition upkeep (`round`, None when it
    /// failed). Without an archive: the row purge. With one: each partition
    /// the upkeep would drop but for its archive is archived, batch after
    /// batch, its progress recorded
    /// ([`crate::store::HousekeepingStore::mark_archived`]) so that the
    /// next upkeep drops it; then the finished messages of the partitions
    /// held by a waiting message are archived and deleted row by row (on a
    /// store without partitions, every finished message is).
    pub async fn after_upkeep(&self, round: Option<&PartitionRound>, cancel: &CancellationToken) {
        let Some(archive) = &self.archive else {
            return self.purge(cancel).await;
        };
        if let Some(round) = round {
            for range in &round.to_archive {
                if cancel.is_cancelled() || self.archive_partition(archive, range).await.is_err() {
                    return;
                }
            }
            if round.partitioned {
                for &period in &round.held {
                    if self
                        .through_archive(archive, period_ids(period), cancel)
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            } else if self
                .through_archive(archive, FinishedRange::ALL_IDS, cancel)
                .await
                .is_err()
            {
                return;
            }
        }
        self.purge_alerts(cancel).await;
    }

    /// Archives partition `range.period` from where its archive got to
    /// (nothing is deleted: the partition is dropped whole once archived).
    async fn archive_partition(&self, archive: &Archive, range: &ArchiveRange) -> Result<(), Stop> {
        let mut from = range.from;
        loop {
            // The whole partition goes: every finished message in it,
            // however recently changed (the upkeep found them all past the
            // window).
            let batch = self
                .read(FinishedRange {
                    ids: from..range.to,
                    older_than: Duration::ZERO,
                    limit: BATCH,
                    max_payload_bytes: ARCHIVE_BATCH_BYTES,
                })
                .await?;
            let through = match batch.last() {
                Some(last) => {
                    self.write(archive, &batch).await?;
                    last.message.id + 1
                }
                None => range.to,
            };
            let mark = self.store.mark_archived(range.period, through);
            deadline::within(self.limit, "record how far a partition is archived", mark)
                .await
                .map_err(|e| {
                    tracing::warn!(error = %e, "could not record how far a partition is archived; trying again next round");
                    Stop::Database
                })?;
            if through >= range.to {
                return Ok(());
            }
            from = through;
        }
    }

    /// The finished messages with ids in `ids` past the window, archived
    /// and deleted row by row, batch after batch.
    async fn through_archive(
        &self,
        archive: &Archive,
        ids: std::ops::Range<u64>,
        cancel: &CancellationToken,
    ) -> Result<(), Stop> {
        while !cancel.is_cancelled() {
            if self.archive_batch(archive, ids.clone()).await? == 0 {
                break;
            }
            tokio::time::sleep(PAUSE).await;
        }
        Ok(())
    }

    /// One round of the row path alone, over every id (a store without
    /// time partitions; the tests step it): batch after batch until none
    /// is left, an error, or shutdown.
    pub async fn round(&self, cancel: &CancellationToken) {
        match &self.archive {
            None => self.purge(cancel).await,
            Some(archive) => {
                while !cancel.is_cancelled() {
                    match self.archive_batch(archive, FinishedRange::ALL_IDS).await {
                        // Nothing left, or nothing of it could go (every
                        // message changed since it was read): next round.
                        Ok(0) => break,
                        Ok(_) => tokio::time::sleep(PAUSE).await,
                        Err(Stop::Database | Stop::Archive) => return,
                    }
                }
                self.purge_alerts(cancel).await;
            }
        }
    }

    /// Without an archive: deletes as the store's purge does.
    async fn purge(&self, cancel: &CancellationToken) {
        while !cancel.is_cancelled() {
            let batch = self.store.purge_finished(self.window, BATCH);
            match deadline::within(self.limit, "delete finished messages", batch).await {
                Ok(n) => {
                    deleted(n);
                    if n < u64::from(BATCH) {
                        break;
                    }
                    tokio::time::sleep(PAUSE).await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "retention could not delete; trying again next round");
                    break;
                }
            }
        }
    }

    /// With an archive, the settled alerts go on their own (the messages
    /// went through the archive).
    async fn purge_alerts(&self, cancel: &CancellationToken) {
        while !cancel.is_cancelled() {
            let batch = self.store.purge_settled_alerts(self.window, BATCH);
            match deadline::within(self.limit, "delete settled alerts", batch).await {
                Ok(n) => {
                    deleted(n);
                    if n < u64::from(BATCH) {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "retention could not delete alerts; trying again next round");
                    break;
                }
            }
        }
    }

    /// One batch of `ids` through the archive: read, written and checked,
    /// then deleted. Returns how many messages it deleted (a batch smaller
    /// than [`BATCH`] may still leave more: its payloads filled the byte
    /// budget).
    async fn archive_batch(
        &self,
        archive: &Archive,
        ids: std::ops::Range<u64>,
    ) -> Result<u64, Stop> {
        let batch = self
            .read(FinishedRange {
                ids,
                older_than: self.window,
                limit: BATCH,
                max_payload_bytes: ARCHIVE_BATCH_BYTES,
            })
            .await?;
        if batch.is_empty() {
            return Ok(0);
        }
        let written = self.write(archive, &batch).await?;
        let delete = self.store.delete_archived(&batch);
        let n = deadline::within(self.limit, "delete archived messages", delete)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, object = %written.object, "retention archived messages but could not delete them; they are archived (the same object) and deleted next round");
                Stop::Database
            })?;
        deleted(n);
        Ok(n)
    }

    /// A batch of finished messages, read within the statement deadline.
    async fn read(&self, range: FinishedRange) -> Result<Vec<FinishedMessage>, Stop> {
        let read = self.store.finished_messages(&range);
        deadline::within(self.limit, "read finished messages", read)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "retention could not read finished messages; trying again next round");
                Stop::Database
            })
    }

    /// `batch` (not empty) written to the archive and checked, counted; a
    /// failure is [`Retention::failed`]'s.
    async fn write(&self, archive: &Archive, batch: &[FinishedMessage]) -> Result<Written, Stop> {
        let written =
            match tokio::time::timeout(ARCHIVE_DEADLINE, archive.write_checked(batch)).await {
                Ok(Ok(written)) => written,
                Ok(Err(e)) => return Err(self.failed(archive, batch, e).await),
                Err(_) => {
                    let late = ArchiveError::TimedOut {
                        url: archive.url().to_string(),
                        secs: ARCHIVE_DEADLINE.as_secs(),
                    };
                    return Err(self.failed(archive, batch, late).await);
                }
            };
        metrics::counter!("trustmsg_archived_total").increment(written.messages as u64);
        self.alerted.store(false, Ordering::Relaxed);
        tracing::debug!(object = %written.object, messages = written.messages, bytes = written.bytes, first_id = batch[0].message.id, "archived finished messages");
        Ok(written)
    }

    /// An archive failure: nothing of `batch` is deleted; logged, counted,
    /// and alerted once per episode.
    async fn failed(&self, archive: &Archive, batch: &[FinishedMessage], e: ArchiveError) -> Stop {
        let held = &batch[0].message;
        metrics::counter!("trustmsg_archive_failures_total").increment(1);
        tracing::warn!(
            archive = archive.url(),
            error = %e,
            held = batch.len(),
            first_id = held.id,
            "the archive could not take finished messages: none deleted, trying again next round"
        );
        if !self.alerted.swap(true, Ordering::Relaxed) {
            let error = format!("{} ({e})", archive.url());
            let raise = self.store.raise_archive_failed(held, &error);
            if let Err(db) = deadline::within(self.limit, "raise the archive alert", raise).await {
                tracing::warn!(error = %db, "could not raise the archive_failed alert; trying again next round");
                self.alerted.store(false, Ordering::Relaxed);
            }
        }
        Stop::Archive
    }
}

/// Counts what a batch deleted.
fn deleted(n: u64) {
    metrics::counter!("trustmsg_retention_deleted_total").increment(n);
    if n > 0 {
        tracing::debug!(
            deleted = n,
            "retention deleted finished messages and settled alerts"
        );
    }
}
