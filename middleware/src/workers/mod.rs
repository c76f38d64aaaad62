//! The background workers beside the three big ones (`api`, `verifier`,
//! `forwarder`): each wakes on a tick, does one round against the store and
//! sleeps again, until shutdown.
//!
//! - [`alerts`]: delivers the alert outbox to the webhook;
//! - `backlog`: the backlog gauges in `/metrics`;
//! - `flow`: the flow per minute (counted here, summed in the database);
//! - `liveness`: which background workers still run, for `/readyz`;
//! - `overdue`: one alert for a message that waited far too long;
//! - `payload_move`: long contents of rows from before migration 0018 moved
//!   out of their rows, in the background;
//! - `periodic`: the tick-and-cancel loop the periodic workers share;
//! - `retention`: deleting finished messages after `--retention`;
//! - `table_sizes`: the large tables' rows and bytes and the oldest
//!   message's age in `/metrics`;
//! - `stuck_consumptions`: the consumption ledger's watch (stuck
//!   consumptions, per-group gauges); the ledger itself is `store/sql/ledger.rs`.

pub mod alerts;
pub(crate) mod backlog;
pub(crate) mod flow;
pub(crate) mod liveness;
pub(crate) mod overdue;
pub(crate) mod payload_move;
pub(crate) mod periodic;
pub mod retention;
pub(crate) mod stuck_consumptions;
pub(crate) mod table_sizes;
