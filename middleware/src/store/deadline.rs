//! Deadlines for the background workers' statements, and what happens to the
//! connection a statement past its deadline leaves behind.
//!
//! The API bounds every request (`--request-timeout`); the workers (the
//! forwarder's claims, SENT marks and reschedules, the verifier's claims and
//! batched writes, the overdue watch, the backlog, retention, the alert
//! delivery) get the same
//! bound per statement through [`within`]: a database that stops answering
//! (frozen, or a network that drops packets) would otherwise hold a worker
//! until TCP gives up, and with it every send or check-back behind it. Past
//! the deadline the statement counts as [`StoreError::Unavailable`], which
//! every worker already treats as "retry on the next round".
//!
//! The connection the abandoned statement was using may never answer again;
//! sqlx would test it with a ping before putting it back in the pool, and
//! that ping waits behind the lost statement. So for a moment after any
//! deadline passed ([`DISCARD_WINDOW`]) the pool closes every connection
//! handed back to it instead of reusing it ([`reuse_released`]): which of them
//! was stuck is not known to the pool, and a fresh connection costs only a
//! handshake.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::{StoreError, StoreResult};

/// How long after a statement was abandoned released connections are closed
/// rather than reused: the abandoned statement's connection is released at
/// once, so a short window catches it.
const DISCARD_WINDOW: Duration = Duration::from_secs(2);

/// When a statement was last abandoned, in milliseconds since [`epoch`] plus
/// one (0: never).
static LAST_ABANDONED: AtomicU64 = AtomicU64::new(0);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    epoch().elapsed().as_millis() as u64 + 1
}

/// Runs one worker statement, giving up after `limit`. `what` names it in the
/// error.
pub(crate) async fn within<T>(
    limit: Duration,
    what: &str,
    statement: impl Future<Output = StoreResult<T>>,
) -> StoreResult<T> {
    race(limit, what, statement)
        .await
        .unwrap_or_else(|Missed(e)| Err(e))
}

/// A statement that got no answer within its deadline ([`race`]); the
/// error it counts as is [`StoreError::Unavailable`].
#[derive(Debug)]
pub(crate) struct Missed(pub(crate) StoreError);

/// [`within`], telling a statement cut off at its deadline (`Err`) from one
/// that answered, well or not (`Ok`): a caller may then make its statement
/// smaller rather than try the same one again.
pub(crate) async fn race<T>(
    limit: Duration,
    what: &str,
    statement: impl Future<Output = StoreResult<T>>,
) -> Result<StoreResult<T>, Missed> {
    let statement = std::pin::pin!(statement);
    tokio::select! {
        done = statement => Ok(done),
        _ = tokio::time::sleep(limit) => {
            // Before the statement (and its connection) is dropped, so the
            // pool sees the mark when the connection comes back.
            LAST_ABANDONED.store(now_ms(), Ordering::SeqCst);
            metrics::counter!("trustmsg_worker_statement_timeouts_total").increment(1);
            Err(Missed(StoreError::Unavailable(format!(
                "{what}: no answer from the database within {limit:?}"
            ))))
        }
    }
}

/// Whether the pool may keep a connection handed back now: not within
/// [`DISCARD_WINDOW`] of an abandoned statement.
pub(crate) fn reuse_released() -> bool {
    let last = LAST_ABANDONED.load(Ordering::SeqCst);
    last == 0 || now_ms().saturating_sub(last) > DISCARD_WINDOW.as_millis() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_statement_past_its_deadline_is_unavailable_and_stops_reuse_for_a_moment() {
        let r: StoreResult<()> = within(Duration::from_millis(20), "claim", async {
            std::future::pending().await
        })
        .await;
        let why = r.unwrap_err().to_string();
        assert!(
            why.contains("claim: no answer from the database within 20ms"),
            "{why}"
        );
        assert!(!reuse_released());
        let ok = within(Duration::from_secs(5), "claim", async { Ok(7) }).await;
        assert_eq!(ok.unwrap(), 7);
    }
}
