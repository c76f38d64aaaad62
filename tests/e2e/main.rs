//! End-to-end tests of the whole loop: the real `trustmsg` binary as a child
//! process, MariaDB, Kafka through librdkafka's mock cluster, and producers
//! built with the SDK.

mod harness;

mod alert_outbox;
mod backlog;
mod barrier_race;
mod broker_restart;
mod bulk;
mod canary;
mod dev;
mod five_classes;
mod frozen_db;
mod kill9;
mod memory;
mod no_forwarder;
mod tail;
mod verify_lease;
