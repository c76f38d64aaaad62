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

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::store::{deadline, DynStore, PartitionPlan, PartitionRound};
use crate::workers::periodic;

/// Messages deleted per transaction.
const BATCH: u32 = 500;
/// The pause between two batches of one round.
const PAUSE: Duration = Duration::from_millis(50);

/// What a round of partition upkeep may take at most: it drops whole
/// partitions and deletes a round's share of their keys.
const UPKEEP_LIMIT: Duration = Duration::from_secs(60);

/// Starts the worker; it ends on `cancel`. Each batch of the row purge
/// takes at most `limit` (see [`crate::store::deadline`]); a partition
/// upkeep at most [`UPKEEP_LIMIT`].
pub(crate) fn spawn(
    store: DynStore,
    plan: PartitionPlan,
    limit: Duration,
    cancel: CancellationToken,
) -> JoinHandle<()> {
    let every = plan
        .retention
        .map_or(plan.period, |window| window.min(plan.period))
        / 10;
    let every = every.clamp(Duration::from_secs(1), Duration::from_secs(300));
    periodic::spawn(every, cancel.clone(), move || {
        let (store, cancel) = (store.clone(), cancel.clone());
        async move {
            let upkeep = store.keep_partitions(&plan);
            match deadline::within(UPKEEP_LIMIT.max(limit), "keep the time partitions", upkeep)
                .await
            {
                Ok(round) => report(&round),
                Err(e) => {
                    tracing::warn!(error = %e, "could not keep the time partitions; trying again next round")
                }
            }
            if let Some(window) = plan.retention {
                purge(&store, window, limit, &cancel).await;
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

/// The row-by-row part of a round: batch after batch until less than a
/// batch was left, an error, or shutdown.
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
