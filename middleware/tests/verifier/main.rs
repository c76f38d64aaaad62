//! Verifier tests: the real service (or a stepped verifier) over a fresh
//! MariaDB database, with check endpoints that are real local HTTP servers.
//! Nothing here dials outside 127.0.0.0/8.

#[path = "../common/mod.rs"]
mod common;

#[macro_use]
mod support;

mod concurrency;
mod decisions;
mod garbage;
mod registry;
mod ssrf;
mod timing;
