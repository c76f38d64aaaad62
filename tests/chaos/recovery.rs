//! Time to full recovery after each fault.
//!
//! The clock starts at the fault's **end** (the instance restarted and
//! ready, the process or database thawed, the brokers or the webhook back,
//! the endpoint answering again), not at its injection: how long a fault
//! lasts is the rig's choice, how long the world stays broken once every
//! part is whole again is trustmsg's. A fault the other instances should
//! ride out (a kill -9) may show 0: it had recovered before it ended.
//!
//! Full recovery is the first moment when all of these hold:
//! - every message its producer had finished with by the fault's end is at
//!   its end: read from Kafka if it must be delivered (or acknowledged by a
//!   broker that then lost it, see `BrokerLosesState`), ROLLED_BACK if it
//!   was rolled back locally and left to check-back, VERIFY_FAILED if no
//!   check-back can decide it;
//! - every alert owed by then (each entry of those messages into
//!   VERIFY_FAILED or SEND_FAILED) has reached the webhook;
//! - the backlog (sends due for more than a second, PREPARED rows whose
//!   check-back is more than a second overdue) is down to its level just
//!   before the fault.
//!
//! The first two include the normal pace of the protocol: a message left
//! undecided just before the fault's end waits for its first check-back
//! (1 s for the shop) like any other, so even a harmless fault measures
//! about that.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use crate::alerts::{self, Delivered, Failure};
use crate::ledger::{Fate, Ledger, Local};
use crate::rig::{Fault, Rig};
use crate::sql::Pool;

/// How long a cycle waits for recovery before it is counted as not
/// recovered (and the campaign fails): far beyond every goal, far below
/// the 3 min a global check-back lease used to cost.
pub(crate) const CAP: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(100);
/// One query of the measurement: past it, the poll counts as not yet.
const QUERY_DEADLINE: Duration = Duration::from_secs(5);

/// The rig's view of the database; the messages it has seen
/// at their end, and the alerts it has found owed, so each poll checks
/// only the rest. What one cycle gave up on is not carried into the next
/// (it is that cycle's failure, and the final verdict's): each figure
/// belongs to one fault.
pub(crate) struct Recovery {
    pool: Pool,
    done: HashSet<u64>,
    given_up: HashSet<Failure>,
    /// Per fault kind, each cycle's time to recovery (None: not within CAP).
    pub(crate) times: BTreeMap<Fault, Vec<Option<Duration>>>,
}

impl Recovery {
    pub(crate) fn new(pool: Pool) -> Self {
        Self {
            pool,
            done: HashSet::new(),
            given_up: HashSet::new(),
            times: BTreeMap::new(),
        }
    }

    /// Sends due for more than a second plus PREPARED rows more than a
    /// second past their check-back (rows claimed by an instance are not
    /// due: those are caught by the messages that must reach their end).
    pub(crate) async fn backlog(&self) -> Option<i64> {
        let q = self.pool.backlog();
        tokio::time::timeout(QUERY_DEADLINE, q).await.ok()?.ok()
    }

    /// Waits (at most [`CAP`]) until the campaign has fully recovered from
    /// the fault that just ended, with `backlog` the level before it;
    /// records and returns how long that took.
    pub(crate) async fn wait(
        &mut self,
        fault: Fault,
        rig: &mut Rig,
        ledger: &Ledger,
        backlog: i64,
    ) -> Option<Duration> {
        let end = Instant::now();
        let finished = ledger.messages();
        let up_to = finished.values().map(|(id, _)| *id).max().unwrap_or(0);
        let mut pending: Vec<(u64, Fate)> = finished
            .into_values()
            .filter(|(id, fate)| !fate.is_outbox() && !self.done.contains(id))
            .collect();
        let took = loop {
            if self.recovered(rig, &mut pending, up_to, backlog).await {
                break Some(end.elapsed());
            }
            if end.elapsed() > CAP {
                self.done.extend(pending.iter().map(|(id, _)| *id));
                if let Ok(Ok(owed)) =
                    tokio::time::timeout(QUERY_DEADLINE, alerts::owed(&self.pool, up_to)).await
                {
                    self.given_up.extend(owed.into_keys());
                }
                eprintln!(
                    "chaos: {fault:?} not recovered after {CAP:?}: {} messages not at their end, e.g. {:?}",
                    pending.len(),
                    &pending[..pending.len().min(5)]
                );
                break None;
            }
            tokio::time::sleep(POLL).await;
        };
        self.times.entry(fault).or_default().push(took);
        took
    }

    async fn recovered(
        &mut self,
        rig: &mut Rig,
        pending: &mut Vec<(u64, Fate)>,
        up_to: u64,
        backlog: i64,
    ) -> bool {
        let consumed = rig.delivered_ids();
        let ended = self.at_their_end(pending).await.unwrap_or_default();
        pending.retain(|(id, fate)| {
            let end = if fate.must_deliver() {
                consumed.contains(id)
            } else {
                ended.contains(id)
            };
            if end {
                self.done.insert(*id);
            }
            !end
        });
        if !pending.is_empty() {
            return false;
        }
        let owed = tokio::time::timeout(QUERY_DEADLINE, alerts::owed(&self.pool, up_to)).await;
        let Ok(Ok(mut owed)) = owed else {
            return false;
        };
        owed.retain(|f, _| !self.given_up.contains(f));
        if !Delivered::sort(&rig.alerts.alerts()).covers(&owed) {
            return false;
        }
        self.backlog().await.is_some_and(|now| now <= backlog)
    }

    /// Of the messages that need not reach Kafka, those whose row is at the
    /// end its fate calls for.
    async fn at_their_end(&self, pending: &[(u64, Fate)]) -> sqlx::Result<HashSet<u64>> {
        let mut ended = HashSet::new();
        let mut ask = Vec::new();
        for (id, fate) in pending {
            match fate {
                Fate::AckedRollback => {
                    ended.insert(*id);
                }
                Fate::NeverDecided(Local::RolledBack) | Fate::Unverifiable => ask.push(*id),
                _ => {}
            }
        }
        if ask.is_empty() {
            return Ok(ended);
        }
        let rows = tokio::time::timeout(QUERY_DEADLINE, self.pool.statuses(&ask))
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)??;
        let expected: std::collections::HashMap<u64, &str> = pending
            .iter()
            .map(|(id, fate)| {
                (
                    *id,
                    if *fate == Fate::Unverifiable {
                        "VERIFY_FAILED"
                    } else {
                        "ROLLED_BACK"
                    },
                )
            })
            .collect();
        ended.extend(
            rows.into_iter()
                .filter(|(id, status)| expected.get(id) == Some(&status.as_str()))
                .map(|(id, _)| id),
        );
        Ok(ended)
    }
}
