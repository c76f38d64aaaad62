//! Durable state: messages, producers and the audit log.
//!
//! One [`Store`] trait, made of one sub-trait per concern (`traits.rs`:
//! lifecycle, messages, sends, check-backs, operator views and repairs,
//! alerts, housekeeping, waiting commits, registry, consumption ledger), and
//! four backends, each a folder with one file per concern: [`mysql`] and
//! [`postgres`] for production, [`sqlite`] for single-instance use, and
//! [`shards`], several
//! MySQL databases as one store (it routes and fans out to [`mysql`] stores
//! and writes no SQL of its own but its setup's). [`open()`] is the one
//! place that decides which of them a list of URLs opens. The trait exposes
//! one small operation per statement (or per short transaction); the
//! decision logic that combines them lives once, in [`decide()`], so every
//! backend behaves the same. What the SQL backends share (column lists,
//! what each transition sets, audit rows, row decoding, the statements whose
//! SQL reads the same in every dialect) lives once too, in `sql/`; a SQL
//! backend's folder holds only its dialect: its SQL text, its locking and its
//! clock expression. The data model is `model/`, one file per concern.
//!
//! Guarantees every backend gives:
//! - every state change is a guarded UPDATE (`WHERE id = ? AND status = ? AND
//!   version = ?`) that bumps `version`, so of two concurrent writers exactly one
//!   wins and a stale claimer's write matches nothing;
//! - a decision and its audit row are written in one transaction;
//! - due-times are computed with the database clock, so instances with skewed
//!   clocks agree on what is due;
//! - claims (for sending or for check-back) push the due-time out by a lease, so
//!   a crashed claimer's rows come back once the lease runs out; a check-back
//!   claim lasts as long as its own producer's call may take plus a margin
//!   ([`VerifyLease`]), a send claim `--send-lease`;
//! - a claim reads its rows one by one: a row this version cannot read (a
//!   value it does not know, headers that are not JSON: [`StoreError::Corrupt`])
//!   is quarantined instead of failing the batch. Its due column is set to
//!   NULL (no scan takes it again), `last_error` says `quarantined: unreadable
//!   row: <why>`, an audit row with action `quarantine` is written, and the
//!   claim reports it ([`Claimed::quarantined`]) so the worker alerts once.
//!   Otherwise the same row would fail every claim that reaches it and stall
//!   the forwarder or the verifier for every message behind it.
//! - an ordered producer's keyed messages are sent in commit order: a
//!   commit takes its key's next seq under the key's row lock in the same
//!   transaction, only the key's head is due, and the head's SENT mark (or
//!   an operator's skip) makes the next one due in the same transaction
//!   (`sql/ordering.rs`); nothing of it runs for an unordered message;
//! - every state change that needs a person (VERIFY_FAILED, SEND_FAILED, a
//!   quarantine, an overdue flag) writes its alert to the `alerts` outbox in
//!   the same transaction, so the alert exists if and only if the change
//!   does, whatever crashes after; the instance whose transaction wrote it
//!   logs and counts it once that transaction has committed (see
//!   `sql/alerts.rs`), and any instance delivers it ([`crate::workers::alerts`]).

mod database_url;
mod db_clock;
pub(crate) mod deadline;
mod decide;
mod migrations;
mod model;
pub mod mysql;
mod open;
pub mod postgres;
pub mod shards;
mod sql;
pub mod sqlite;
mod traits;

pub use database_url::{Backend, DatabaseUrl, UrlRefused};

/// Time partitions made ahead of the one taking new messages
/// (`sql::partitions`).
pub const PARTITIONS_AHEAD: u64 = sql::AHEAD;

/// The message ids of time partition `period` (as
/// [`PartitionRound::held`] names them), for the archive's row path.
pub fn period_ids(period: u64) -> std::ops::Range<u64> {
    sql::first_id(period)..sql::first_id(period + 1)
}
pub use decide::{
    decide, decide_batch, decide_batch_known, producer_reason, DecideOutcome, DecideRequest, Target,
};
pub use open::{connect, create_database_if_missing, open};
use traits::{insert_prepared_each, transition_each};
pub use traits::{
    AlertStore, DynStore, HousekeepingStore, LedgerStore, LifecycleStore, MessageStore,
    OperatorStore, OutboxStore, RegistryStore, SendStore, Store, VerifyStore, WaitingStore,
};

/// The store's traits, for code that calls a concrete backend (a
/// `MySqlStore`, a `SqliteStore`): `use crate::store::prelude::*` brings
/// every concern's methods into scope. Code that holds a [`DynStore`] or a
/// generic `S: Store` needs no import for them.
pub mod prelude {
    pub use super::{
        AlertStore, HousekeepingStore, LedgerStore, LifecycleStore, MessageStore, OperatorStore,
        OutboxStore, RegistryStore, SendStore, Store, VerifyStore, WaitingStore,
    };
}

pub use model::{
    order_key, Actor, AlertFilter, ArchiveRange, AuditEntry, Backlog, BacklogSample, Began,
    CheckAttempt, CheckAttemptEntry, Claimed, ConsumerGroup, ConsumerGroupCounts,
    ConsumerGroupRecord, Consumption, Delivery, Finished, FinishedMessage, FinishedRange,
    FlowCounts, FlowMinute, Inserted, Message, MessageFilter, NewAlert, NewCommitted, NewMessage,
    NewWaitingCommit, OldestPartition, OrderPos, OutboxAction, OutboxActionKind, OutboxFailure,
    Overdue, PartitionPlan, PartitionRound, PayloadMove, PayloadRoom, Producer, ProducerRecord,
    ProducerSummary, Quarantined, Requeue, RequeuedChunk, Reschedule, SendOwner, SentMark, Storage,
    StuckConsumption, TableSize, Tombstone, Transition, VerifyLease, Wait, WaitingCommit,
};

/// What can go wrong in the store. Each variant says what its caller should
/// do: retry, alert a person, or fix the configuration.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database failed or could not be reached. Transient: retry later
    /// (the API answers 503, the workers retry on their next tick).
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    /// Applying migrations failed. Not transient: the schema or the
    /// migration files need a person; start-up stops here.
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A row holds a value this version cannot read (an unknown status, text
    /// that is not UTF-8, a number out of range, headers that are not JSON).
    /// Retrying reads the same row: alert, a person must look at it. (A
    /// claim quarantines such a row and goes on with the others.)
    #[error("unreadable row: {0}")]
    Corrupt(String),
    /// A decision kept losing its guarded UPDATE to concurrent writers. Each
    /// loss means another writer made progress, so this is transient: retry.
    #[error("lost too many races: {0}")]
    Contention(&'static str),
    /// A row this call had just written or seen was gone when it read it back:
    /// a concurrent delete won the race. Transient: retry, which sees the
    /// row's current state.
    #[error("row vanished: {0}")]
    Vanished(&'static str),
    /// The database could not be reached, as found by a statement made for
    /// several callers at once (each gets this copy of the cause). Transient:
    /// retry later.
    #[error("database unreachable: {0}")]
    Unavailable(String),
    /// The write batcher has stopped because the service is shutting down.
    /// Retry against another instance (or this one once it is back).
    #[error("the write batcher stopped (shutting down)")]
    ShuttingDown,
}

impl StoreError {
    /// Whether the database could not be reached at all (no connection, a
    /// connection lost, the pool's acquire timeout): every statement would
    /// fail the same way for now, so retrying at once, or statement by
    /// statement, only adds waiting.
    pub fn is_unreachable(&self) -> bool {
        match self {
            Self::Db(e) => matches!(
                e,
                sqlx::Error::Io(_)
                    | sqlx::Error::Tls(_)
                    | sqlx::Error::PoolTimedOut
                    | sqlx::Error::PoolClosed
                    | sqlx::Error::WorkerCrashed
            ),
            Self::Unavailable(_) => true,
            _ => false,
        }
    }
}

/// Check-back calls kept per message (the newest).
pub const CHECK_ATTEMPTS_KEPT: u32 = 50;

/// Result of a store operation.
pub type StoreResult<T> = Result<T, StoreError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_errors_of_reaching_the_database_count_as_unreachable() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(StoreError::Db(sqlx::Error::Io(refused)).is_unreachable());
        assert!(StoreError::Db(sqlx::Error::PoolTimedOut).is_unreachable());
        assert!(StoreError::Unavailable("gone".into()).is_unreachable());
        // A statement the database refused, or a row it returned, says
        // nothing about the next statement: worth retrying one by one.
        assert!(!StoreError::Db(sqlx::Error::RowNotFound).is_unreachable());
        assert!(!StoreError::Corrupt("headers".into()).is_unreachable());
        assert!(!StoreError::Contention("decide").is_unreachable());
    }
}
