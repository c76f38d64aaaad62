//! Kafka without a broker to install, for `trustmsg dev`, `trustmsg bench` and the tests: an
//! in-process librdkafka mock cluster (it speaks the Kafka protocol over TCP to
//! librdkafka clients) with the fault injection the tests use, and one consumer.
//!
//! The consumer is a thread per topic that reads every partition from the
//! beginning and hands each record over a channel ([`consume`]); the bench
//! awaits records as they come, and [`TopicReader`] collects them on demand for
//! tests that ask "what is in the topic by now?". Every record trustmsg
//! produces carries a `trustmsg-message-id` header; a record without one is
//! never passed on, and [`TopicReader`] fails the test when it meets one, so
//! an unlabelled record cannot go unnoticed.
//!
//! Not part of the service: the `trustmsg` library never links it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::thread;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::mocking::MockCluster;
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::mpsc::UnboundedReceiver;
use trustmsg_verify_api::kafka_headers;

/// The request kinds and error codes [`MockKafka::request_errors`] takes.
pub use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};

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

/// librdkafka's mock cluster on a thread of its own (it is `!Send`), taking
/// commands over a channel: topics, and the fault injection the tests use
/// (brokers down, request errors, slow round trips). Dropping the handle shuts
/// it down.
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

    /// Creates `topic` with `partitions` partitions.
    pub fn create_topic(&self, topic: &str, partitions: i32) {
        self.call(Cmd::CreateTopic(topic.to_string(), partitions));
    }

    /// Every broker stops accepting connections.
    pub fn brokers_down(&self) {
        self.call(Cmd::BrokerDown);
    }

    /// Every broker accepts connections again.
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

    /// Forgets the request errors still queued for `key`.
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
#[derive(Debug, Clone)]
pub struct Consumed {
    /// The `trustmsg-message-id` header.
    pub message_id: u64,
    /// When the consumer read it.
    pub at: Instant,
    /// The record's topic.
    pub topic: String,
    /// The partition it was read from.
    pub partition: i32,
    /// Its offset in that partition.
    pub offset: i64,
    /// The record's key (`None`: no key, as opposed to an empty one).
    pub key: Option<Vec<u8>>,
    /// The record's value (`None`: a null value, as opposed to an empty one).
    pub payload: Option<Vec<u8>>,
    /// All headers in record order; `None` is a null header value.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl Consumed {
    /// The value of the first header called `name`, if it has one.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.as_deref())
    }

    /// The headers as a map; panics on a name that appears twice, which no
    /// record of trustmsg may carry.
    pub fn header_map(&self) -> BTreeMap<String, Option<Vec<u8>>> {
        let mut m = BTreeMap::new();
        for (k, v) in &self.headers {
            assert!(
                m.insert(k.clone(), v.clone()).is_none(),
                "duplicate header {k} in {self:?}"
            );
        }
        m
    }
}

/// What the consumer thread shares with whoever started it.
#[derive(Debug, Default)]
struct Shared {
    stop: AtomicBool,
    /// Records read without a usable `trustmsg-message-id` header.
    unlabelled: AtomicU64,
}

/// How long a fetch may wait for records. librdkafka's mock broker holds a
/// fetch that finds nothing for this whole time and does not answer early when
/// a record arrives, so a record waits up to this long to be read.
const FETCH_WAIT: &str = "5";

/// [`FETCH_WAIT`] of a consumer that measures latency: a record is read within
/// about a millisecond of reaching the mock broker, for a fetch per
/// millisecond while there is nothing to read (a real broker answers a waiting
/// fetch as soon as a record arrives, so this only takes the mock's delay out
/// of the measurement).
const EAGER_FETCH_WAIT: &str = "1";

/// Reads every partition of `topic` from the beginning on a thread and sends
/// each record that carries a message id; stops when the receiver is dropped
/// or `stop` is set. Waits up to 30 s for the topic to exist. Fetches eagerly
/// (see [`EAGER_FETCH_WAIT`]): meant for measuring latency.
pub fn consume(
    bootstrap: &str,
    topic: &str,
) -> anyhow::Result<(UnboundedReceiver<Consumed>, StopFlag)> {
    let (rx, shared) = spawn_consumer(bootstrap, topic, EAGER_FETCH_WAIT)?;
    Ok((rx, StopFlag(shared)))
}

fn spawn_consumer(
    bootstrap: &str,
    topic: &str,
    fetch_wait_ms: &str,
) -> anyhow::Result<(UnboundedReceiver<Consumed>, Arc<Shared>)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "trustmsg-bench")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", fetch_wait_ms)
        .create()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let partitions = loop {
        let md = consumer.fetch_metadata(Some(topic), Duration::from_secs(5))?;
        let n = md
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .map(|t| t.partitions().len())
            .unwrap_or(0);
        if n > 0 {
            break n;
        }
        anyhow::ensure!(Instant::now() < deadline, "topic {topic} never appeared");
        thread::sleep(Duration::from_millis(200));
    };
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p as i32, Offset::Beginning)?;
    }
    consumer.assign(&tpl)?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let shared = Arc::new(Shared::default());
    let flag = shared.clone();
    thread::Builder::new()
        .name(format!("consume-{topic}"))
        .spawn(move || {
            while !flag.stop.load(Ordering::Relaxed) {
                match consumer.poll(Duration::from_millis(50)) {
                    Some(Ok(m)) => {
                        let at = Instant::now();
                        let headers: Vec<(String, Option<Vec<u8>>)> = m
                            .headers()
                            .map(|h| {
                                h.iter()
                                    .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                                    .collect()
                            })
                            .unwrap_or_default();
                        let id = headers
                            .iter()
                            .find(|(k, _)| k == kafka_headers::MESSAGE_ID)
                            .and_then(|(_, v)| std::str::from_utf8(v.as_deref()?).ok())
                            .and_then(|v| v.parse().ok());
                        let Some(message_id) = id else {
                            flag.unlabelled.fetch_add(1, Ordering::Relaxed);
                            continue;
                        };
                        let record = Consumed {
                            message_id,
                            at,
                            topic: m.topic().to_string(),
                            partition: m.partition(),
                            offset: m.offset(),
                            key: m.key().map(<[u8]>::to_vec),
                            payload: m.payload().map(<[u8]>::to_vec),
                            headers,
                        };
                        if tx.send(record).is_err() {
                            return;
                        }
                    }
                    Some(Err(e)) => tracing::debug!(error = %e, "mock kafka consumer"),
                    None => {}
                }
            }
        })?;
    Ok((rx, shared))
}

/// Tells the consumer thread to stop.
#[derive(Debug, Clone)]
pub struct StopFlag(Arc<Shared>);

impl StopFlag {
    /// Stops the consumer thread.
    pub fn set(&self) {
        self.0.stop.store(true, Ordering::Relaxed);
    }
    /// Whether [`StopFlag::set`] was called.
    pub fn is_set(&self) -> bool {
        self.0.stop.load(Ordering::Relaxed)
    }
}

/// The records of one topic, read from the beginning, collected on demand:
/// each call takes in what the consumer thread ([`consume`]) has read by then.
/// Fails the test (panics) on a record without a message id, or if the
/// consumer thread ends. Dropping it stops the thread.
pub struct TopicReader {
    topic: String,
    rx: UnboundedReceiver<Consumed>,
    shared: Arc<Shared>,
    /// Every record read so far, in the order read.
    pub records: Vec<Consumed>,
}

impl TopicReader {
    /// Starts reading `topic` (which must exist within 30 s) on the cluster at
    /// `bootstrap`.
    pub fn new(bootstrap: &str, topic: &str) -> Self {
        let (rx, shared) = spawn_consumer(bootstrap, topic, FETCH_WAIT)
            .unwrap_or_else(|e| panic!("consumer for {topic}: {e:#}"));
        Self {
            topic: topic.to_string(),
            rx,
            shared,
            records: Vec::new(),
        }
    }

    /// Takes in every record read by now, without waiting; returns them all.
    pub fn poll(&mut self) -> &[Consumed] {
        loop {
            match self.rx.try_recv() {
                Ok(r) => self.records.push(r),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    panic!("the consumer of {} stopped", self.topic)
                }
            }
        }
        let unlabelled = self.shared.unlabelled.load(Ordering::Relaxed);
        assert_eq!(
            unlabelled,
            0,
            "{unlabelled} record(s) in {} without a {} header",
            self.topic,
            kafka_headers::MESSAGE_ID
        );
        &self.records
    }

    /// Reads until `done(records)` holds; panics after `deadline`, naming `what`.
    pub async fn read_until(
        &mut self,
        deadline: Duration,
        what: &str,
        mut done: impl FnMut(&[Consumed]) -> bool,
    ) {
        let start = Instant::now();
        while !done(self.poll()) {
            assert!(
                start.elapsed() < deadline,
                "timed out after {deadline:?} waiting for {what}; got {} records: {:?}",
                self.records.len(),
                self.records
                    .iter()
                    .map(|r| r.message_id)
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Keeps reading for `d`, to see what else arrives (or that nothing does).
    pub async fn read_for(&mut self, d: Duration) {
        tokio::time::sleep(d).await;
        self.poll();
    }

    /// Message ids read so far, with how often each arrived.
    pub fn id_counts(&mut self) -> BTreeMap<u64, usize> {
        let mut m = BTreeMap::new();
        for r in self.poll() {
            *m.entry(r.message_id).or_insert(0) += 1;
        }
        m
    }
}

impl Drop for TopicReader {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}
