//! Kafka for tests: librdkafka's `MockCluster` (it is `!Send`, so it lives on a
//! thread of its own and takes commands over a channel) and a consumer that
//! reads a topic from the beginning.

use std::collections::BTreeMap;
use std::sync::mpsc as std_mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message as _};
use rdkafka::mocking::MockCluster;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use trustmsg_verify_api::kafka_headers;

enum Cmd {
    CreateTopic(String, i32),
    BrokerDown,
    BrokerUp,
    RequestErrors(RDKafkaApiKey, Vec<RDKafkaRespErr>),
    ClearRequestErrors(RDKafkaApiKey),
    RoundTrip(Duration),
}

/// A command for the cluster thread and where to report how it went.
type Request = (Cmd, std_mpsc::SyncSender<Result<(), String>>);

/// A mock Kafka cluster on its own thread; dropped with the handle.
pub struct MockKafka {
    bootstrap: String,
    tx: Option<std_mpsc::Sender<Request>>,
    thread: Option<JoinHandle<()>>,
}

impl MockKafka {
    /// Starts a cluster of `brokers` brokers.
    pub fn start(brokers: i32) -> Self {
        let (tx, rx) = std_mpsc::channel::<Request>();
        let (boot_tx, boot_rx) = std_mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("mock-kafka".into())
            .spawn(move || {
                let cluster = MockCluster::new(brokers).expect("mock cluster starts");
                boot_tx.send(cluster.bootstrap_servers()).unwrap();
                while let Ok((cmd, reply)) = rx.recv() {
                    let r = match cmd {
                        Cmd::CreateTopic(t, partitions) => cluster
                            .create_topic(&t, partitions, brokers.min(3))
                            .map_err(|e| e.to_string()),
                        Cmd::BrokerDown => cluster.broker_down(-1).map_err(|e| e.to_string()),
                        Cmd::BrokerUp => cluster.broker_up(-1).map_err(|e| e.to_string()),
                        Cmd::RequestErrors(key, errs) => {
                            cluster.request_errors(key, &errs);
                            Ok(())
                        }
                        Cmd::RoundTrip(d) => (1..=brokers)
                            .try_for_each(|b| cluster.broker_round_trip_time(b, d))
                            .map_err(|e| e.to_string()),
                        Cmd::ClearRequestErrors(key) => {
                            cluster.clear_request_errors(key);
                            Ok(())
                        }
                    };
                    let _ = reply.send(r);
                }
            })
            .expect("spawn mock kafka thread");
        let bootstrap = boot_rx.recv().expect("mock cluster bootstrap servers");
        Self {
            bootstrap,
            tx: Some(tx),
            thread: Some(thread),
        }
    }

    /// `host:port,…` of the mock brokers.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    fn call(&self, cmd: Cmd) {
        let (reply_tx, reply_rx) = std_mpsc::sync_channel(1);
        self.tx
            .as_ref()
            .unwrap()
            .send((cmd, reply_tx))
            .expect("mock kafka thread alive");
        reply_rx
            .recv()
            .expect("mock kafka reply")
            .expect("mock kafka command");
    }

    pub fn create_topic(&self, topic: &str, partitions: i32) {
        self.call(Cmd::CreateTopic(topic.to_string(), partitions));
    }

    /// Every broker stops accepting connections.
    pub fn brokers_down(&self) {
        self.call(Cmd::BrokerDown);
    }

    pub fn brokers_up(&self) {
        self.call(Cmd::BrokerUp);
    }

    /// The next requests of kind `key` fail with these errors, in order.
    pub fn request_errors(&self, key: RDKafkaApiKey, errs: &[RDKafkaRespErr]) {
        self.call(Cmd::RequestErrors(key, errs.to_vec()));
    }

    /// Every broker answers each request only after `d`.
    pub fn round_trip(&self, d: Duration) {
        self.call(Cmd::RoundTrip(d));
    }

    pub fn clear_request_errors(&self, key: RDKafkaApiKey) {
        self.call(Cmd::ClearRequestErrors(key));
    }
}

impl Drop for MockKafka {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

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
