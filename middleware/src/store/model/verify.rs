//! Check-back: how long a check-back claim lasts (the lease arithmetic:
//! a producer's own call timeout plus a margin) and the record of each call.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// How long a check-back claim lasts ([`crate::store::VerifyStore::claim_due_verifies`]):
/// per row, what its call may take plus a margin. A call takes at most its
/// producer's `verify_timeout_ms`, cut to `max_timeout` (`--verify-timeout-max`)
/// for a registration made under a higher cap; a row whose producer is not
/// registered is covered for `max_timeout`. So a crashed instance's rows come
/// back as soon as their own calls could have ended, not after a lease sized
/// for the slowest producer anyone may register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifyLease {
    /// Added to the call's timeout (`--verify-lease-margin`): the time a
    /// claimed row may wait for a free call slot, and the time the writes
    /// after its call have (see `crate::verifier`).
    pub margin: Duration,
    /// The longest one call may take (`--verify-timeout-max`).
    pub max_timeout: Duration,
}

impl VerifyLease {
    /// The longest a call to a producer registered with `timeout_ms` (None:
    /// not registered) may take.
    pub fn call_timeout(&self, timeout_ms: Option<u32>) -> Duration {
        timeout_ms.map_or(self.max_timeout, |ms| {
            Duration::from_millis(ms.into()).min(self.max_timeout)
        })
    }

    /// How long a claim on a row of a producer registered with `timeout_ms`
    /// (None: not registered) lasts.
    pub fn covering(&self, timeout_ms: Option<u32>) -> Duration {
        self.call_timeout(timeout_ms).saturating_add(self.margin)
    }
}

/// One check-back call, as the verifier records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckAttempt {
    pub message_id: u64,
    /// 1 for the first call of the message.
    pub attempt: u32,
    pub duration_ms: u32,
    /// None when no answer came (refused, timed out, denied address).
    pub http_status: Option<u16>,
    /// `commit`, `rollback`, `unknown` or `failed`.
    pub outcome: &'static str,
    /// A short reason when the call decided nothing.
    pub error: Option<String>,
}

/// A recorded check-back call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct CheckAttemptEntry {
    pub attempt: u32,
    pub at: DateTime<Utc>,
    pub duration_ms: u32,
    pub http_status: Option<u16>,
    pub outcome: String,
    pub error: Option<String>,
}

impl CheckAttemptEntry {
    /// The admin API's view of the call.
    pub fn view(self) -> trustmsg_verify_api::admin::CheckAttemptView {
        trustmsg_verify_api::admin::CheckAttemptView {
            attempt: self.attempt,
            at: self.at,
            duration_ms: self.duration_ms,
            http_status: self.http_status,
            outcome: self.outcome,
            error: self.error,
        }
    }
}
