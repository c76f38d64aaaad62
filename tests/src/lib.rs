//! trustmsg's test kit: what the middleware's, the SDK's and the end-to-end
//! tests need to run against the real thing, written once.
//!
//! - [`db`]: a fresh database per test ([`TestDb`]) on the MariaDB/MySQL server
//!   at `TRUSTMSG_TEST_MYSQL_URL`, or a fresh SQLite file; [`db_proxy`]: a
//!   proxy to that server a test can cut for one service ([`DbProxy`]);
//!   [`mariadb`]: a private MariaDB server a test may kill ([`PrivateMariaDb`]),
//!   [`postgres`] its PostgreSQL twin ([`PrivatePostgres`]) and
//!   [`private_db`] either of them, chosen by [`Database`] ([`PrivateDb`]);
//!   [`pg`]: the same fresh database per test on the PostgreSQL server at
//!   `TRUSTMSG_TEST_POSTGRES_URL` ([`PgTestDb`]), for producers' databases.
//! - [`app`]: the real service booted in-process on port 0 ([`TestApp`]),
//!   through the same entry points as the binary, and the HTTP calls tests make.
//! - [`process`]: the real `trustmsg` binary as a child process, for tests that
//!   kill it ([`ServiceProcess`]), with the calls the end-to-end tests make
//!   (admin API, `/metrics`, signals).
//! - [`outbox`]: a producer's own outbox table in a database of its own
//!   ([`OutboxTable`]), for `--outbox-source`.
//! - [`metrics`]: `/metrics` read by name and labels ([`Metrics`]), for both;
//!   [`flags`]: the flags tests share ([`FAST_SEND`]).
//! - [`kafka`]: librdkafka's mock cluster and the one consumer, from
//!   `trustmsg-kafka-mock`, and a check that a topic holds nothing which
//!   cannot pass by looking too early ([`kafka::assert_holds_nothing`]);
//!   [`kafka_tls`]: that cluster reachable only over TLS (Debian's socat in
//!   front), optionally with SASL (PLAIN, SCRAM); [`real_kafka`]: a real
//!   Apache Kafka broker of a test's own ([`RealKafka`], `scripts/kafka-broker`),
//!   with real SASL users, ACLs and restarts, or one plain broker a run's
//!   tests share. [`s3`]: a real S3-compatible server of a test's own
//!   ([`S3Server`], `scripts/s3-server`: moto's), for the archive.
//! - [`check_server`] and [`servers`]: local endpoints trustmsg calls (a
//!   scripted check-back endpoint, an alert webhook) and servers that fail
//!   or listen on purpose.
//! - [`certs`]: a private CA and the server certificates it signs, for the
//!   TLS listeners tests start.
//! - [`wait`] and [`trace`]: polling for what happens on its own time, and
//!   logs that show only when a test fails.
//!
//! Everything here panics on failure instead of returning errors: a helper
//! that cannot do its job has already failed the test.
//!
//! The crate's own tests (`e2e/`) run the whole loop: the binary, MariaDB,
//! Kafka and producers built with the SDK.

#![warn(missing_docs)]

pub mod app;
pub mod certs;
pub mod check_server;
pub mod db;
pub mod db_proxy;
pub mod flags;
pub mod http;
pub mod kafka;
pub mod kafka_tls;
pub mod mariadb;
pub mod metrics;
pub mod outbox;
pub mod pg;
pub mod postgres;
pub mod private_db;
mod private_server;
pub mod process;
pub mod real_kafka;
pub mod s3;
pub mod servers;
pub mod signal;
pub mod submit;
pub mod trace;
pub mod wait;

pub use app::{
    decision_body, fast_retry, prepare_body, TestApp, ADMIN_TOKEN, UNREACHABLE_VERIFY_URL,
};
pub use check_server::{CheckServer, Reply};
pub use db::{deciders, message_states, mysql_server_url, open_store, TestDb};
pub use db_proxy::DbProxy;
pub use flags::FAST_SEND;
pub use http::{http_client, http_client_builder};
pub use mariadb::PrivateMariaDb;
pub use metrics::Metrics;
pub use outbox::{OutboxTable, PgOutboxTable};
pub use pg::{postgres_server_url, PgTestDb};
pub use postgres::PrivatePostgres;
pub use private_db::{Database, PrivateDb};
pub use process::ServiceProcess;
pub use real_kafka::RealKafka;
pub use s3::S3Server;
pub use servers::{serve, AlertSink, Canary, Counter, Endpoint};
pub use trace::init_tracing;
pub use wait::{eventually, within};
