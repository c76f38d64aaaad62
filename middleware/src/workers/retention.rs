//! Retention (`--retention`, off when 0): finished messages — SENT, or
//! ROLLED_BACK (tombstones included) — unchanged for longer than the window
//! are deleted with their audit, check-attempt and consumption-ledger rows. Nothing an operator
//! may still need (PREPARED, VERIFY_FAILED, PENDING, SEND_FAILED) is ever
//! deleted. Settled alerts (delivered, or without a webhook) unchanged for
//! the window go in the same transactions; a pending alert never does.
//!
//! Deletion goes in batches of [`BATCH`] messages, each in its own short
//! transaction, with a pause between batches, so a large first clean-up
//! never holds locks for long nor starves the API. Every instance may run
//! it; two deleting the same rows at once only find less to delete.
//! Deletions (messages and alerts) are counted in
//! `trustmsg_retention_deleted_total`.
//!
//! With an archive (`--archive`), each batch is first read with everything
//! that hangs off it, written to the archive and read back
//! ([`Archive::write_checked`]); only then are exactly those messages
//! deleted, each only if unchanged since it was read
//! ([`crate::store::HousekeepingStore::delete_archived`]). An archive that
//! fails holds the deletion: nothing is deleted, the failure is logged and
//! counted (`trustmsg_archive_failures_total`), the round ends and the next
//! one tries again. One `archive_failed` alert is raised per episode: at
//! the first failure, and again only after an archive write has succeeded
//! in between. Archived messages are counted in `trustmsg_archived_total`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::archive::{Archive, ArchiveError};
use crate::store::{deadline, DynStore, FinishedMessage, FinishedRange};
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

/// Starts retention when `window` is set; it ends on `cancel`. Each batch
/// takes at most `limit` (see [`crate::store::deadline`]).
pub(crate) fn spawn(
    store: DynStore,
    window: Option<Duration>,
    archive: Option<Archive>,
    limit: Duration,
    cancel: CancellationToken,
) -> Option<JoinHandle<()>> {
    let window = window?;
    let every = (window / 10).clamp(Duration::from_secs(1), Duration::from_secs(300));
    let retention = Arc::new(Retention::new(store, window, archive, limit));
    Some(periodic::spawn(every, cancel.clone(), move || {
        let (retention, cancel) = (retention.clone(), cancel.clone());
        async move { retention.round(&cancel).await }
    }))
}

/// Retention's state across rounds: whether the current archive failure
/// episode has raised its alert.
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

    /// One round: batch after batch until less than a batch was left, an
    /// error, or shutdown.
    pub async fn round(&self, cancel: &CancellationToken) {
        match &self.archive {
            None => self.purge(cancel).await,
            Some(archive) => {
                while !cancel.is_cancelled() {
                    match self.archive_batch(archive).await {
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

    /// One batch through the archive: read, written and checked, then
    /// deleted. Returns how many messages it deleted (a batch smaller than
    /// [`BATCH`] may still leave more: its payloads filled the byte budget).
    async fn archive_batch(&self, archive: &Archive) -> Result<u64, Stop> {
        let range = FinishedRange {
            ids: FinishedRange::ALL_IDS,
            older_than: self.window,
            limit: BATCH,
            max_payload_bytes: ARCHIVE_BATCH_BYTES,
        };
        let read = self.store.finished_messages(&range);
        let batch = deadline::within(self.limit, "read finished messages", read)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "retention could not read finished messages; trying again next round");
                Stop::Database
            })?;
        let Some(first) = batch.first() else {
            return Ok(0);
        };
        let written =
            match tokio::time::timeout(ARCHIVE_DEADLINE, archive.write_checked(&batch)).await {
                Ok(Ok(written)) => written,
                Ok(Err(e)) => return Err(self.failed(archive, &batch, e).await),
                Err(_) => {
                    let late = ArchiveError::TimedOut {
                        url: archive.url().to_string(),
                        secs: ARCHIVE_DEADLINE.as_secs(),
                    };
                    return Err(self.failed(archive, &batch, late).await);
                }
            };
        metrics::counter!("trustmsg_archived_total").increment(written.messages as u64);
        self.alerted.store(false, Ordering::Relaxed);
        tracing::debug!(object = %written.object, messages = written.messages, bytes = written.bytes, first_id = first.message.id, "archived finished messages");
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
