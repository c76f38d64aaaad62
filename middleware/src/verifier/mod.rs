//! The verifier: check-back of PREPARED messages nobody decided.
//!
//! Every `--verify-interval` the worker claims due rows (`status = PREPARED AND
//! next_verify_at <= now`, by the database clock) with `FOR UPDATE SKIP
//! LOCKED`, bumping `version` and pushing each row's `next_verify_at` out by
//! its own lease: the call its producer may take (its `verify_timeout_ms`, at
//! most `--verify-timeout-max`; `--verify-timeout-max` when it is not
//! registered) plus `--verify-lease-margin` (5 s). Several instances therefore
//! split the due rows instead of checking one twice, and a crashed instance's
//! rows come back as soon as their calls could have ended plus the margin: a
//! producer with a 2 s timeout is checked again 7 s after the crash's last
//! claim at most, plus one interval for another instance to claim it, not after
//! a lease sized for the slowest producer anyone may register.
//!
//! How a claim is spent ([`claim`]): it is counted on this instance's clock
//! from just before it was asked for, so it runs out here first. A call starts
//! only while its claim outlasts it by half the margin: a claimed row may wait
//! for a free call slot during the first half, and every call leaves at least
//! the second half for the writes after it. The rule is checked again right
//! before the call with the registration as this instance reads it (its cache
//! may be behind a change another instance made); a row that no longer fits is
//! given back. So two calls for one message never overlap: the first is over
//! before its claim runs out, and nobody else can claim the row before that.
//!
//! The writes after a call (its record, and the decision, reschedule or
//! VERIFY_FAILED) are batched and take milliseconds; half the margin is what a
//! loaded database has for them. One that lands after the claim ran out is
//! not a loss either: a reschedule or VERIFY_FAILED then matches nothing
//! (whoever claimed the row next decides what follows), and a commit or
//! rollback answer is applied to the row as it is now if it is still PREPARED
//! (the producer's answer holds whoever asked), so a slow database delays an
//! answer but never drops it.
//!
//! A round claims at most what the free call slots can take. When it got all
//! it asked for (or there were no free slots), more may be due, so the next
//! round starts at once, or as soon as a call frees a slot, instead of one
//! interval later: a backlog is worked at the speed of the calls, not of the
//! poll tick.
//!
//! Each claimed row gets one check-back call ([`client`]), within two bounds:
//! `--verify-concurrency` calls in all, and a limit per producer that adapts
//! to how its endpoint answers ([`limit`]): it starts at
//! [`INITIAL_PER_PRODUCER`], grows while answers come quickly, halves on
//! timeouts, failed connections, 429 and 5xx, and never exceeds
//! `--verify-concurrency-per-producer`. A claimed row whose producer is at
//! its limit waits in this instance's queue for that producer (at most the
//! producer's limit of rows) and starts when one of its calls ends, as long as
//! its own claim still outlasts its call as above; the rest are given back in one statement
//! (due again next round, no attempt counted). Queued rows count against the
//! claim's size, so what one round claims is what the free call slots can
//! start soon, and rounds do not wait for slow calls: one slow producer
//! cannot hold up the others.
//!
//! What an answer does:
//! - `commit` / `rollback`: the row goes from PREPARED to the answer,
//!   guarded by the claim's version (or the row's current one, see above), counted as an attempt and audited as
//!   `verifier`; a commit claims the send and is handed to this instance's
//!   forwarder (the fast path). The call records and the decisions of calls
//!   that finish together are written in batches ([`writes`]);
//! - `unknown` or a failed call (timeout, non-2xx, redirect, garbage): the
//!   attempt is counted, its reason stored in `last_error`, and the next check
//!   scheduled after an exponential backoff with ±20 % jitter;
//! - at the producer's attempt limit: VERIFY_FAILED and one alert (only from
//!   the instance whose guarded UPDATE won). Nothing is decided by default.
//!
//! A due row the store cannot read is quarantined by the claim (see
//! [`crate::store`]) and alerted once (`quarantined`); it is never checked
//! back, and the rest of the round goes ahead.
//!
//! Where it lives: this file holds the settings, the outcomes and the
//! [`Verifier`] itself; `rounds.rs` its loop (claim, start or queue, drain on
//! shutdown); [`claim`] how long a claimed row is held; `queue.rs` the rows
//! waiting for their producer's free slot; `check.rs` what one call does to its row; [`client`] the call, [`limit`]
//! the per-producer limits and [`writes`] the batched writes after a call.

mod check;
mod claim;
mod client;
mod limit;
mod queue;
mod rounds;
mod writes;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};

use crate::backoff::Backoff;
use crate::handoff::CommitListener;
use crate::net::address_policy::AddressPolicy;
use crate::registry::Registry;
use crate::store::{DynStore, VerifyLease};
use client::CheckClient;
use limit::ProducerLimits;
use queue::Queue;
use writes::Writes;

pub use rounds::BatchReport;

/// Check-back calls a producer gets at once before its endpoint has shown how
/// fast it answers.
pub const INITIAL_PER_PRODUCER: usize = 8;

/// The verifier's settings (from `--verify-*` and friends).
#[derive(Debug, Clone)]
pub struct VerifierConfig {
    /// Poll period.
    pub interval: Duration,
    /// Rows claimed per round at most.
    pub batch: u32,
    /// How long a claim lasts: each row's call (its producer's timeout, at
    /// most `--verify-timeout-max`, whatever a registration says) plus
    /// `--verify-lease-margin`.
    pub lease: VerifyLease,
    /// Calls in flight in all.
    pub concurrency: usize,
    /// Calls in flight to one producer at most; each producer's limit starts
    /// at [`INITIAL_PER_PRODUCER`] (or this, when lower) and adapts.
    pub concurrency_per_producer: usize,
    /// Delays between attempts.
    pub backoff: Backoff,
    /// Attempt limit for a message whose producer is no longer registered.
    pub default_max_attempts: u32,
    /// The send claim a commit takes for this instance's forwarder (zero
    /// without one: due at once for any other).
    pub send_lease: Duration,
    /// How long in-flight calls may finish on shutdown.
    pub shutdown_grace: Duration,
    /// The longest one database statement may take (see [`crate::store::deadline`]).
    pub statement_timeout: Duration,
}

/// What one claimed row came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The producer answered commit and this call committed it.
    Committed,
    /// The producer answered rollback and this call rolled it back.
    RolledBack,
    /// No decision; the next check is scheduled.
    Rescheduled,
    /// The attempt limit was reached: VERIFY_FAILED and an alert.
    VerifyFailed,
    /// Given back without a call: its producer was at its concurrency limit
    /// with a full queue, or its claim ran too short while it waited.
    Released,
    /// Someone else changed the row first; nothing written.
    Lost,
    /// A store error; the row comes back after its lease.
    Error,
}

/// The check-back worker; cheap to clone (clones share limits and client).
#[derive(Clone)]
pub struct Verifier {
    inner: Arc<Inner>,
}

struct Inner {
    store: DynStore,
    registry: Registry,
    client: CheckClient,
    commits: Arc<dyn CommitListener>,
    cfg: VerifierConfig,
    slots: Arc<Semaphore>,
    limits: Arc<ProducerLimits>,
    writes: Writes,
    queue: Mutex<Queue>,
    wake: Notify,
}

impl Verifier {
    /// A verifier over `store`, calling producers as `policy` allows.
    pub fn new(
        store: DynStore,
        registry: Registry,
        policy: Arc<AddressPolicy>,
        commits: Arc<dyn CommitListener>,
        cfg: VerifierConfig,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                registry,
                client: CheckClient::new(policy),
                commits,
                slots: Arc::new(Semaphore::new(cfg.concurrency)),
                limits: ProducerLimits::new(INITIAL_PER_PRODUCER, cfg.concurrency_per_producer),
                writes: Writes::start(store.clone(), cfg.concurrency, cfg.statement_timeout),
                queue: Mutex::new(Queue::default()),
                store,
                wake: Notify::new(),
                cfg,
            }),
        }
    }

    /// Asks for a round now instead of at the next tick.
    pub fn wake(&self) {
        self.inner.wake.notify_one();
    }
}
