//! API tests: the real service on port 0 over a fresh MariaDB database
//! (and, in `sqlite`, a smoke test over a fresh SQLite file).

mod admin;
mod admin_actions;
mod auth;
mod concurrency;
mod console;
mod consumer_groups;
mod fuzz;
mod limits;
mod messages;
mod outage;
mod producers;
mod sqlite;
mod validation;
