//! The move of long contents out of message rows written before migration
//! 0018 (issue 42; `store/sql/content.rs` says why a long content is kept
//! apart). The migration itself only adds a table and a column, at once
//! whatever the size of `messages`; the rows already there are moved here,
//! in the background, on every instance, while the service runs. Until a
//! row is moved its content is read from the row, as before: only its
//! state changes still cost what they did.
//!
//! The move walks the rows in id order from where the last chunk stopped
//! (the place is in the database, so a restart or another instance carries
//! on from it); each chunk is one short transaction, and two instances'
//! chunks take turns on the place's row lock. The chunk's size adapts so a
//! chunk takes about [`TARGET`]: doubled while a chunk takes less than half
//! of it, halved when one takes longer, and halved again when one misses
//! its deadline. So its locks are held briefly whatever the payloads and
//! the machine, and a large table is walked in big chunks where there is
//! little to move. Once a walk finds no row left the task ends, on every
//! instance (`trustmsg_payloads_moved_total` counts the rows moved).

use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::store::{deadline, DynStore};

/// Rows the first chunk walks.
const FIRST: u32 = 200;
/// Rows a chunk walks at most.
const MOST: u32 = 20_000;
/// How long a chunk should take.
const TARGET: Duration = Duration::from_millis(250);
/// The pause between two chunks, so the move takes a share of the database.
const PAUSE: Duration = Duration::from_millis(20);
/// The wait after a chunk that failed.
const RETRY: Duration = Duration::from_secs(5);

/// Starts the move; it ends once nothing is left to move, or on `cancel`.
/// Each chunk takes at most `limit` (see [`crate::store::deadline`]).
pub(crate) fn spawn(store: DynStore, limit: Duration, cancel: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(async move { run(&store, limit, &cancel).await })
}

/// Chunk after chunk until the walk is over or `cancel`.
async fn run(store: &DynStore, limit: Duration, cancel: &CancellationToken) {
    let (started, mut size) = (Instant::now(), FIRST);
    let (mut walked, mut moved) = (0u64, 0u64);
    while !cancel.is_cancelled() {
        let began = Instant::now();
        let wait = match deadline::race(limit, "move payloads", store.move_payloads(size)).await {
            Ok(Ok(chunk)) => {
                walked += chunk.walked;
                moved += chunk.moved;
                metrics::counter!("trustmsg_payloads_moved_total").increment(chunk.moved);
                if chunk.finished {
                    if walked > 0 {
                        tracing::info!(walked, moved, took = ?started.elapsed(), "moved the long contents of the rows written before migration 0018 out of their rows");
                    }
                    return;
                }
                size = next_size(size, began.elapsed());
                PAUSE
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "could not move payloads; trying again in {RETRY:?}");
                RETRY
            }
            Err(deadline::Missed(e)) => {
                size = (size / 2).max(1);
                tracing::warn!(error = %e, rows = size, "a chunk of the payload move missed its deadline; trying a smaller one");
                RETRY
            }
        };
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// The rows the next chunk walks, after one of `size` rows took `took`.
fn next_size(size: u32, took: Duration) -> u32 {
    if took < TARGET / 2 {
        size.saturating_mul(2).min(MOST)
    } else if took > TARGET {
        (size / 2).max(1)
    } else {
        size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_grows_while_quick_and_shrinks_while_slow_within_its_bounds() {
        assert_eq!(next_size(200, Duration::from_millis(10)), 400);
        assert_eq!(next_size(MOST, Duration::from_millis(10)), MOST);
        assert_eq!(next_size(200, Duration::from_millis(200)), 200);
        assert_eq!(next_size(200, Duration::from_millis(900)), 100);
        assert_eq!(next_size(1, Duration::from_secs(3)), 1);
    }
}
