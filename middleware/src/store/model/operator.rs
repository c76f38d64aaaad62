//! What an operator lists and repairs: the message filter, the bulk
//! requeues, and the per-producer summary.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use trustmsg_verify_api::{MessageStatus, SendStatus};

/// Which messages an operator lists; the fields that are set combine with AND.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageFilter {
    pub status: Option<MessageStatus>,
    pub send_status: Option<SendStatus>,
    pub biz_id: Option<String>,
    pub topic: Option<String>,
    /// Created at or after.
    pub created_after: Option<DateTime<Utc>>,
    /// Created strictly before.
    pub created_before: Option<DateTime<Utc>>,
}

/// What an operator's repair puts back in the queue it failed out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    /// COMMITTED + SEND_FAILED → PENDING: send attempts back to 0, sent again at once.
    Redeliver,
    /// VERIFY_FAILED → PREPARED: check-back attempts back to 0, checked again at once.
    Reverify,
}

/// What one chunk of a bulk [`Requeue`] did, in one transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequeuedChunk {
    /// Rows changed (each with its audit row).
    pub changed: u64,
    /// The highest id the chunk changed: the next chunk starts after it.
    /// None when no row was left to change.
    pub last_id: Option<u64>,
}

/// One producer's messages at a glance: exact counts of the messages an
/// operator may still act on, and how many finished recently.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerSummary {
    pub biz_id: String,
    /// Live messages by status: `PREPARED`, `VERIFY_FAILED`, and `COMMITTED`
    /// not yet in Kafka; states with none are absent.
    pub by_status: BTreeMap<String, u64>,
    /// Committed messages not yet in Kafka by send status (`PENDING`,
    /// `SEND_FAILED`).
    pub by_send_status: BTreeMap<String, u64>,
    /// Messages that reached SENT within the summary's recent window.
    pub sent_recently: u64,
    /// Messages ROLLED_BACK within the summary's recent window.
    pub rolled_back_recently: u64,
    /// When the oldest message still PREPARED was prepared.
    pub oldest_prepared_at: Option<DateTime<Utc>>,
    /// Since when the oldest message whose send is still PENDING (and due)
    /// has waited: its commit, or its `deliver_at` if later.
    pub oldest_pending_send_at: Option<DateTime<Utc>>,
    /// Committed messages waiting for a `deliver_at` still in the future;
    /// not in `by_status` or `by_send_status`.
    pub scheduled: u64,
}
