//! The Kafka way in (docs/kafka-submit.md): producers that already speak
//! Kafka submit prepare, commit and rollback as signed records to
//! `--submit-topic`, and this part applies them exactly as the HTTP API
//! would, through the same intake ([`crate::intake`]): the same validation and limits, the
//! same idempotence, states, check-back and forwarding; decisions are
//! audited with actor `kafka`.
//!
//! What it guarantees, and how:
//! - **Never lost.** A record's offset is committed only after what it did
//!   is durable: its row written, its commit parked for its prepare, or the
//!   record on the dead-letter topic with the broker's acknowledgement. A
//!   batch is applied whole before its offsets are committed, and the next
//!   batch is only read after that, so a rebalance (served while reading)
//!   never finds a batch half-done. A crash, a rebalance or a database that
//!   goes away mid-batch only means some records are read again; each
//!   operation is idempotent (a replayed prepare is the same message, a
//!   replayed decision is already decided), so nothing is applied twice in
//!   a way anyone can see.
//! - **One bad record never blocks its partition.** A record that cannot be
//!   applied (malformed, unsigned or wrongly signed, an unknown producer,
//!   a refused prepare or decision) goes to `<topic>.dlq` with its value
//!   and headers plus `trustmsg-error-code` and `trustmsg-error`. Only an
//!   unreachable or failing database is waited out (that would fail every
//!   record alike), never dead-lettered.
//! - **Order.** Within a batch a message's operations are applied in the
//!   order its records came (a commit whose prepare comes later in the same
//!   batch waits for it), and decisions keep the order of their partition,
//!   so an ordered producer's commits take their keys' order from the
//!   submit topic.
//! - **A commit before its prepare** (another partition) is parked in the
//!   database (`submit_waiting`), visible to operators, and retried by
//!   [`waiting`] until its prepare is in or `--submit-commit-wait` runs out
//!   (then it is dead-lettered with `message_not_found`).
//! - **Group commit.** A batch is the records ready to read (up to
//!   `--submit-batch`); its prepares are written as multi-row INSERTs and
//!   its decisions as batched UPDATEs ([`crate::group_commit::producer_writes`]), so the Kafka way
//!   costs no more statements per message than the HTTP way.

mod apply;
mod dead_letters;
pub(crate) mod record;
mod waiting;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::message::{Headers, Message as _};
use rdkafka::ClientContext;
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::intake::Intake;
use crate::net::kafka_settings::Redacted;
use apply::Ingest;
use dead_letters::DeadLetters;
use record::Record;

/// `--submit-*`, checked.
#[derive(Clone)]
pub(crate) struct SubmitSettings {
    /// `--submit-topic`.
    pub(crate) topic: String,
    /// `<topic>.dlq`.
    pub(crate) dead_letters: String,
    /// `--submit-group`.
    pub(crate) group: String,
    /// `--kafka-brokers`.
    pub(crate) brokers: String,
    /// `--kafka-config` (TLS, SASL), for the consumer and the dead-letter producer.
    pub(crate) extra: Vec<(String, String)>,
    /// `--submit-commit-wait`.
    pub(crate) commit_wait: Duration,
    /// `--submit-batch`.
    pub(crate) batch: usize,
    /// `--kafka-message-timeout`: how long a dead-letter record may take.
    pub(crate) kafka_timeout: Duration,
}

impl std::fmt::Debug for SubmitSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubmitSettings")
            .field("topic", &self.topic)
            .field("group", &self.group)
            .field("brokers", &self.brokers)
            .field("extra", &Redacted(&self.extra))
            .field("commit_wait", &self.commit_wait)
            .field("batch", &self.batch)
            .finish()
    }
}

impl SubmitSettings {
    fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        self.apply(&mut c);
        c
    }

    /// The consumer's settings: the defaults below, `--kafka-config` over
    /// them, then what the contract needs.
    fn consumer_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        // A broker answers a fetch as soon as a record arrives, but only
        // after this long when none does; librdkafka's mock cluster (the
        // tests, `trustmsg dev`) waits it out whatever arrives, and 500 ms
        // (the default) would hold each lone record that long. An idle
        // consumer then asks ten times a second instead of twice.
        c.set("fetch.wait.max.ms", "100");
        self.apply(&mut c);
        c
    }

    fn apply(&self, c: &mut ClientConfig) {
        for (k, v) in &self.extra {
            c.set(k, v);
        }
        c.set("bootstrap.servers", &self.brokers);
    }
}

/// Describes the metrics of the Kafka way in.
pub(crate) fn describe_metrics() {
    metrics::describe_counter!(
        "trustmsg_submit_records_total",
        "Records read from --submit-topic, by op (prepare, commit, rollback, unknown) and outcome (applied, waiting, dead_letter)"
    );
    metrics::describe_counter!(
        "trustmsg_submit_dead_letters_total",
        "Records sent to the dead-letter topic, by error code"
    );
    metrics::describe_gauge!(
        "trustmsg_submit_waiting",
        "Submitted commits waiting for their prepare (all instances)"
    );
    metrics::describe_histogram!(
        "trustmsg_submit_batch_size",
        "Records applied together from --submit-topic"
    );
}

/// Starts the consumer of `--submit-topic` and the retries of waiting
/// commits; both stop when `shutdown` is cancelled.
pub(crate) fn spawn(
    intake: Intake,
    settings: SubmitSettings,
    shutdown: CancellationToken,
) -> anyhow::Result<(JoinHandle<()>, JoinHandle<()>)> {
    describe_metrics();
    let consumer: SubmitConsumer = settings
        .consumer_config()
        .set("group.id", &settings.group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        // A group's first start reads what producers submitted before it.
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed")
        .create_with_context(Rebalances)
        .context("invalid Kafka consumer configuration for --submit-topic")?;
    consumer
        .subscribe(&[&settings.topic])
        .with_context(|| format!("subscribing to --submit-topic {}", settings.topic))?;
    let dead = Arc::new(DeadLetters::new(&settings)?);
    let wake = Arc::new(Notify::new());
    let ingest = Arc::new(Ingest::new(intake, settings.clone(), dead, wake.clone()));
    tracing::info!(
        topic = %settings.topic,
        group = %settings.group,
        dead_letters = %settings.dead_letters,
        "consuming prepare, commit and rollback records"
    );
    let waiting = tokio::spawn(waiting::run(ingest.clone(), wake, shutdown.clone()));
    let consuming = tokio::spawn(consume(Arc::new(consumer), ingest, settings, shutdown));
    Ok((consuming, waiting))
}

/// The submit topic's consumer.
type SubmitConsumer = StreamConsumer<Rebalances>;

/// Says which of the submit topic's partitions this instance was given or
/// lost in each rebalance of the group: where another instance's share went
/// when one stopped or joined.
struct Rebalances;

impl ClientContext for Rebalances {}

impl ConsumerContext for Rebalances {
    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let partitions = |list: &rdkafka::TopicPartitionList| {
            list.elements()
                .iter()
                .map(|e| format!("{}/{}", e.topic(), e.partition()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match rebalance {
            Rebalance::Assign(list) => {
                tracing::info!(partitions = %partitions(list), "Kafka way in: partitions assigned to this instance");
            }
            Rebalance::Revoke(list) => {
                tracing::info!(partitions = %partitions(list), "Kafka way in: partitions revoked from this instance");
            }
            Rebalance::Error(e) => {
                tracing::warn!(error = %e, "Kafka way in: the group's rebalance failed");
            }
        }
    }
}

/// Reads batches, applies each whole, then commits its offsets.
async fn consume(
    consumer: Arc<SubmitConsumer>,
    ingest: Arc<Ingest>,
    settings: SubmitSettings,
    shutdown: CancellationToken,
) {
    let mut batches = consumer.stream().ready_chunks(settings.batch);
    loop {
        let chunk = tokio::select! {
            () = shutdown.cancelled() => break,
            chunk = batches.next() => chunk,
        };
        let Some(chunk) = chunk else { break };
        let mut records = Vec::with_capacity(chunk.len());
        for read in chunk {
            match read {
                Ok(m) => records.push(Record {
                    partition: m.partition(),
                    offset: m.offset(),
                    key: m.key().map(<[u8]>::to_vec),
                    headers: m
                        .headers()
                        .map(|h| {
                            h.iter()
                                .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                                .collect()
                        })
                        .unwrap_or_default(),
                    value: m.payload().map(<[u8]>::to_vec).unwrap_or_default(),
                }),
                Err(e) => {
                    tracing::warn!(error = %e, topic = %settings.topic, "reading submitted records")
                }
            }
        }
        if records.is_empty() {
            continue;
        }
        metrics::histogram!("trustmsg_submit_batch_size").record(records.len() as f64);
        if !ingest.apply(&records, &shutdown).await {
            // Shutting down with the batch not durable: its offsets stay,
            // and it is read again (by us or another instance).
            break;
        }
        commit_offsets(&consumer, &settings.topic, &records).await;
    }
    drop(batches);
    tracing::info!(topic = %settings.topic, "stopped consuming submitted records");
}

/// Commits, per partition, the offset after the last record of the batch.
/// A failed commit (a rebalance took the partition meanwhile) is only
/// logged: the records are read again and change nothing.
async fn commit_offsets(consumer: &Arc<SubmitConsumer>, topic: &str, records: &[Record]) {
    let mut next: std::collections::BTreeMap<i32, i64> = Default::default();
    for r in records {
        let n = next.entry(r.partition).or_insert(r.offset + 1);
        *n = (*n).max(r.offset + 1);
    }
    let mut offsets = TopicPartitionList::with_capacity(next.len());
    for (partition, offset) in next {
        if let Err(e) = offsets.add_partition_offset(topic, partition, Offset::Offset(offset)) {
            tracing::warn!(error = %e, partition, offset, "an offset to commit");
        }
    }
    let consumer = consumer.clone();
    // A synchronous commit: the next batch is read once the group has it.
    let committed =
        tokio::task::spawn_blocking(move || consumer.commit(&offsets, CommitMode::Sync)).await;
    match committed {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(
            error = %e,
            "committing submitted records' offsets failed; they will be read again and change nothing"
        ),
        Err(e) => tracing::warn!(error = %e, "committing offsets"),
    }
}
