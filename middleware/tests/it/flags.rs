//! Flag sets that tests of several modules start the service with.

/// Check-back at once after a prepare, polled every 20 ms.
pub(crate) const CHECK_AT_ONCE: &[&str] =
    &["--first-verify-after", "0s", "--verify-interval", "20ms"];
