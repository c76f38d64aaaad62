//! The data model every backend stores and returns, one file per concern
//! (as the [`crate::store::Store`] trait groups its operations).
//!
//! These are types. What behaviour they carry is arithmetic or text that
//! every backend must compute the same way, so it lives once, next to its
//! type: a message's identity ([`NewMessage::digest`], [`order_key`]) in
//! `message.rs`; which rows fit a send claim's [`PayloadRoom`] in
//! `claim.rs`; how long a check-back claim lasts ([`VerifyLease`]) in
//! `verify.rs`; the text of an alert ([`NewAlert`]) in `alert.rs`; the
//! column order of the flow counts ([`FlowCounts`]) in `housekeeping.rs`;
//! a producer's topic allow-list ([`Producer::allows_topic`]) in
//! `registry.rs`; what is kept about the producers' own outbox tables
//! ([`OutboxFailure`], [`OutboxAction`]) in `outbox.rs`.

mod alert;
mod claim;
mod housekeeping;
mod ledger;
mod message;
mod operator;
mod outbox;
mod registry;
mod verify;
mod waiting;

pub use alert::{AlertFilter, NewAlert, Overdue, Wait};
pub use claim::{Claimed, PayloadRoom, Quarantined, Reschedule, SendOwner, SentMark};
pub use housekeeping::{
    ArchiveRange, Backlog, BacklogSample, FinishedMessage, FinishedRange, FlowCounts, FlowMinute,
    OldestPartition, PartitionPlan, PartitionRound, PayloadMove, Storage, TableSize,
};
pub use ledger::{Began, ConsumerGroupCounts, Consumption, Finished, StuckConsumption};
pub use message::{
    order_key, Actor, AuditEntry, Delivery, Inserted, Message, NewCommitted, NewMessage, OrderPos,
    Tombstone, Transition,
};
pub use operator::{MessageFilter, ProducerSummary, Requeue, RequeuedChunk};
pub use outbox::{OutboxAction, OutboxActionKind, OutboxFailure};
pub use registry::{ConsumerGroup, ConsumerGroupRecord, Producer, ProducerRecord};
pub use verify::{CheckAttempt, CheckAttemptEntry, VerifyLease};
pub use waiting::{NewWaitingCommit, WaitingCommit};
