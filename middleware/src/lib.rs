//! trustmsg: a reliable-message middleware. A producer that must change its own
//! database *and* publish a Kafka message gets both or neither, without XA:
//! prepare → local transaction → commit or rollback, with check-back when a
//! prepared message is left hanging.
//!
//! The modules, one line each (the workers `api`, `verifier` and `forwarder`
//! import none of each other; [`startup`] joins them):
//!
//! - [`address_policy`]: which addresses check-back may dial (the SSRF guard);
//! - [`alert`]: alerts when a message needs a person;
//! - [`api`]: the HTTP API (producer API, producer registry, operator API, health);
//! - `backlog`: the backlog gauges in `/metrics`;
//! - [`backoff`]: retry delays, one rule for sends and check-backs;
//! - `batcher`: group commit written once (a queue, N workers, one reply per job);
//! - `coalesce`: what the API's prepares and decisions write in a batch;
//! - [`config`]: the flags, checked once and turned into typed settings;
//! - `flow`: the flow per minute (counted here, summed in the database);
//! - [`forwarder`]: committed messages to Kafka;
//! - [`handoff`]: what the workers hand each other (commits, the record size);
//! - `liveness`: which background workers still run, for `/readyz`;
//! - `metrics_setup`: the process-wide Prometheus recorder;
//! - `overdue`: one alert for a message that waited far too long;
//! - `payload_move`: long contents of rows from before migration 0018 moved out of their rows;
//! - `periodic`: the tick-and-cancel loop of the periodic workers;
//! - [`registry`]: the producer registry, read through a cache;
//! - `retention`: deleting finished messages after `--retention`;
//! - `secret`: values that never reach a log;
//! - [`startup`]: wiring, shared by `main` and the tests;
//! - [`store`]: the storage trait and its MySQL and SQLite backends;
//! - [`tls`]: the crypto provider of outgoing HTTPS;
//! - [`verifier`]: check-back of undecided messages.

pub mod address_policy;
pub mod alert;
pub mod api;
mod backlog;
pub mod backoff;
mod batcher;
mod coalesce;
pub mod config;
mod flow;
pub mod forwarder;
pub mod handoff;
mod https;
pub mod kafka_config;
mod ledger;
mod liveness;
mod metrics_setup;
mod overdue;
mod payload_move;
mod periodic;
pub mod registry;
mod retention;
mod secret;
pub mod startup;
pub mod store;
mod submit;
pub mod telemetry;
pub mod tls;
pub mod verifier;
