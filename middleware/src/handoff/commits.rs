//! The commit hand-off: every commit this instance makes (a producer's, via
//! the API, or check-back's, via the verifier) is told to one
//! [`CommitListener`], which the forwarder implements and start-up wires.

use crate::store::Message;

/// Told about every commit this instance makes, by the task that wrote it
/// (not by a request, which may be cut off first). With a forwarder here the
/// commit already claimed the row for it (its `next_send_at` is a lease), so
/// the listener can send it at once: the fast path. A listener that cannot
/// take it must give the claim back (the forwarder's releaser), or the row
/// waits for the lease.
pub trait CommitListener: Send + Sync + 'static {
    /// `message` was just committed and claimed (its `version` is the claim's).
    fn committed(&self, message: Message);
}

/// A listener that does nothing: without a forwarder a commit claims nothing
/// (its send lease is zero), so the row is due at once for any other
/// instance's sweeper.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoForwarder;

impl CommitListener for NoForwarder {
    fn committed(&self, _message: Message) {}
}
