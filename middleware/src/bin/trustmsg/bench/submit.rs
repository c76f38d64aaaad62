//! The `submit` phase (issue 29, the Kafka way in): messages submitted as
//! signed prepare + commit records to the service's `--submit-topic`
//! instead of HTTP calls, and counted as the lifecycle counts its own: once
//! the bench's consumer has read the message from its target topic and its
//! row is SENT. So the two rates compare, and so do the statements per
//! message.
//!
//! The producer is what a producer that speaks Kafka would run: idempotent,
//! `acks=all`, librdkafka's other defaults, each message's prepare and commit
//! keyed by its message key (one partition, so in order) and enqueued back
//! to back without waiting for the prepare's acknowledgement, with at most
//! `--submit-in-flight` messages not yet acknowledged. It produces as fast as
//! that bound lets it, so the service reads a backlog and the phase measures
//! how fast the Kafka way in takes messages, not how fast the bench makes
//! them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rdkafka::config::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use serde::Serialize;
use tokio::sync::Semaphore;
use trustmsg_kafka_mock as kafka;
use trustmsg_verify_api::submit::{self, Op, Signed};

use super::percentiles::Percentiles;
use super::server::Db;
use super::wait::wait_until;
use super::PAYLOAD_BYTES;

/// The service's `--submit-topic` in the bench.
pub(crate) const SUBMIT_TOPIC: &str = "bench.submit";
/// The target topic of the submitted messages (a consumer of its own).
pub(crate) const SUBMITTED_TOPIC: &str = "trustmsg-bench-submitted";
/// The producer the records are signed for.
pub(crate) const BIZ_ID: &str = "bench-submit";

/// What the submit phase measured.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct SubmitResult {
    /// Messages submitted (prepare + commit records), consumed from their
    /// target topic and marked SENT, per second: from the first record
    /// handed to the producer to the last message consumed.
    pub(crate) throughput_per_s: f64,
    /// `throughput_per_s` ÷ the lifecycle's (HTTP) throughput.
    pub(crate) vs_lifecycle: f64,
    /// Messages counted.
    pub(crate) messages: usize,
    /// Most messages whose records were not yet all acknowledged.
    pub(crate) in_flight: usize,
    /// From a message's prepare handed to the producer to its commit's
    /// acknowledgement (`acks=all`): what the producer waits.
    pub(crate) produce: Percentiles,
    /// From the commit record handed to the producer to the message read
    /// from its target topic: the Kafka way's commit→Kafka, queueing in the
    /// backlog included.
    pub(crate) commit_to_kafka: Percentiles,
    /// From the commit record's acknowledgement to the message read from
    /// its target topic (0 for one read before the bench saw the ack).
    pub(crate) ack_to_kafka: Percentiles,
    /// Mean batch sizes in the service over the phase.
    pub(crate) batches: BatchSizes,
    /// One message at a time (after the phase): from its prepare and commit
    /// handed to the producer to the message read from its target topic.
    pub(crate) one_at_a_time: Percentiles,
}

/// Mean batch sizes over a phase, from the service's own histograms
/// (`/metrics`: Δsum ÷ Δcount); None when there was no such batch.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub(crate) struct BatchSizes {
    /// Records applied together from `--submit-topic`
    /// (`trustmsg_submit_batch_size`).
    pub(crate) submit: Option<f64>,
    /// How many such batches.
    pub(crate) submit_batches: u64,
    /// Prepares per multi-row INSERT (`trustmsg_prepare_batch_size`).
    pub(crate) prepare: Option<f64>,
    /// Decisions per batched UPDATE (`trustmsg_decide_batch_size`).
    pub(crate) decide: Option<f64>,
}

/// The `_sum` and `_count` of the batch-size histograms in one scrape.
#[derive(Debug, Clone, Default)]
pub(crate) struct BatchCounters(BTreeMap<String, f64>);

const HISTOGRAMS: [&str; 3] = [
    "trustmsg_submit_batch_size",
    "trustmsg_prepare_batch_size",
    "trustmsg_decide_batch_size",
];

impl BatchCounters {
    /// Reads them from Prometheus text (a histogram not yet recorded is 0).
    pub(crate) fn parse(text: &str) -> Self {
        Self(
            text.lines()
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| {
                    let (name, value) = l.split_once(' ')?;
                    let base = name
                        .strip_suffix("_sum")
                        .or_else(|| name.strip_suffix("_count"))?;
                    HISTOGRAMS.contains(&base).then_some(())?;
                    Some((name.to_string(), value.trim().parse().ok()?))
                })
                .collect(),
        )
    }

    fn get(&self, name: &str) -> f64 {
        self.0.get(name).copied().unwrap_or(0.0)
    }
}

impl BatchSizes {
    pub(crate) fn between(before: &BatchCounters, after: &BatchCounters) -> Self {
        let delta = |n: &str| after.get(n) - before.get(n);
        let mean = |h: &str| {
            let count = delta(&format!("{h}_count"));
            (count > 0.0).then(|| delta(&format!("{h}_sum")) / count)
        };
        Self {
            submit: mean(HISTOGRAMS[0]),
            submit_batches: delta(&format!("{}_count", HISTOGRAMS[0])).max(0.0) as u64,
            prepare: mean(HISTOGRAMS[1]),
            decide: mean(HISTOGRAMS[2]),
        }
    }
}

/// Signs and produces one message's records.
struct Producer {
    producer: FutureProducer,
    secret: String,
    payload: Vec<u8>,
    none: BTreeMap<String, String>,
}

impl Producer {
    fn new(brokers: &str, secret: &str) -> anyhow::Result<Self> {
        let producer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .create()
            .context("the submit phase's producer")?;
        Ok(Self {
            producer,
            secret: secret.to_string(),
            payload: vec![b'x'; PAYLOAD_BYTES],
            none: BTreeMap::new(),
        })
    }

    /// Hands `op`'s signed record of `message_key` to the producer; its
    /// target record is keyed by the message key too, which is how the
    /// bench's consumer tells the messages apart.
    fn send(&self, op: Op, message_key: &str) -> anyhow::Result<DeliveryFuture> {
        let (topic, key, value): (&str, Option<&str>, &[u8]) = match op {
            Op::Prepare => (SUBMITTED_TOPIC, Some(message_key), &self.payload),
            Op::Commit | Op::Rollback => ("", None, b""),
        };
        let signature = submit::sign(
            &self.secret,
            &Signed {
                op,
                biz_id: BIZ_ID,
                message_key,
                topic,
                key,
                headers: &self.none,
                value,
            },
        )?;
        let mut headers = OwnedHeaders::new_with_capacity(6)
            .insert(Header {
                key: submit::OP,
                value: Some(op.as_str()),
            })
            .insert(Header {
                key: submit::BIZ_ID,
                value: Some(BIZ_ID),
            })
            .insert(Header {
                key: submit::MESSAGE_KEY,
                value: Some(message_key),
            });
        if op == Op::Prepare {
            headers = headers
                .insert(Header {
                    key: submit::TOPIC,
                    value: Some(topic),
                })
                .insert(Header {
                    key: submit::KEY,
                    value: key,
                });
        }
        headers = headers.insert(Header {
            key: submit::SIGNATURE,
            value: Some(signature.as_str()),
        });
        let record = FutureRecord::to(SUBMIT_TOPIC)
            .key(message_key)
            .headers(headers)
            .payload(value);
        self.producer
            .send_result(record)
            .map_err(|(e, _)| anyhow::anyhow!("producing a {} record: {e}", op.as_str()))
    }
}

/// Waits for a record's acknowledgement.
async fn acked(delivery: DeliveryFuture) -> anyhow::Result<()> {
    delivery
        .await
        .context("the producer went away")?
        .map_err(|(e, _)| anyhow::anyhow!("{SUBMIT_TOPIC} refused a record: {e}"))?;
    Ok(())
}

/// The submit phase's producer, warmed up.
pub(crate) struct Submitter {
    producer: Producer,
}

/// The message submitted before the clock starts.
const WARM_UP: &str = "s-warm-up";

impl Submitter {
    /// A producer signing with `secret`, once one message went all the way
    /// through: the producer's start (metadata, its idempotent producer id)
    /// and the service's first fetch are not what the phase measures.
    pub(crate) async fn warmed_up(
        brokers: &str,
        secret: &str,
        consumed: &mut tokio::sync::mpsc::UnboundedReceiver<kafka::Consumed>,
    ) -> anyhow::Result<Self> {
        let producer = Producer::new(brokers, secret)?;
        let prepare = producer.send(Op::Prepare, WARM_UP)?;
        let commit = producer.send(Op::Commit, WARM_UP)?;
        acked(prepare).await?;
        acked(commit).await?;
        let key = HashMap::from([(WARM_UP.as_bytes().to_vec(), ())]);
        await_keys(consumed, &key, Duration::from_secs(60)).await?;
        Ok(Self { producer })
    }

    /// Submits `messages` messages as signed prepare + commit records (at
    /// most `in_flight` unacknowledged), and waits until each was read from
    /// its target topic and its row is SENT.
    pub(crate) async fn run(
        &self,
        pool: &Db,
        consumed: &mut tokio::sync::mpsc::UnboundedReceiver<kafka::Consumed>,
        messages: usize,
        in_flight: usize,
        lifecycle_per_s: f64,
    ) -> anyhow::Result<SubmitResult> {
        let producer = &self.producer;
        let limit = Arc::new(Semaphore::new(in_flight.max(1)));
        let mut handed: HashMap<Vec<u8>, (Instant, Instant)> = HashMap::with_capacity(messages);
        let mut acks = Vec::with_capacity(messages);
        let start = Instant::now();
        for i in 0..messages {
            let permit = limit.clone().acquire_owned().await?;
            let key = format!("s-{i}");
            let prepared_at = Instant::now();
            let prepare = producer.send(Op::Prepare, &key)?;
            let committed_at = Instant::now();
            let commit = producer.send(Op::Commit, &key)?;
            handed.insert(key.clone().into_bytes(), (prepared_at, committed_at));
            acks.push(tokio::spawn(async move {
                acked(prepare).await?;
                acked(commit).await?;
                drop(permit);
                anyhow::Ok((key.into_bytes(), Instant::now()))
            }));
        }
        finish(
            pool,
            consumed,
            handed,
            acks,
            start,
            in_flight,
            lifecycle_per_s,
        )
        .await
    }
}

impl Submitter {
    /// `n` messages one after the other, each a prepare and a commit record
    /// handed over together, the next once the last was read from its
    /// target topic: the Kafka way's latency with nothing else going on
    /// (the consumer's fetch, a batch of two records, the forwarder).
    pub(crate) async fn one_at_a_time(
        &self,
        consumed: &mut tokio::sync::mpsc::UnboundedReceiver<kafka::Consumed>,
        n: usize,
    ) -> anyhow::Result<Percentiles> {
        let mut samples = Vec::with_capacity(n);
        for i in 0..n {
            let key = format!("s-one-{i}");
            let t = Instant::now();
            let prepare = self.producer.send(Op::Prepare, &key)?;
            let commit = self.producer.send(Op::Commit, &key)?;
            let (prepare, commit) = tokio::join!(acked(prepare), acked(commit));
            prepare?;
            commit?;
            let keys = HashMap::from([(key.into_bytes(), ())]);
            let (read, _) = await_keys(consumed, &keys, Duration::from_secs(60)).await?;
            samples.extend(read.values().map(|at| at.saturating_duration_since(t)));
        }
        Ok(Percentiles::of(samples))
    }
}

type Acked = tokio::task::JoinHandle<anyhow::Result<(Vec<u8>, Instant)>>;

/// Waits for the acknowledgements, the records and the SENT rows, and sums up.
async fn finish(
    pool: &Db,
    consumed: &mut tokio::sync::mpsc::UnboundedReceiver<kafka::Consumed>,
    handed: HashMap<Vec<u8>, (Instant, Instant)>,
    acks: Vec<Acked>,
    start: Instant,
    in_flight: usize,
    lifecycle_per_s: f64,
) -> anyhow::Result<SubmitResult> {
    let messages = handed.len();
    let mut acked_at = HashMap::with_capacity(messages);
    for a in futures::future::join_all(acks).await {
        let (key, at) = a??;
        acked_at.insert(key, at);
    }

    let (read_at, last) = await_keys(consumed, &handed, Duration::from_secs(300)).await?;
    // A message counts only once its row is SENT as well (every prepare
    // is written by now: its commit reached Kafka).
    wait_until(
        pool,
        "SELECT COUNT(*) FROM messages WHERE (status = 'PREPARED' OR \
         (status = 'COMMITTED' AND send_status = 'PENDING')) AND biz_id = 'bench-submit'",
        0,
    )
    .await?;
    let throughput_per_s = messages as f64 / last.duration_since(start).as_secs_f64();
    let mut produce = Vec::with_capacity(messages);
    let mut commit_to_kafka = Vec::with_capacity(messages);
    let mut ack_to_kafka = Vec::with_capacity(messages);
    for (key, (prepared, committed)) in &handed {
        let (read, ack) = (read_at[key], acked_at[key]);
        produce.push(ack.saturating_duration_since(*prepared));
        commit_to_kafka.push(read.saturating_duration_since(*committed));
        ack_to_kafka.push(read.saturating_duration_since(ack));
    }
    Ok(SubmitResult {
        throughput_per_s,
        vs_lifecycle: if lifecycle_per_s > 0.0 {
            throughput_per_s / lifecycle_per_s
        } else {
            0.0
        },
        messages,
        in_flight,
        produce: Percentiles::of(produce),
        commit_to_kafka: Percentiles::of(commit_to_kafka),
        ack_to_kafka: Percentiles::of(ack_to_kafka),
        batches: BatchSizes::default(),
        one_at_a_time: Percentiles::default(),
    })
}

/// Waits until a record keyed by each of `keys` was read; returns when each
/// was first read and when the last one was.
async fn await_keys<T>(
    consumed: &mut tokio::sync::mpsc::UnboundedReceiver<kafka::Consumed>,
    keys: &HashMap<Vec<u8>, T>,
    timeout: Duration,
) -> anyhow::Result<(HashMap<Vec<u8>, Instant>, Instant)> {
    let mut seen = HashMap::with_capacity(keys.len());
    let mut last = Instant::now();
    let deadline = tokio::time::Instant::now() + timeout;
    while seen.len() < keys.len() {
        let c = tokio::time::timeout_at(deadline, consumed.recv())
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "only {} of {} submitted messages reached {SUBMITTED_TOPIC} in {timeout:?}",
                    seen.len(),
                    keys.len()
                )
            })?
            .context("consumer stopped")?;
        let Some(key) = c.key else { continue };
        if keys.contains_key(&key) && !seen.contains_key(&key) {
            seen.insert(key, c.at);
            last = c.at;
        }
    }
    Ok((seen, last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_sizes_are_the_mean_of_what_the_phase_added_to_each_histogram() {
        let before = BatchCounters::parse(
            "# TYPE trustmsg_submit_batch_size summary\n\
             trustmsg_submit_batch_size{quantile=\"0.5\"} 7\n\
             trustmsg_submit_batch_size_sum 100\n\
             trustmsg_submit_batch_size_count 10\n\
             trustmsg_prepare_batch_size_sum 50\n\
             trustmsg_prepare_batch_size_count 25\n\
             trustmsg_other_sum 9\n",
        );
        let after = BatchCounters::parse(
            "trustmsg_submit_batch_size_sum 1100\n\
             trustmsg_submit_batch_size_count 14\n\
             trustmsg_prepare_batch_size_sum 550\n\
             trustmsg_prepare_batch_size_count 27\n",
        );
        assert_eq!(
            BatchSizes::between(&before, &after),
            BatchSizes {
                submit: Some(250.0),
                submit_batches: 4,
                prepare: Some(250.0),
                decide: None,
            }
        );
    }
}
