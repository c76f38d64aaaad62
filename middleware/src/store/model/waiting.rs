//! Commits submitted through Kafka before their prepare: as kept, and as
//! stored.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// A commit submitted through Kafka before its prepare was seen, to be kept
/// until its prepare is in (the Kafka way in, `crate::submit`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewWaitingCommit {
    pub biz_id: String,
    pub message_key: String,
    /// Where the record was read: partition and offset of the submit topic.
    pub partition: i32,
    pub offset: i64,
    /// The record's key and headers as submitted (a commit has no value), so
    /// a dead-lettered commit is the record the producer sent.
    pub record_key: Option<Vec<u8>>,
    pub headers: Vec<(String, String)>,
    /// How long it may wait for its prepare.
    pub wait: Duration,
}

/// A waiting commit as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingCommit {
    pub id: u64,
    pub biz_id: String,
    pub message_key: String,
    pub partition: i32,
    pub offset: i64,
    pub record_key: Option<Vec<u8>>,
    pub headers: Vec<(String, String)>,
    /// Tries so far to apply it.
    pub attempts: u32,
    pub received_at: DateTime<Utc>,
    /// When it is dead-lettered if its prepare is still missing.
    pub give_up_at: DateTime<Utc>,
    /// When it is tried next (or its claim runs out).
    pub next_try_at: DateTime<Utc>,
    /// The database clock when it was read.
    pub now: DateTime<Utc>,
}
