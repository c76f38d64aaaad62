//! The consumption ledger: one group's consumption of one message, what a
//! begin and a finish decided, a group's counts, and what the stuck watch
//! flagged.

use chrono::{DateTime, Utc};
use trustmsg_verify_api::consumers::ConsumptionState;

/// One group's consumption of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumption {
    pub group: String,
    pub message_id: u64,
    pub state: ConsumptionState,
    pub attempts: u32,
    pub last_error: Option<String>,
    pub first_began_at: DateTime<Utc>,
    pub last_began_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
}

impl Consumption {
    /// The API's view of the row.
    pub fn view(self) -> trustmsg_verify_api::consumers::ConsumptionView {
        trustmsg_verify_api::consumers::ConsumptionView {
            group: self.group,
            state: self.state,
            attempts: self.attempts,
            last_error: self.last_error,
            first_began_at: self.first_began_at,
            last_began_at: self.last_began_at,
            finished_at: self.finished_at,
            updated_at: self.updated_at,
        }
    }
}

/// What a begin decided ([`crate::store::LedgerStore::begin_consumption`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Began {
    /// No such message.
    UnknownMessage,
    /// Go (first time, retry or takeover): the row as this begin left it.
    Go(Consumption),
    /// Another delivery holds it: the row as it is.
    InProgress(Consumption),
    /// Processed already.
    Done(Consumption),
}

/// What a finish did ([`crate::store::LedgerStore::finish_consumption`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finished {
    /// No such message.
    UnknownMessage,
    /// The group never began this message.
    NotBegun,
    /// Recorded: the row as this finish left it (or, for a repeat of the
    /// finish that made it so, as it was: nothing changed).
    Recorded { row: Consumption, changed: bool },
    /// The consumption is finished the other way (`done` and a failure
    /// came, or `failed` and a success came without a begin first).
    Conflict(Consumption),
}

/// One consumer group at a glance.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroupCounts {
    pub group: String,
    pub topics: Vec<String>,
    pub processed: u64,
    pub failing: u64,
    pub in_progress: u64,
    pub lag: u64,
}

/// A consumption the stuck watch flagged (its alert raised).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StuckConsumption {
    pub group: String,
    pub message_id: u64,
    pub attempts: u32,
    pub since: DateTime<Utc>,
}
