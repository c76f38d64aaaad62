//! What trustmsg keeps about the producers' own outbox tables
//! (`crate::outbox`): a source row the relay failed, and an operator's
//! action on one. The rows themselves stay in the producer's database.

use chrono::{DateTime, Utc};

/// A source row the relay marks failed (3): recorded once per
/// (source, row, attempt), with its `outbox_failed` alert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxFailure {
    /// The source's producer.
    pub biz_id: String,
    /// The row's id in the source table.
    pub source_row_id: u64,
    /// The row's `retry_count` (each operator retry is a new attempt).
    pub attempt: u32,
    pub message_key: String,
    /// Why it failed, for the row's `fail_reason` and the alert.
    pub reason: String,
    /// trustmsg's message holding the key, when there is one (a content
    /// conflict); 0 when the row never became a message.
    pub message_id: u64,
}

/// An operator's retry or give-up of a failed source row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutboxActionKind {
    /// Pending again, as a new attempt.
    Retry,
    /// Never relayed: status 4, deleted by the source's retention.
    GiveUp,
}

impl OutboxActionKind {
    /// The wire and database spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Retry => "retry",
            Self::GiveUp => "give_up",
        }
    }

    /// Parses the database spelling.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Retry, Self::GiveUp]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// An audited operator action on a source row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxAction {
    pub biz_id: String,
    pub source_row_id: u64,
    pub message_key: String,
    /// `operator:<name>`.
    pub actor: String,
    pub action: OutboxActionKind,
    pub reason: String,
    /// When it was recorded (database clock); ignored when recording.
    pub at: DateTime<Utc>,
}
