//! Kafka plumbing for the benchmark and the end-to-end tests: an in-process
//! librdkafka mock cluster (when no brokers are given), and a consumer thread
//! that reports every record it reads.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::mocking::MockCluster;
use rdkafka::{Offset, TopicPartitionList};
use trustmsg_verify_api::kafka_headers;

/// A librdkafka mock cluster living on its own thread (it is `!Send`); dropping
/// this handle shuts it down.
pub struct MockKafka {
    pub bootstrap: String,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl MockKafka {
    /// Starts a one-broker cluster with each of `topics` pre-created with `partitions`.
    pub fn start(topics: &[&str], partitions: i32) -> anyhow::Result<Self> {
        let (boot_tx, boot_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let topics: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
        let thread = thread::spawn(move || {
            let cluster = match MockCluster::new(1) {
                Ok(c) => c,
                Err(e) => {
                    let _ = boot_tx.send(Err(e.to_string()));
                    return;
                }
            };
            for topic in &topics {
                if let Err(e) = cluster.create_topic(topic, partitions, 1) {
                    let _ = boot_tx.send(Err(e.to_string()));
                    return;
                }
            }
            let _ = boot_tx.send(Ok(cluster.bootstrap_servers()));
            let _ = stop_rx.recv();
        });
        let bootstrap = boot_rx
            .recv()?
            .map_err(|e| anyhow::anyhow!("mock cluster: {e}"))?;
        Ok(Self {
            bootstrap,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }
}

impl Drop for MockKafka {
    fn drop(&mut self) {
        self.stop.take();
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
