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
//! The mock cluster speaks neither TLS nor SASL; a test puts fronts before
//! its brokers and makes them advertise the fronts ([`MockKafka::advertise`]):
//! a TLS terminator of its choosing. (SASL is tested against a real Apache
//! Kafka: `scripts/kafka-broker`.)
//!
//! Not part of the service: the `trustmsg` library never links it.

mod proxy;

use std::collections::BTreeMap;
use std::ffi::CString;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, DefaultProducerContext, Producer};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::mpsc::UnboundedReceiver;
use trustmsg_verify_api::kafka_headers;

use proxy::Proxies;

/// The request kinds and error codes [`MockKafka::request_errors`] takes.
pub use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};

enum Cmd {
    CreateTopic(String, i32),
    BrokerDown,
    BrokerUp,
    RequestErrors(RDKafkaApiKey, Vec<RDKafkaRespErr>),
    ClearRequestErrors(RDKafkaApiKey),
    RoundTrip(Duration),
    LoseState,
    ComeBackEmpty,
    Advertise(i32, String, u16),
}

/// A command for the cluster thread and where to report how it went.
type Request = (Cmd, std_mpsc::SyncSender<Result<(), String>>);

/// The broker ids of librdkafka's mock clusters: 1 to the broker count.
fn broker_ids(brokers: i32) -> std::ops::RangeInclusive<i32> {
    1..=brokers
}

/// One librdkafka mock cluster. It lives as long as the client handle it was
/// created with (`test.mock.num.brokers`), which is never used to produce:
/// dropping it destroys the cluster, its records, topics and producer ids.
struct Cluster {
    holder: BaseProducer,
}

impl Cluster {
    fn new(brokers: i32) -> Result<Self, String> {
        let holder = ClientConfig::new()
            .set("test.mock.num.brokers", brokers.to_string())
            .create()
            .map_err(|e| e.to_string())?;
        let cluster = Self { holder };
        cluster.cap_group_apis();
        Ok(cluster)
    }

    /// Caps the group APIs at the versions librdkafka's mock reads right.
    /// It advertises JoinGroup up to v6, SyncGroup up to v4 and LeaveGroup
    /// up to v4, but reads their arrays as those versions had them before
    /// they became flexible (an INT32 count, one member id): kafka-clients'
    /// JoinGroup v6 is cut off (its count read as over 1000), so a Java
    /// consumer group never joined `trustmsg dev`. librdkafka's own
    /// consumer asks for v5, v3 and v2 at most, which these caps leave as
    /// they were.
    fn cap_group_apis(&self) {
        const CAPS: [(i16, i16); 3] = [(11, 5), (14, 3), (13, 2)]; // JoinGroup, SyncGroup, LeaveGroup
                                                                   // Sound as in `advertise`: the live cluster of `holder`, checked
                                                                   // non-null; the call takes the cluster's lock.
        #[allow(unsafe_code)]
        unsafe {
            let cluster =
                rdkafka_sys::rd_kafka_handle_mock_cluster(self.holder.client().native_ptr());
            assert!(!cluster.is_null(), "the holder has a mock cluster");
            for (api, max) in CAPS {
                rdkafka_sys::rd_kafka_mock_set_apiversion(cluster, api, 0, max);
            }
        }
    }

    fn mock(&self) -> MockCluster<'_, DefaultProducerContext> {
        self.holder
            .client()
            .mock_cluster()
            .expect("a client made with test.mock.num.brokers has a mock cluster")
    }

    /// Where each broker listens, in broker id order.
    fn listeners(&self) -> Vec<SocketAddr> {
        self.mock()
            .bootstrap_servers()
            .split(',')
            .map(|a| a.parse().expect("mock brokers listen on IP addresses"))
            .collect()
    }

    /// Makes `broker` tell clients (in metadata) it is at `host:port`.
    fn advertise(&self, broker: i32, host: &str, port: u16) {
        let host = CString::new(host).expect("a host name has no NUL");
        // The rdkafka crate does not wrap this call. Sound: the cluster
        // pointer is the live cluster of `holder` (checked non-null), which
        // outlives the call, and librdkafka copies the host string under the
        // cluster's lock.
        #[allow(unsafe_code)]
        unsafe {
            let cluster =
                rdkafka_sys::rd_kafka_handle_mock_cluster(self.holder.client().native_ptr());
            assert!(!cluster.is_null(), "the holder has a mock cluster");
            rdkafka_sys::rd_kafka_mock_broker_set_host_port(
                cluster,
                broker,
                host.as_ptr(),
                i32::from(port),
            );
        }
    }
}

/// The cluster thread's state: the cluster (none while it is lost), the
/// topics to create again when it comes back, and for a restartable cluster
/// the proxies clients reach it through.
struct Host {
    brokers: i32,
    cluster: Option<Cluster>,
    topics: Vec<(String, i32)>,
    proxies: Option<Proxies>,
    restarts: Arc<AtomicU64>,
}

impl Host {
    fn cluster(&self) -> Result<MockCluster<'_, DefaultProducerContext>, String> {
        self.cluster
            .as_ref()
            .map(Cluster::mock)
            .ok_or_else(|| "the cluster lost its state and has not come back".to_string())
    }

    /// Makes each broker of `cluster` advertise its proxy's address.
    fn advertise_proxies(&self, cluster: &Cluster) {
        let proxies = self
            .proxies
            .as_ref()
            .expect("a restartable cluster has proxies");
        for (broker, addr) in broker_ids(self.brokers).zip(proxies.addrs()) {
            cluster.advertise(broker, &addr.ip().to_string(), addr.port());
        }
    }

    /// A fresh cluster behind the proxies, with the topics created so far,
    /// reachable once this returns.
    fn come_back_empty(&mut self) -> Result<(), String> {
        let cluster = Cluster::new(self.brokers)?;
        self.advertise_proxies(&cluster);
        for (topic, partitions) in &self.topics {
            cluster
                .mock()
                .create_topic(topic, *partitions, self.brokers.min(3))
                .map_err(|e| e.to_string())?;
        }
        // Before anything can reach the new cluster, so a reader that sees
        // the count unchanged after a record knows the record is the old
        // cluster's (see `TopicReader`).
        self.restarts.fetch_add(1, Ordering::SeqCst);
        let proxies = self
            .proxies
            .as_ref()
            .expect("a restartable cluster has proxies");
        proxies
            .forward(&cluster.listeners())
            .map_err(|e| e.to_string())?;
        self.cluster = Some(cluster);
        Ok(())
    }

    fn run(&mut self, cmd: Cmd) -> Result<(), String> {
        match cmd {
            Cmd::CreateTopic(t, partitions) => {
                self.cluster()?
                    .create_topic(&t, partitions, self.brokers.min(3))
                    .map_err(|e| e.to_string())?;
                self.topics.push((t, partitions));
                Ok(())
            }
            Cmd::BrokerDown => self.cluster()?.broker_down(-1).map_err(|e| e.to_string()),
            Cmd::BrokerUp => self.cluster()?.broker_up(-1).map_err(|e| e.to_string()),
            Cmd::RequestErrors(key, errs) => {
                self.cluster()?.request_errors(key, &errs);
                Ok(())
            }
            Cmd::RoundTrip(d) => {
                let cluster = self.cluster()?;
                broker_ids(self.brokers)
                    .try_for_each(|b| cluster.broker_round_trip_time(b, d))
                    .map_err(|e| e.to_string())
            }
            Cmd::ClearRequestErrors(key) => {
                self.cluster()?.clear_request_errors(key);
                Ok(())
            }
            Cmd::LoseState => {
                let proxies = self.proxies.as_ref().ok_or("not a restartable cluster")?;
                proxies.cut().map_err(|e| e.to_string())?;
                self.cluster = None;
                Ok(())
            }
            Cmd::ComeBackEmpty => {
                if self.proxies.is_none() || self.cluster.is_some() {
                    return Err("only a restartable cluster that lost its state comes back".into());
                }
                self.come_back_empty()
            }
            Cmd::Advertise(broker, host, port) => {
                if !broker_ids(self.brokers).contains(&broker) {
                    return Err(format!("no broker {broker}"));
                }
                self.cluster
                    .as_ref()
                    .ok_or("the cluster lost its state")?
                    .advertise(broker, &host, port);
                Ok(())
            }
        }
    }
}

/// How often each restartable cluster (by its bootstrap string) came back
/// empty, for the readers of its topics ([`TopicReader`]): a reader started
/// with only the bootstrap string finds its cluster's count here.
static RESTARTS: Mutex<BTreeMap<String, Arc<AtomicU64>>> = Mutex::new(BTreeMap::new());

fn restarts_of(bootstrap: &str) -> Option<Arc<AtomicU64>> {
    RESTARTS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(bootstrap)
        .cloned()
}

/// librdkafka's mock cluster on a thread of its own (it is `!Send`), taking
/// commands over a channel: topics, and the fault injection the tests use
/// (brokers down, request errors, slow round trips, and for a cluster started
/// with [`MockKafka::start_restartable`], losing every bit of state). Dropping
/// the handle shuts it down.
pub struct MockKafka {
    bootstrap: String,
    restartable: bool,
    /// Bytes a second clients may send through the proxies (0: no limit).
    upload: Arc<AtomicU64>,
    tx: Option<std_mpsc::Sender<Request>>,
    thread: Option<JoinHandle<()>>,
}

impl MockKafka {
    /// Starts a cluster of `brokers` brokers.
    pub fn start(brokers: i32) -> Self {
        Self::spawn(brokers, false)
    }

    /// Starts a cluster of `brokers` brokers that can lose its state
    /// ([`MockKafka::lose_state`]) and come back empty at the same addresses
    /// ([`MockKafka::come_back_empty`]), as a broker with memory storage that
    /// restarts. Clients reach it through a TCP proxy per broker on a fixed
    /// loopback port, which the brokers advertise as their address.
    pub fn start_restartable(brokers: i32) -> Self {
        Self::spawn(brokers, true)
    }

    fn spawn(brokers: i32, restartable: bool) -> Self {
        let (tx, rx) = std_mpsc::channel::<Request>();
        let (boot_tx, boot_rx) = std_mpsc::sync_channel(1);
        let restarts = Arc::new(AtomicU64::new(0));
        let upload = Arc::new(AtomicU64::new(0));
        let proxy_upload = upload.clone();
        let thread = std::thread::Builder::new()
            .name("mock-kafka".into())
            .spawn(move || {
                let mut host = Host {
                    brokers,
                    cluster: None,
                    topics: Vec::new(),
                    proxies: None,
                    restarts,
                };
                let cluster = Cluster::new(brokers).expect("mock cluster starts");
                let bootstrap = if restartable {
                    let proxies = Proxies::start(&cluster.listeners(), proxy_upload)
                        .expect("mock kafka proxies start");
                    let bootstrap = proxies
                        .addrs()
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",");
                    host.proxies = Some(proxies);
                    host.advertise_proxies(&cluster);
                    RESTARTS
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(bootstrap.clone(), host.restarts.clone());
                    bootstrap
                } else {
                    cluster.mock().bootstrap_servers()
                };
                host.cluster = Some(cluster);
                boot_tx.send(bootstrap).unwrap();
                while let Ok((cmd, reply)) = rx.recv() {
                    let _ = reply.send(host.run(cmd));
                }
            })
            .expect("spawn mock kafka thread");
        let bootstrap = boot_rx.recv().expect("mock cluster bootstrap servers");
        Self {
            bootstrap,
            restartable,
            upload,
            tx: Some(tx),
            thread: Some(thread),
        }
    }
    /// Clients' requests reach the brokers at most at `bytes_per_second`
    /// per connection (0: as fast as they come), as over a slow link: a
    /// producer's records then arrive no faster than that, while a
    /// consumer's small fetch requests are not held up. Only for a cluster
    /// from [`MockKafka::start_restartable`] (its proxies do it).
    pub fn limit_upload(&self, bytes_per_second: u64) {
        assert!(self.restartable, "only a restartable cluster has proxies");
        self.upload.store(bytes_per_second, Ordering::Relaxed);
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

    /// The brokers stop, losing everything: every connection is closed and
    /// new ones are refused until [`MockKafka::come_back_empty`]. Only for a
    /// cluster from [`MockKafka::start_restartable`].
    pub fn lose_state(&self) {
        self.call(Cmd::LoseState);
    }

    /// The brokers start again at the same addresses with no records, no
    /// producer ids, no injected faults and the topics created with
    /// [`MockKafka::create_topic`] before, empty: their offsets start at 0
    /// again (see [`TopicReader`] for what a reader sees). Only after
    /// [`MockKafka::lose_state`].
    ///
    /// librdkafka's mock broker checks producer ids only for transactional
    /// producers, so an idempotent producer that outlived the restart is not
    /// refused by itself, as a real broker that lost its producer state
    /// would; a test that needs the refusal injects it with
    /// [`MockKafka::request_errors`] (`PRODUCER_FENCED`, `UNKNOWN_PRODUCER_ID`).
    pub fn come_back_empty(&self) {
        self.call(Cmd::ComeBackEmpty);
    }

    /// Makes `broker` (1 to the broker count) tell clients, in metadata, that
    /// it is at `host:port`: where a test puts a front of its own (a TLS
    /// terminator) that forwards to the broker's own address
    /// in [`MockKafka::bootstrap`]. Clients bootstrapped anywhere then go
    /// through the front. Not for a cluster from
    /// [`MockKafka::start_restartable`] (it advertises its proxies).
    pub fn advertise(&self, broker: i32, host: &str, port: u16) {
        assert!(
            !self.restartable,
            "a restartable cluster advertises its proxies"
        );
        self.call(Cmd::Advertise(broker, host.to_string(), port));
    }
}

impl Drop for MockKafka {
    fn drop(&mut self) {
        if self.restartable {
            RESTARTS
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&self.bootstrap);
        }
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Every header of a record in record order, owned; `None` is a null value.
pub fn record_headers(m: &impl rdkafka::Message) -> Vec<(String, Option<Vec<u8>>)> {
    use rdkafka::message::Headers as _;
    m.headers()
        .map(|h| {
            h.iter()
                .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                .collect()
        })
        .unwrap_or_default()
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
    let (rx, shared) = spawn_consumer(bootstrap, topic, EAGER_FETCH_WAIT, &[])?;
    Ok((rx, StopFlag(shared)))
}

fn spawn_consumer(
    bootstrap: &str,
    topic: &str,
    fetch_wait_ms: &str,
    extra: &[(&str, &str)],
) -> anyhow::Result<(UnboundedReceiver<Consumed>, Arc<Shared>)> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "trustmsg-bench")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", fetch_wait_ms);
    for (k, v) in extra {
        config.set(*k, *v);
    }
    let consumer: BaseConsumer = config.create()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let partitions = loop {
        // A request that times out (a loaded machine) is asked again
        // within the deadline, as a topic not there yet is.
        let n = match consumer.fetch_metadata(Some(topic), Duration::from_secs(5)) {
            Ok(md) => md
                .topics()
                .iter()
                .find(|t| t.name() == topic)
                .map_or(0, |t| t.partitions().len()),
            Err(e) if Instant::now() < deadline => {
                tracing::debug!(error = %e, topic, "metadata not fetched yet; asking again");
                0
            }
            Err(e) => return Err(e.into()),
        };
        if n > 0 {
            break n;
        }
        anyhow::ensure!(Instant::now() < deadline, "topic {topic} never appeared");
        thread::sleep(Duration::from_millis(200));
    };
    let mut from_start = TopicPartitionList::new();
    for p in 0..partitions {
        from_start.add_partition_offset(topic, p as i32, Offset::Beginning)?;
    }
    consumer.assign(&from_start)?;
    // A restartable cluster that came back empty starts every offset at 0
    // again; reading on from the old positions would skip its first records.
    let restarts = restarts_of(bootstrap);
    let restarts_seen = |n: &Option<Arc<AtomicU64>>| n.as_ref().map(|n| n.load(Ordering::SeqCst));
    let mut seen = restarts_seen(&restarts);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let shared = Arc::new(Shared::default());
    let flag = shared.clone();
    thread::Builder::new()
        .name(format!("consume-{topic}"))
        .spawn(move || {
            while !flag.stop.load(Ordering::Relaxed) {
                let polled = consumer.poll(Duration::from_millis(50));
                // Checked after the poll: the count goes up before the new
                // cluster is reachable, so a record polled while it is
                // unchanged is the old cluster's; one polled after may be the
                // new one's and is read again from the start.
                let now = restarts_seen(&restarts);
                if now != seen {
                    seen = now;
                    if let Err(e) = consumer.assign(&from_start) {
                        tracing::warn!(error = %e, "mock kafka consumer could not start over");
                    }
                    continue;
                }
                match polled {
                    Some(Ok(m)) => {
                        let at = Instant::now();
                        let headers = record_headers(&m);
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
///
/// Across [`MockKafka::come_back_empty`] it reads on: it keeps what it read
/// from the old cluster and then reads the new cluster's topic from offset 0,
/// so `records` holds both, and [`Consumed::offset`] is the offset in the
/// cluster the record was read from (the same offsets come twice). A record
/// the old cluster had handed over but the reader had not polled when the
/// cluster came back is dropped: wait for what was sent before
/// [`MockKafka::lose_state`] to be read first.
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
        Self::with_config(bootstrap, topic, &[])
    }

    /// [`TopicReader::new`] with extra librdkafka settings for the consumer
    /// (`security.protocol`, `ssl.ca.location`, SASL credentials, …).
    pub fn with_config(bootstrap: &str, topic: &str, config: &[(&str, &str)]) -> Self {
        let (rx, shared) = spawn_consumer(bootstrap, topic, FETCH_WAIT, config)
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
