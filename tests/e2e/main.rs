//! End-to-end tests of the whole loop: the real `trustmsg` binary as a child
//! process, MariaDB, Kafka through librdkafka's mock cluster, and producers
//! built with the SDK.

mod harness;

mod alert_outbox;
mod alert_signing;
mod archive;
mod backlog;
mod barrier_race;
mod broker_restart;
mod bulk;
mod canary;
mod console_overview;
mod delay;
mod delay_ordering;
mod dev;
mod exactly_once;
mod five_classes;
mod flow;
mod frozen_db;
mod https;
mod kafka_tls;
mod kill9;
mod ledger;
mod memory;
mod mysql_tls;
mod no_forwarder;
mod ordering;
mod outbox;
mod outbox_relay;
mod partitions;
mod postgres_store;
mod private_postgres;
mod producer_wait;
mod real_kafka;
mod sdk_scenarios;
mod shard_lists;
mod shards;
mod startup_refusals;
mod submit;
mod submit_faults;
mod table_sizes;
mod tail;
mod topics;
mod tracing;
mod url_secrets;
mod verify_lease;
