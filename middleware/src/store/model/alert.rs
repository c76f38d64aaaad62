//! Alerts: an alert as a state change raises it (with the text the webhook
//! body and the log line carry, written here once for every backend), the
//! operators' filter, and the overdue watch's findings.

use std::time::Duration;

use chrono::{DateTime, Utc};
use trustmsg_verify_api::admin::{AlertKind, AlertState};

use super::{Message, Quarantined};

/// What an overdue message has been waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Its send to Kafka: COMMITTED, send still PENDING, counted from the
    /// commit or from its `deliver_at` if that came later.
    Send,
    /// A decision: PREPARED, counted from the prepare.
    Decision,
}

/// A message [`crate::store::HousekeepingStore::flag_overdue`] flagged: it has waited
/// longer than the threshold, and this call is the one that found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overdue {
    pub id: u64,
    pub biz_id: String,
    pub message_key: String,
    /// Send attempts ([`Wait::Send`]) or check-back attempts ([`Wait::Decision`]).
    pub attempts: u32,
    /// When the wait began: the commit, or the prepare (None if unreadable).
    pub since: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
}

/// An alert as raised, before the outbox gives it its id: what the webhook
/// body and the ERROR log line say about the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAlert {
    pub kind: AlertKind,
    pub message_id: u64,
    pub biz_id: String,
    pub message_key: String,
    /// Check-back attempts (verify_failed, verify_overdue) or send attempts
    /// (send_failed, send_overdue); 0 for a quarantined row, whose counters
    /// may be what is unreadable.
    pub attempts: u32,
    pub last_error: String,
    /// The consumer group of a consumption alert; None for a message alert.
    pub group: Option<String>,
}

impl NewAlert {
    /// The alert of a message that has just become VERIFY_FAILED or
    /// SEND_FAILED (`kind`), as the row now stands.
    pub(crate) fn failed(kind: AlertKind, m: &Message) -> Self {
        let attempts = match kind {
            AlertKind::SendFailed | AlertKind::SendOverdue => m.send_attempts,
            _ => m.verify_attempts,
        };
        Self {
            kind,
            message_id: m.id,
            biz_id: m.biz_id.clone(),
            message_key: m.message_key.clone(),
            attempts,
            last_error: m.last_error.clone().unwrap_or_default(),
            group: None,
        }
    }

    /// The alert of a row a claim set aside.
    pub(crate) fn quarantined(q: &Quarantined) -> Self {
        Self {
            kind: AlertKind::Quarantined,
            message_id: q.id,
            biz_id: q.biz_id.clone(),
            message_key: q.message_key.clone(),
            attempts: 0,
            last_error: q.reason.clone(),
            group: None,
        }
    }

    /// The alert of a message that has waited for `wait` longer than `after`.
    pub(crate) fn overdue(wait: Wait, after: Duration, o: &Overdue) -> Self {
        let (kind, waiting) = match wait {
            Wait::Send => (AlertKind::SendOverdue, "committed and not yet in Kafka"),
            Wait::Decision => (AlertKind::VerifyOverdue, "prepared and not yet decided"),
        };
        let since = o
            .since
            .map_or_else(|| "an unreadable time".to_string(), |t| t.to_rfc3339());
        let last = o.last_error.as_deref().unwrap_or("none");
        Self {
            kind,
            message_id: o.id,
            biz_id: o.biz_id.clone(),
            message_key: o.message_key.clone(),
            attempts: o.attempts,
            last_error: format!(
                "{waiting} for more than {} (since {since}); last error: {last}",
                humantime::format_duration(after)
            ),
            group: None,
        }
    }
}

/// Which alerts an operator lists; the fields that are set combine with AND.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AlertFilter {
    pub state: Option<AlertState>,
    pub message_id: Option<u64>,
}
