//! The producers: tasks running the whole protocol with the SDK against all
//! instances (the steady load), and the bursts some faults need (messages
//! left for check-back, messages no check-back can decide).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use trustmsg_client::{Error, Message, MessageStatus, MessageView, Producer};

use crate::ledger::{Fate, Ledger, Local};
use crate::sql::Pool;

pub(crate) const TOPIC: &str = "chaos";
/// Producer tasks, and the pause each takes between messages.
const WORKERS: usize = 4;
const PACE: Duration = Duration::from_millis(40);

/// One producer's client for each instance: a producer behind a load
/// balancer reaches any of them.
#[derive(Clone)]
pub(crate) struct Clients(pub(crate) Vec<Producer>);

/// The producers, stoppable.
pub(crate) struct Load {
    stop: Arc<AtomicBool>,
    tasks: JoinSet<()>,
}

impl Load {
    /// Starts the producer tasks: the shop's messages, one in fifty of
    /// the producer whose check endpoint never answers usefully, and the
    /// outbox shop's rows in its own database (the local message table).
    pub(crate) fn start(
        shop: Clients,
        broken: Clients,
        outbox_shop: Pool,
        ledger: Arc<Ledger>,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let next = Arc::new(AtomicU64::new(0));
        let mut tasks = JoinSet::new();
        {
            let (stop, ledger) = (stop.clone(), ledger.clone());
            tasks.spawn(async move {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let key = format!("o-{n}");
                    let fate = outbox_row(&outbox_shop, &key, !n.is_multiple_of(5)).await;
                    ledger.record(&key, 0, fate);
                    tokio::time::sleep(PACE).await;
                }
            });
        }
        for _ in 0..WORKERS {
            let (shop, broken, ledger) = (shop.clone(), broken.clone(), ledger.clone());
            let (stop, next) = (stop.clone(), next.clone());
            tasks.spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n % 50 == 49 {
                        unverifiable(&broken, &format!("b-{n}"), n as usize, &ledger).await;
                    } else {
                        one_message(&shop, n, &ledger).await;
                    }
                    tokio::time::sleep(PACE).await;
                }
            });
        }
        Self { stop, tasks }
    }

    /// Lets each producer finish the message in hand, then stops them.
    pub(crate) async fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        while let Some(done) = self.tasks.join_next().await {
            done.expect("a producer task panicked");
        }
    }
}

pub(crate) fn payload(key: &str) -> String {
    format!("payload of {key}")
}

/// Calls `call` on instance after instance until one answers; a real
/// producer behind a load balancer does the same.
async fn answered<F, Fut>(clients: &Clients, first: usize, what: &str, mut call: F) -> MessageView
where
    F: FnMut(Producer) -> Fut,
    Fut: std::future::Future<Output = Result<MessageView, Error>>,
{
    let producers = &clients.0;
    let deadline = Instant::now() + Duration::from_secs(120);
    for i in first.. {
        match call(producers[i % producers.len()].clone()).await {
            Ok(v) => return v,
            Err(e) if e.is_unavailable() => {
                assert!(
                    Instant::now() < deadline,
                    "{what}: no instance answered for 120 s: {e}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
    unreachable!("the loop returns or panics")
}

/// Prepares `key` through instance `first` (or the next that answers).
async fn prepare(clients: &Clients, key: &str, first: usize) -> MessageView {
    let message = Message::new(key, TOPIC, payload(key)).key(key);
    answered(clients, first, key, |p| {
        let m = message.clone();
        async move { p.prepare(&m).await }
    })
    .await
}

/// One message of the shop: prepare, the local transaction, then commit,
/// rollback, or (the producer "crashes") nothing.
async fn one_message(shop: &Clients, n: u64, ledger: &Ledger) {
    let key = format!("k-{n}");
    let first = n as usize;
    match n % 20 {
        0..=11 => {
            let view = prepare(shop, &key, first).await;
            ledger.local_done(&key, Local::Committed);
            let v = answered(shop, first + 1, &key, |p| {
                let k = key.clone();
                async move { p.commit(&k).await }
            })
            .await;
            assert_eq!(v.status, MessageStatus::Committed, "{key}");
            ledger.record(&key, view.id, Fate::AckedCommit);
        }
        12..=16 => {
            let view = prepare(shop, &key, first).await;
            ledger.local_done(&key, Local::RolledBack);
            let v = answered(shop, first + 1, &key, |p| {
                let k = key.clone();
                async move { p.rollback(&k).await }
            })
            .await;
            assert_eq!(v.status, MessageStatus::RolledBack, "{key}");
            ledger.record(&key, view.id, Fate::AckedRollback);
        }
        _ => {
            let local = if n.is_multiple_of(2) {
                Local::Committed
            } else {
                Local::RolledBack
            };
            undecided(shop, &key, first, local, ledger).await;
        }
    }
}

/// A message whose producer "crashes" after its local transaction went
/// `local`: it never calls, so check-back must find out which way.
pub(crate) async fn undecided(
    clients: &Clients,
    key: &str,
    first: usize,
    local: Local,
    ledger: &Ledger,
) -> u64 {
    let view = prepare(clients, key, first).await;
    ledger.local_done(key, local);
    ledger.record(key, view.id, Fate::NeverDecided(local));
    view.id
}

/// How long a statement of the outbox shop may take before the writer
/// gives up on it (the database frozen under it).
const OUTBOX_STATEMENT: Duration = Duration::from_secs(5);

async fn outbox_row(pool: &Pool, key: &str, commit: bool) -> Fate {
    let message = Message::new(key, TOPIC, payload(key)).key(key);
    pool.outbox_transaction(&message, commit, OUTBOX_STATEMENT)
        .await
}

/// A message of the producer whose check endpoint never answers usefully:
/// prepared and never decided, it must end VERIFY_FAILED with its alert.
pub(crate) async fn unverifiable(
    broken: &Clients,
    key: &str,
    first: usize,
    ledger: &Ledger,
) -> u64 {
    let view = prepare(broken, key, first).await;
    ledger.record(key, view.id, Fate::Unverifiable);
    view.id
}
