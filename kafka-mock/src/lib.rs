//! Kafka without a broker to install, for `trustmsg bench` and the tests: an
//! in-process librdkafka mock cluster (it speaks the Kafka protocol over TCP to
//! librdkafka clients) with the fault injection the tests use, and a consumer
//! thread that reports every record it reads.
//!
//! Not part of the service: the `trustmsg` library never links it.

use std::sync::mpsc as std_mpsc;
use std::thread;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::mocking::MockCluster;
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use rdkafka::{Offset, TopicPartitionList};
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

/// One consumed record.
#[derive(Debug, Clone)]
pub struct Consumed {
    /// The `trustmsg-message-id` header.
    pub message_id: u64,
    /// When the consumer read it.
    pub at: Instant,
    /// The record's topic.
    pub topic: String,
    /// The record's key.
    pub key: Option<Vec<u8>>,
    /// The record's value.
    pub payload: Vec<u8>,
    /// All headers, in order.
    pub headers: Vec<(String, Vec<u8>)>,
}

/// Reads every partition of `topic` from the beginning on a thread and sends
/// each record's message id; stops when the receiver is dropped or `stop` is set.
pub fn consume(
    bootstrap: &str,
    topic: &str,
) -> anyhow::Result<(tokio::sync::mpsc::UnboundedReceiver<Consumed>, StopFlag)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "trustmsg-bench")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "5")
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
    let stop = StopFlag::default();
    let flag = stop.clone();
    thread::spawn(move || {
        while !flag.is_set() {
            match consumer.poll(Duration::from_millis(50)) {
                Some(Ok(m)) => {
                    let at = Instant::now();
                    let headers: Vec<(String, Vec<u8>)> = m
                        .headers()
                        .map(|h| {
                            h.iter()
                                .map(|h| (h.key.to_string(), h.value.unwrap_or_default().to_vec()))
                                .collect()
                        })
                        .unwrap_or_default();
                    let id = headers
                        .iter()
                        .find(|(k, _)| k == kafka_headers::MESSAGE_ID)
                        .and_then(|(_, v)| std::str::from_utf8(v).ok())
                        .and_then(|v| v.parse().ok());
                    if let Some(message_id) = id {
                        let record = Consumed {
                            message_id,
                            at,
                            topic: m.topic().to_string(),
                            key: m.key().map(<[u8]>::to_vec),
                            payload: m.payload().unwrap_or_default().to_vec(),
                            headers,
                        };
                        if tx.send(record).is_err() {
                            return;
                        }
                    }
                }
                Some(Err(e)) => tracing::debug!(error = %e, "bench consumer"),
                None => {}
            }
        }
    });
    Ok((rx, stop))
}

/// Tells the consumer thread to stop.
#[derive(Debug, Clone, Default)]
pub struct StopFlag(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl StopFlag {
    /// Stops the consumer thread.
    pub fn set(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    /// Whether [`StopFlag::set`] was called.
    pub fn is_set(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}
