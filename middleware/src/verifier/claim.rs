//! A claimed row and how long this instance holds it, on its own clock.
//!
//! The store says when each row's claim runs out by the database clock (the
//! row's `next_verify_at`) and when the claim was taken
//! ([`crate::store::Claimed::claimed_at`]); the difference is the row's own lease, its
//! producer's call plus the margin. Counted from just before the claim was
//! asked for, on this instance's monotonic clock, it runs out here no later
//! than in the database, so a call this instance lets start is over before
//! any other instance can claim the row.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::store::{Message, VerifyLease};

/// One claimed row.
#[derive(Debug)]
pub(super) struct Claim {
    pub(super) message: Message,
    /// When the claim runs out, on this instance's clock.
    until: Instant,
    /// The call the claim was sized for (its lease less the margin).
    covers: Duration,
}

impl Claim {
    /// The rows a claim asked for at `asked` with `lease` took at `at` (the
    /// database clock).
    pub(super) fn all(
        claimed: Vec<Message>,
        at: Option<DateTime<Utc>>,
        asked: Instant,
        lease: &VerifyLease,
    ) -> Vec<Claim> {
        claimed
            .into_iter()
            .map(|message| {
                // A row without both times cannot say how long it is held:
                // it is treated as held no more, and given back.
                let held = at
                    .zip(message.next_verify_at)
                    .and_then(|(at, until)| (until - at).to_std().ok())
                    .unwrap_or_default();
                Claim {
                    until: asked + held,
                    covers: held.saturating_sub(lease.margin),
                    message,
                }
            })
            .collect()
    }

    /// Whether a call that may take `call` can start now: the claim must
    /// outlast it by the writes' share of the margin ([`for_writes`]).
    pub(super) fn outlasts(&self, call: Duration, lease: &VerifyLease) -> bool {
        self.until.saturating_duration_since(Instant::now())
            >= call.saturating_add(for_writes(lease))
    }

    /// Whether the call this claim was sized for can still start.
    pub(super) fn may_start(&self, lease: &VerifyLease) -> bool {
        self.outlasts(self.covers, lease)
    }
}

/// What a call leaves of its claim, at least, for the writes after it: half
/// the margin. The other half is what a claimed row may wait for a free call
/// slot of its producer.
fn for_writes(lease: &VerifyLease) -> Duration {
    lease.margin / 2
}
