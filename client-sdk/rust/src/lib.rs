//! The producer SDK for trustmsg.
//!
//! trustmsg gives a producer "my database change and my Kafka message, both or
//! neither" without XA: the producer *prepares* the message, runs its local
//! transaction, then *commits* or *rolls back* the message. When that last call
//! never arrives, trustmsg asks the producer ("check-back") what happened.
//! This crate is everything the producer side needs:
//!
//! - [`Producer`]: prepare / commit / rollback / get over HTTP with the
//!   producer's bearer token, retrying network errors and 5xx with backoff
//!   (never 4xx), and a typed [`Error`].
//! - [`transaction()`]: prepare → your local transaction → commit or rollback,
//!   with a [`TxOutcome`] that says plainly when the decision was left to
//!   check-back.
//! - [`check_router()`]: an axum router serving the check-back endpoint; it
//!   verifies the Standard Webhooks signature and calls your decision function.
//! - [`outbox`]: the other way to publish, the local message table: the
//!   message is one row written in your own transaction, relayed by trustmsg.
//! - [`barrier`]: a marker table in the producer's MySQL/MariaDB database that
//!   makes check-back answers exact, even while the local transaction is still
//!   running.
//! - Delivery at a chosen time: [`Message::deliver_after`] and
//!   [`Message::deliver_at`] (at most 7 days ahead); committed earlier, the
//!   message waits for its time, committed later it goes at once.
//! - Tracing: prepare carries the caller's W3C trace context
//!   ([`Message::trace_context`], or with the `opentelemetry` cargo feature
//!   the current OpenTelemetry span); trustmsg sends it on to check-back and
//!   as the `traceparent`/`tracestate` headers of the Kafka record.
//!
//! # The Kafka way in
//!
//! A producer that already speaks Kafka can submit prepare, commit and
//! rollback as signed records to trustmsg's submit topic instead of calling
//! the HTTP API (`trustmsg serve --submit-topic NAME`): with the `kafka`
//! cargo feature, `submit::Submitter` does it, and [`transaction()`] and
//! [`barrier::transaction`] take it as they take a [`Producer`]
//! ([`TxProducer`]). A Submitter's `Ok` means Kafka acknowledged the record,
//! not that trustmsg applied it: what trustmsg cannot apply goes to the
//! dead-letter topic `NAME.dlq`, and check-back settles a message whose
//! decision was lost. The contract (headers, signature, dead letters, flags,
//! metrics) is in `docs/kafka-submit.md`.
//!
//! # The local message table
//!
//! A producer whose database can hold trustmsg's outbox table needs no call
//! to trustmsg at all: [`outbox::enqueue`] writes the same [`Message`] as a
//! row of that table inside the producer's own transaction (MySQL/MariaDB or
//! SQLite), and `trustmsg serve --outbox-source BIZ_ID=DATABASE_URL` relays
//! each committed row as a COMMITTED message. Nothing on the request path,
//! no check-back, and orders keep being taken while trustmsg is down.
//! `examples/outbox_order_service.rs` is an order service written this way.
//!
//! Consumers with their own MySQL/MariaDB process each message once, in
//! effect, with [`inbox`]: the work and an inbox row keyed by (consumer
//! group, `trustmsg-message-id`) in one local transaction.
//!
//! ```no_run
//! use trustmsg_client::{barrier, check_router, Message, Producer, TxOutcome};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let pool = sqlx::MySqlPool::connect("mysql://root@127.0.0.1:3306/shop").await?;
//! barrier::create_table(&pool).await?;
//! let producer = Producer::new("http://127.0.0.1:8080", "shop", "producer-token")?;
//!
//! // Write the order and its message in one local transaction.
//! let outcome = barrier::transaction(
//!     &producer,
//!     &pool,
//!     Message::new("order-42", "orders", r#"{"order":42}"#),
//!     |conn| {
//!         Box::pin(async move {
//!             sqlx::query("INSERT INTO orders (id) VALUES (42)")
//!                 .execute(&mut *conn)
//!                 .await?;
//!             Ok::<_, sqlx::Error>(())
//!         })
//!     },
//! )
//! .await?;
//! assert!(matches!(outcome, TxOutcome::Committed { .. }));
//!
//! // Answer check-back from the barrier.
//! let check_pool = pool.clone();
//! let app = check_router("whsec_c2VjcmV0", move |req| {
//!     let pool = check_pool.clone();
//!     async move { barrier::check(&pool, &req.biz_id, &req.message_key).await }
//! });
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app).await?;
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

// The README's code blocks compile as doc tests, so it cannot drift from the API.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

pub mod barrier;
mod check;
mod client;
mod error;
pub mod inbox;
#[cfg(feature = "opentelemetry")]
mod otel;
pub mod outbox;
#[cfg(feature = "kafka")]
pub mod submit;
mod transaction;

/// The advisory lock every trustmsg SDK takes on PostgreSQL while it creates
/// its tables ("trustmsg" as a bigint): two `CREATE TABLE IF NOT EXISTS` of
/// one table at once can fail there (23505 on `pg_type`), as two instances
/// of a service starting together do.
pub(crate) const DDL_LOCK: &str = "SELECT pg_advisory_xact_lock(8390898194479674215)";

pub use check::{check_router, CheckEndpoint, DEFAULT_CHECK_PATH, DEFAULT_TOLERANCE};
pub use client::{Message, Producer, RetryPolicy};
pub use error::Error;
#[cfg(feature = "kafka")]
pub use submit::Submitter;
pub use transaction::{transaction, transaction_with, TxOptions, TxOutcome, TxProducer};

/// The wire types shared with the service, re-exported so callers need only this crate.
pub use trustmsg_verify_api as api;
pub use trustmsg_verify_api::{CheckRequest, CheckResponse, Decision, MessageStatus, MessageView};
