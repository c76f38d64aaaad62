//! Integration tests of the producer SDK: the client against the real trustmsg
//! service and against a local server that fails on purpose, the check-back
//! router over real HTTP, the barrier, the inbox and the outbox on the real MariaDB/MySQL and
//! PostgreSQL servers, and
//! the Kafka way in (`Submitter`) against librdkafka's mock cluster.
//! The service, the databases and the local servers come from the test kit
//! (`trustmsg-tests`).

mod barrier;
mod check_router;
mod client;
mod conformance;
mod inbox;
mod outbox;
mod postgres;
mod retry;
mod submit;
mod transaction;
