//! trustmsg: a reliable-message middleware. A producer that must change its own
//! database *and* publish a Kafka message gets both or neither, without XA:
//! prepare → local transaction → commit or rollback, with check-back when a
//! prepared message is left hanging.
//!
//! - [`api`]: the HTTP API (producer API, producer registry, health);
//! - [`store`]: the storage trait and its MySQL and SQLite backends;
//! - [`forwarder`]: committed messages to Kafka;
//! - [`verifier`]: check-back of undecided messages;
//! - [`startup`]: wiring, shared by `main` and the tests;
//! - [`tls`]: the crypto provider of outgoing HTTPS.

pub mod address_policy;
pub mod alert;
pub mod api;
mod backlog;
pub mod backoff;
mod batcher;
mod coalesce;
pub mod config;
pub mod forwarder;
pub mod handoff;
mod liveness;
mod metrics_setup;
mod overdue;
mod periodic;
pub mod registry;
mod retention;
mod secret;
pub mod startup;
pub mod store;
pub mod tls;
pub mod verifier;
