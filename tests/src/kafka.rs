//! Kafka for tests: librdkafka's mock cluster on a thread of its own, with
//! fault injection, and the one consumer (a thread per topic feeding a
//! channel) with [`TopicReader`] to collect what a topic holds by now.
//! All of that is `trustmsg-kafka-mock`'s, shared with `trustmsg bench`.
//!
//! Here too: [`records_in`] and [`assert_holds_nothing`], for a test that
//! must show a topic holds nothing (or nothing but what it expects) by now.
//! Reading a topic for a while and finding it empty proves nothing (the
//! reader may not have reached the broker yet: a consumer group's first
//! join alone takes the mock 3 s), so these first write a sentinel record to
//! every partition and read each one up to its sentinel.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Message as _, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
pub use trustmsg_kafka_mock::{
    consume, record_headers, Consumed, MockKafka, RDKafkaApiKey, RDKafkaRespErr, StopFlag,
    TopicReader,
};

use crate::submit::RawRecord;

/// The header of the sentinel records [`records_in`] writes (its value
/// tells one call's sentinels from another's).
pub const SENTINEL_HEADER: &str = "trustmsg-test-sentinel";

/// How long [`records_in`] waits for the topic and for its sentinels.
const SENTINEL_WAIT: Duration = Duration::from_secs(30);

/// Every record `topic` of the cluster at `bootstrap` holds by now,
/// sentinels left out, in the order read per partition. It cannot come back
/// short by looking too early: a sentinel record is first written to each
/// partition, and each partition is read from its beginning until its
/// sentinel is read, so everything written before the sentinels is in the
/// answer. Fails the test when the topic has no partitions or a sentinel is
/// not read within 30 s.
///
/// The sentinels stay in the topic, and carry no `trustmsg-message-id`: a
/// [`TopicReader`] of the same topic would fail on them, so call this on a
/// topic read no other way (a dead-letter topic), or last.
pub async fn records_in(bootstrap: &str, topic: &str) -> Vec<RawRecord> {
    read_to_sentinels(bootstrap, topic, "read_uncommitted").await
}

/// [`records_in`] as a `read_committed` consumer reads them: what
/// transactions that were aborted (or are still open) wrote is left out.
pub async fn committed_records_in(bootstrap: &str, topic: &str) -> Vec<RawRecord> {
    read_to_sentinels(bootstrap, topic, "read_committed").await
}

async fn read_to_sentinels(bootstrap: &str, topic: &str, isolation: &str) -> Vec<RawRecord> {
    let nonce = format!("{}-{:?}", std::process::id(), Instant::now());
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .create()
        .expect("a producer");
    let partitions = partitions_of(&producer, topic);
    let mut sentinels = BTreeMap::new();
    for p in 0..partitions {
        let headers = OwnedHeaders::new().insert(Header {
            key: SENTINEL_HEADER,
            value: Some(nonce.as_str()),
        });
        let record = FutureRecord::<[u8], [u8]>::to(topic)
            .partition(p)
            .headers(headers)
            .payload(b"sentinel");
        let delivered = producer
            .send(record, SENTINEL_WAIT)
            .await
            .map_err(|(e, _)| e)
            .unwrap_or_else(|e| panic!("a sentinel to {topic} partition {p}: {e}"));
        sentinels.insert(p, delivered.offset);
    }

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        // Assigned, not subscribed: no group to join, nothing committed.
        .set("group.id", "trustmsg-test-sentinel-reader")
        .set("enable.auto.commit", "false")
        .set("isolation.level", isolation)
        .set("fetch.wait.max.ms", "10")
        .create()
        .expect("a consumer");
    let mut from_start = TopicPartitionList::new();
    for p in 0..partitions {
        from_start
            .add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&from_start).expect("assigned");
    let deadline = Instant::now() + SENTINEL_WAIT;
    let mut records = Vec::new();
    while !sentinels.is_empty() {
        assert!(
            Instant::now() < deadline,
            "the sentinels of {topic} (partition: offset {sentinels:?}) not read within \
             {SENTINEL_WAIT:?}; read before them: {records:#?}"
        );
        let Some(read) = consumer.poll(Duration::from_millis(50)) else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let Ok(m) = read else { continue };
        if sentinels.get(&m.partition()) == Some(&m.offset()) {
            sentinels.remove(&m.partition());
        }
        let headers = record_headers(&m);
        if headers.iter().any(|(k, _)| k == SENTINEL_HEADER) {
            continue;
        }
        records.push(RawRecord {
            partition: m.partition(),
            offset: m.offset(),
            key: m.key().map(<[u8]>::to_vec),
            value: m.payload().map(<[u8]>::to_vec),
            headers,
        });
    }
    records
}

/// Fails the test, listing them, when `topic` holds any record by now
/// (see [`records_in`], which it reads with: it cannot pass vacuously).
pub async fn assert_holds_nothing(bootstrap: &str, topic: &str) {
    let records = records_in(bootstrap, topic).await;
    assert!(
        records.is_empty(),
        "{topic} holds {} record(s): {records:#?}",
        records.len()
    );
}

/// How many partitions `topic` has, waiting for it to exist (the mock
/// creates a topic it is asked about).
fn partitions_of(producer: &FutureProducer, topic: &str) -> i32 {
    use rdkafka::producer::Producer as _;
    let deadline = Instant::now() + SENTINEL_WAIT;
    loop {
        let n = producer
            .client()
            .fetch_metadata(Some(topic), Duration::from_secs(5))
            .ok()
            .and_then(|md| {
                md.topics()
                    .iter()
                    .find(|t| t.name() == topic && t.error().is_none())
                    .map(|t| t.partitions().len())
            })
            .unwrap_or(0);
        if n > 0 {
            return i32::try_from(n).expect("a partition count fits i32");
        }
        assert!(Instant::now() < deadline, "{topic} never had partitions");
        std::thread::sleep(Duration::from_millis(200));
    }
}
