//! Which background workers are still running, for `/readyz`.
//!
//! A worker (forwarder, verifier, overdue watch, backlog) that ends before
//! the service shuts down, by a panic or a bug, leaves an instance that
//! answers the API but never sends or checks back: it must stop being
//! "ready" so that the orchestrator replaces it and the operator is told.
//!
//! A worker may also say it is still starting ([`Liveness::starting`]):
//! the exactly-once forwarder is not ready until its predecessor is fenced
//! and its claims are taken back, so that a rolling restart waits for it.

use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The workers that stopped while the service was running; cheap to clone.
#[derive(Debug, Clone, Default)]
pub(crate) struct Liveness {
    dead: Arc<Mutex<Vec<&'static str>>>,
    starting: Arc<Mutex<Vec<&'static str>>>,
}

/// A worker that is starting, until [`Starting::ready`] (or its drop).
#[derive(Debug)]
pub(crate) struct Starting {
    starting: Arc<Mutex<Vec<&'static str>>>,
    name: &'static str,
}

impl Starting {
    /// The worker has started: no longer keeps `/readyz` failing.
    pub(crate) fn ready(self) {}
}

impl Drop for Starting {
    fn drop(&mut self) {
        let mut starting = self.starting.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = starting.iter().position(|n| *n == self.name) {
            starting.remove(at);
        }
    }
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

    /// `name` is starting: `/readyz` fails until the returned handle says it
    /// is ready (or is dropped: a worker that ends is the watch's business).
    pub(crate) fn starting(&self, name: &'static str) -> Starting {
        self.starting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(name);
        Starting {
            starting: self.starting.clone(),
            name,
        }
    }

    /// The workers still starting.
    pub(crate) fn still_starting(&self) -> Vec<&'static str> {
        self.starting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
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

    #[test]
    fn a_starting_worker_is_named_until_it_says_it_is_ready() {
        let live = Liveness::default();
        let forwarder = live.starting("forwarder");
        let other = live.starting("verifier");
        assert_eq!(live.still_starting(), ["forwarder", "verifier"]);
        forwarder.ready();
        assert_eq!(live.still_starting(), ["verifier"]);
        drop(other);
        assert!(live.still_starting().is_empty());
    }
}
