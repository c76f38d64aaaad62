//! Which background workers are still running, for `/readyz`.
//!
//! A worker (forwarder, verifier, overdue watch, backlog) that ends before
//! the service shuts down, by a panic or a bug, leaves an instance that
//! answers the API but never sends or checks back: it must stop being
//! "ready" so that the orchestrator replaces it and the operator is told.

use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The workers that stopped while the service was running; cheap to clone.
#[derive(Debug, Clone, Default)]
pub(crate) struct Liveness {
    dead: Arc<Mutex<Vec<&'static str>>>,
}

impl Liveness {
    /// Watches `task` (the worker called `name`): if it ends before
    /// `shutdown` is cancelled, it is dead. Returns a handle that ends with it.
    pub(crate) fn watch(
        &self,
        name: &'static str,
        task: JoinHandle<()>,
        shutdown: CancellationToken,
    ) -> JoinHandle<()> {
        let dead = self.dead.clone();
        tokio::spawn(async move {
            let ended = task.await;
            if !shutdown.is_cancelled() {
                tracing::error!(
                    worker = name,
                    ?ended,
                    "a worker stopped while the service runs; /readyz now fails"
                );
                dead.lock().unwrap_or_else(|p| p.into_inner()).push(name);
            }
        })
    }

    /// The workers that stopped, in the order they did.
    pub(crate) fn dead(&self) -> Vec<&'static str> {
        self.dead.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_worker_that_ends_while_the_service_runs_is_dead_and_one_stopped_by_shutdown_is_not()
    {
        let live = Liveness::default();
        let shutdown = CancellationToken::new();
        let crashed = live.watch(
            "forwarder",
            tokio::spawn(async { panic!("a bug") }),
            shutdown.clone(),
        );
        crashed.await.unwrap();
        assert_eq!(live.dead(), ["forwarder"]);

        let stop = shutdown.clone();
        let orderly = live.watch(
            "verifier",
            tokio::spawn(async move { stop.cancelled().await }),
            shutdown.clone(),
        );
        shutdown.cancel();
        orderly.await.unwrap();
        assert_eq!(live.dead(), ["forwarder"], "stopped by shutdown: not dead");
    }
}
