//! Commits the fast path could not take, made due at once.
//!
//! A commit claims its send for this instance's forwarder (`next_send_at` =
//! now + `--send-lease`) and hands the row over through a bounded channel.
//! When that channel is full (a burst beyond what the forwarder has room
//! for) or closed (the forwarder stopping), nobody here will send the row,
//! yet the claim keeps every sweeper off it for the whole lease. The
//! [`Releaser`] gives such claims back: one guarded UPDATE
//! ([`crate::store::SendStore::release_sends`]) per batch of whatever has
//! gathered meanwhile, so a burst costs a statement, not one per row. A
//! claim that changed meanwhile matches nothing; a release that fails (the
//! database away) leaves the row to its lease, as before.

use tokio::sync::mpsc;

use crate::store::{DynStore, Message};

/// Most claims given back by one statement.
const BATCH: usize = 1000;

/// Hands claims to the releasing task; cheap to clone. The task ends when
/// the last clone is dropped.
#[derive(Debug, Clone)]
pub(crate) struct Releaser {
    tx: mpsc::UnboundedSender<(u64, u64)>,
}

impl Releaser {
    /// Starts the task that releases through `store`.
    pub(crate) fn start(store: DynStore) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(store, rx));
        Self { tx }
    }

    /// Makes `m`, claimed by its commit and not taken by the fast path,
    /// due at once.
    pub(crate) fn release(&self, m: &Message) {
        // Fails only once the task is gone (the runtime shutting down): the
        // row then waits for its lease.
        let _ = self.tx.send((m.id, m.version));
    }
}

async fn run(store: DynStore, mut rx: mpsc::UnboundedReceiver<(u64, u64)>) {
    let mut claims = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut claims, BATCH).await > 0 {
        match store.release_sends(&claims).await {
            Ok(released) => {
                metrics::counter!("trustmsg_forwarder_released_total").increment(released);
                tracing::debug!(
                    released,
                    claims = claims.len(),
                    "commits the fast path could not take are due at once"
                );
            }
            Err(e) => tracing::warn!(
                error = %e,
                claims = claims.len(),
                "could not release commits the fast path could not take; they are sent after their lease"
            ),
        }
        claims.clear();
    }
}
