//! API tests: the real service on port 0 over a fresh MariaDB database.

#[path = "../common/mod.rs"]
mod common;

mod auth;
mod concurrency;
mod messages;
mod producers;
mod validation;
