//! The commit hand-off: every commit this instance makes (a producer's, via
//! the API, or check-back's, via the verifier) is told to one
//! [`CommitListener`], which the forwarder implements and start-up wires.

use crate::store::Message;

/// Told about every commit this instance makes. The commit already claimed the
/// row for this instance (its `next_send_at` is a lease), so the listener can
/// send it at once: the fast path.
pub trait CommitListener: Send + Sync + 'static {
    /// `message` was just committed and claimed (its `version` is the claim's).
    fn committed(&self, message: Message);
}

/// A listener that does nothing: without a forwarder, committed rows wait for
/// one (their lease expires and any forwarder's sweeper picks them up).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoForwarder;

impl CommitListener for NoForwarder {
    fn committed(&self, _message: Message) {}
}
