//! Retries of submitted commits that came before their prepare: every
//! [`WAITING_RETRY`], and at once after this instance wrote prepares while
//! commits may be waiting. Any instance may retry any waiting commit (a
//! claim with a lease keeps two from taking the same one).

use std::sync::Arc;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::apply::{Ingest, WAITING_RETRY};

pub(super) async fn run(ingest: Arc<Ingest>, wake: Arc<Notify>, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(WAITING_RETRY) => {}
            () = wake.notified() => {}
        }
        ingest.retry_waiting().await;
    }
}
