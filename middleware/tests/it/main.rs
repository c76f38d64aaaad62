//! The middleware's integration tests, one binary: the real service booted on
//! port 0 over a fresh MariaDB database (or SQLite file), real local HTTP
//! servers for check-back and alerts, and librdkafka's mock cluster for Kafka,
//! all from the test kit (`trustmsg-tests`).
//!
//! - `api`: the producer and registry API, auth, validation, concurrency.
//! - `forwarder`: what reaches Kafka, claims and leases, faults, shutdown.
//! - `verifier`: check-back decisions, garbage answers, timing, SSRF guard.
//! - `bench`: `trustmsg bench` keeps its promises.
//! - `flags`: flag sets the modules share.
//! - `cli`: `trustmsg serve` refuses bad flags before touching anything.
//! - `admin_cli`: `trustmsg admin` against a running service.
//! - `openapi`: `docs/openapi.json` matches the code.
//! - `outbox`: the outbox sources for operators: listed, their failed rows
//!   retried or given up (audited), refusals, a source that is down.
//! - `alerts`: delivery from the alert outbox, retried under a stable id.
//! - `overdue`: messages waiting far too long are alerted once.
//! - `store`: the conformance suite, every store test on both backends.

mod admin_cli;
mod alerts;
mod api;
mod bench;
mod cli;
mod flags;
mod forwarder;
mod openapi;
mod outbox;
mod overdue;
mod store;
mod verifier;
