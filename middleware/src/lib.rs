//! trustmsg: a reliable-message middleware. A producer that must change its own
//! database *and* publish a Kafka message gets both or neither, without XA:
//! prepare → local transaction → commit or rollback, with check-back when a
//! prepared message is left hanging.
//!
//! The modules, one line each (the workers `api`, `verifier` and `forwarder`
//! import none of each other; the three doors a producer's message comes
//! in by, `api`, `submit` and `outbox`, share `intake` and import none of
//! each other but `api` listing the outbox sources; [`startup`] joins them):
//!
//! - [`api`]: the HTTP API (producer API, producer and consumer-group
//!   registry, consumption ledger, operator API, console, health);
//! - [`archive`]: where retention writes finished messages before it
//!   deletes them (`--archive`), and finding them there;
//! - [`backoff`]: retry delays, one rule for sends and check-backs;
//! - [`config`]: the flags, checked once and turned into typed settings;
//! - [`forwarder`]: committed messages to Kafka;
//! - `group_commit`: many callers' writes in one statement and one commit;
//! - [`handoff`]: what the workers hand each other (commits, the record size);
//! - `intake`: the rules and writes of a producer's messages, whichever door
//!   they came in by (validation, building a message, prepare and decide
//!   through the group commit, and what their outcomes mean);
//! - [`net`]: the network's edge: the SSRF guard, TLS in and out, Kafka
//!   settings, secrets;
//! - [`observability`]: trace propagation, trustmsg's own spans, `/metrics`;
//! - [`outbox`]: the local message table way (relaying the producers' own
//!   outbox tables);
//! - [`registry`]: producers and consumer groups, read through a cache;
//! - [`startup`]: wiring, shared by `main` and the tests;
//! - [`store`]: the storage trait (a sub-trait per concern) and its
//!   MySQL/MariaDB, PostgreSQL and SQLite backends, the statements they
//!   share (`store::sql`), and the sharded store over several of them;
//! - `submit`: the Kafka way in (signed prepare/commit/rollback records);
//! - [`verifier`]: check-back of undecided messages;
//! - [`workers`]: the periodic workers (alert delivery, backlog, flow,
//!   liveness, overdue, retention, the ledger's stuck watch).

pub mod api;
pub mod archive;
pub mod backoff;
pub mod config;
pub mod forwarder;
mod group_commit;
pub mod handoff;
pub(crate) mod intake;
pub mod net;
pub mod observability;
pub mod outbox;
pub mod registry;
pub mod startup;
pub mod store;
mod submit;
pub mod verifier;
pub mod workers;
