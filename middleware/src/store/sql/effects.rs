//! What a write sets besides the values it is given: the send status and
//! audit action of each transition, and errors clipped to their column.

use std::collections::HashSet;

use trustmsg_verify_api::{MessageStatus, SendStatus};

use crate::store::Transition;

/// What a transition to a status sets besides the status itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::store) struct Effects {
    /// The send status the row gets: a commit starts the send, every other
    /// transition leaves the row with none.
    pub(in crate::store) send_status: Option<&'static str>,
    /// The audit action that names the transition.
    pub(in crate::store) action: &'static str,
}

/// The effects of a transition to `to`. Re-verify (to PREPARED) is what the
/// operator work will use; nothing calls it in this version yet.
pub(in crate::store) fn transition_effects(to: MessageStatus) -> Effects {
    let (send_status, action) = match to {
        MessageStatus::Committed => (Some(SendStatus::Pending.as_str()), "commit"),
        MessageStatus::RolledBack => (None, "rollback"),
        MessageStatus::VerifyFailed => (None, "verify_failed"),
        MessageStatus::Prepared => (None, "reverify"),
    };
    Effects {
        send_status,
        action,
    }
}

/// Kept under the column size, on a character boundary.
pub(in crate::store) fn clip_error(e: &str) -> &str {
    clip_to(e, 2000)
}

/// At most `max` bytes of `e`, cut on a character boundary.
pub(super) fn clip_to(e: &str, max: usize) -> &str {
    if e.len() <= max {
        return e;
    }
    let mut end = max;
    while !e.is_char_boundary(end) {
        end -= 1;
    }
    &e[..end]
}

/// Whether `ts` can go as one UPDATE: at least one, all to the same state
/// with the same lease, attempt count and error, each row once.
pub(in crate::store) fn one_update(ts: &[Transition]) -> bool {
    let uniform = ts.windows(2).all(|w| same_update(&w[0], &w[1]));
    let distinct: HashSet<u64> = ts.iter().map(|t| t.id).collect();
    !ts.is_empty() && uniform && distinct.len() == ts.len()
}

/// Whether `a` and `b` set the same values (state, lease, attempt count and
/// error), so one UPDATE can apply both.
pub(in crate::store) fn same_update(a: &Transition, b: &Transition) -> bool {
    (a.to, a.send_lease, a.verify_attempt, &a.error)
        == (b.to, b.send_lease, b.verify_attempt, &b.error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_error_keeps_short_errors_and_cuts_long_ones_on_a_character_boundary() {
        assert_eq!(clip_error("short"), "short");
        let long = "é".repeat(1500); // 3000 bytes, 2 per character
        let clipped = clip_error(&long);
        assert_eq!(clipped.len(), 2000);
        assert!(long.starts_with(clipped));
        let odd = format!("x{long}"); // byte 2000 falls inside a character
        assert_eq!(clip_error(&odd).len(), 1999);
    }
}
