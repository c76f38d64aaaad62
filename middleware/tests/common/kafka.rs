//! Kafka for tests: the mock cluster (`trustmsg_kafka_mock::MockKafka`)
//! and a consumer that reads a topic from the beginning.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message as _};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use trustmsg_verify_api::kafka_headers;

// The cluster itself is the library's, shared with the bench and the e2e tests.
#[allow(unused_imports)]
pub use trustmsg_kafka_mock::MockKafka;

/// One consumed record, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    /// In record order.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl Record {
    /// The `trustmsg-message-id` header as a number.
    pub fn message_id(&self) -> u64 {
        let v = self
            .header(kafka_headers::MESSAGE_ID)
            .expect("every record carries trustmsg-message-id");
        std::str::from_utf8(v).unwrap().parse().unwrap()
    }

    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.as_deref())
    }

    /// Headers as a map (fails the test on duplicate names).
    pub fn header_map(&self) -> BTreeMap<String, Option<Vec<u8>>> {
        let mut m = BTreeMap::new();
        for (k, v) in &self.headers {
            assert!(
                m.insert(k.clone(), v.clone()).is_none(),
                "duplicate header {k}"
            );
        }
        m
    }
}

/// Reads every partition of one topic from the beginning.
pub struct TopicReader {
    consumer: BaseConsumer,
    pub records: Vec<Record>,
}

impl TopicReader {
    pub fn new(bootstrap: &str, topic: &str, partitions: i32) -> Self {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", format!("test-reader-{topic}"))
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .create()
            .expect("test consumer");
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition_offset(topic, p, Offset::Beginning)
                .unwrap();
        }
        consumer.assign(&tpl).expect("assign partitions");
        Self {
            consumer,
            records: Vec::new(),
        }
    }

    /// Polls for up to `wait` (blocking; call from `spawn_blocking` or accept
    /// the short block) and appends what arrived.
    fn poll_for(&mut self, wait: Duration) {
        let until = Instant::now() + wait;
        while Instant::now() < until {
            match self.consumer.poll(Duration::from_millis(50)) {
                Some(Ok(m)) => self.records.push(Record {
                    topic: m.topic().to_string(),
                    partition: m.partition(),
                    offset: m.offset(),
                    key: m.key().map(<[u8]>::to_vec),
                    value: m.payload().map(<[u8]>::to_vec),
                    headers: m
                        .headers()
                        .map(|h| {
                            h.iter()
                                .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                                .collect()
                        })
                        .unwrap_or_default(),
                }),
                Some(Err(e)) => tracing::debug!(error = %e, "test consumer"),
                None => {}
            }
        }
    }

    /// Reads until `done(records)` holds, failing the test after `deadline`.
    pub async fn read_until(
        &mut self,
        deadline: Duration,
        what: &str,
        mut done: impl FnMut(&[Record]) -> bool,
    ) {
        let start = Instant::now();
        loop {
            if done(&self.records) {
                return;
            }
            assert!(
                start.elapsed() < deadline,
                "timed out after {deadline:?} waiting for {what}; got {} records: {:?}",
                self.records.len(),
                self.records
                    .iter()
                    .map(Record::message_id)
                    .collect::<Vec<_>>()
            );
            self.poll_for(Duration::from_millis(100));
            tokio::task::yield_now().await;
        }
    }

    /// Keeps reading for `d` (to see that nothing else arrives).
    pub async fn read_for(&mut self, d: Duration) {
        let start = Instant::now();
        while start.elapsed() < d {
            self.poll_for(Duration::from_millis(100));
            tokio::task::yield_now().await;
        }
    }

    /// Ids of the records read, with how often each arrived.
    pub fn id_counts(&self) -> BTreeMap<u64, usize> {
        let mut m = BTreeMap::new();
        for r in &self.records {
            *m.entry(r.message_id()).or_insert(0) += 1;
        }
        m
    }
}
