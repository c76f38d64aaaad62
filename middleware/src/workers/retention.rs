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

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::store::{deadline, DynStore};
use crate::workers::periodic;

/// Messages deleted per transaction.
const BATCH: u32 = 500;
/// The pause between two batches of one round.
const PAUSE: Duration = Duration::from_millis(50);

/// Starts retention when `window` is set; it ends on `cancel`. Each batch
/// takes at most `limit` (see [`crate::store::deadline`]).
pub(crate) fn spawn(
    store: DynStore,
    window: Option<Duration>,
    limit: Duration,
    cancel: CancellationToken,
) -> Option<JoinHandle<()>> {
    let window = window?;
    let every = (window / 10).clamp(Duration::from_secs(1), Duration::from_secs(300));
    Some(periodic::spawn(every, cancel.clone(), move || {
        let (store, cancel) = (store.clone(), cancel.clone());
        async move { purge(&store, window, limit, &cancel).await }
    }))
}

/// One round: batch after batch until less than a batch was left, an error,
/// or shutdown.
async fn purge(store: &DynStore, window: Duration, limit: Duration, cancel: &CancellationToken) {
    while !cancel.is_cancelled() {
        let batch = store.purge_finished(window, BATCH);
        match deadline::within(limit, "delete finished messages", batch).await {
            Ok(n) => {
                metrics::counter!("trustmsg_retention_deleted_total").increment(n);
                if n > 0 {
                    tracing::debug!(
                        deleted = n,
                        "retention deleted finished messages and settled alerts"
                    );
                }
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
