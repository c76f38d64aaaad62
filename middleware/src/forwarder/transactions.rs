//! The exactly-once forwarder's Kafka side: a transactional producer
//! named by the instance, and the progress records that say what its
//! transactions wrote.
//!
//! - **One name, one writer.** The producer's `transactional.id` is the
//!   instance's id ([`SendOwner`]). Opening it (`init_transactions`)
//!   fences every earlier producer of that name: a predecessor that
//!   crashed, or one stopped and woken later (a zombie), can no longer
//!   write, and a transaction it left open is aborted. A claim of another
//!   owner is taken only after that owner was fenced the same way
//!   ([`Transactions::fence`]).
//! - **What was sent is written with it.** Each transaction carries, after
//!   its records, one progress record on a compacted topic of trustmsg's
//!   own (`--progress-topic`, KIP-618's way for source connectors): keyed
//!   by the owner, it lists every message of this transaction and every
//!   earlier one whose SENT mark the database has not taken yet, with
//!   partition and offset. So after any crash, the last committed progress
//!   record of an owner names every record it sent that the database may
//!   not know of ([`Transactions::progress_of`]), and the marks are written
//!   from it instead of the records being sent again.
//! - **Read as consumers read, to the end.** Progress is read
//!   `read_committed`: an aborted transaction's progress is never taken
//!   for sent. And it is read up to the end of what was written when the
//!   read began, not only up to the last stable offset, which another
//!   instance's open transaction can hold below the owner's last
//!   committed record ([`last_progress`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message as _;
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use super::kafka::{
    classify, enqueue, record_headers, KafkaProducer, KafkaSettings, Report, Reports, SendError,
};
use crate::store::{Message, OrderPos, SendOwner, SentMark};

/// How long opening a producer, committing or aborting a transaction may
/// take before it is asked again.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// How long creating the progress topic may take before the start goes
/// on without it (its first record says whether it is there).
const CREATE_TIMEOUT: Duration = Duration::from_secs(3);

/// How long reading an owner's progress may wait beyond the transaction
/// timeout: the read may wait for another instance's open transaction,
/// which the broker aborts after that timeout at the latest.
const READ_MARGIN: Duration = Duration::from_secs(10);

/// The progress topic's segments roll this often, so that compaction
/// keeps it to about one record per owner.
const PROGRESS_SEGMENT_MS: &str = "600000";

/// One message in a progress record: its SENT mark.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Sent {
    id: u64,
    version: u64,
    partition: i32,
    offset: i64,
    /// An ordered message's key (hex) and place in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    order: Option<(String, u64)>,
}

impl From<&SentMark> for Sent {
    fn from(m: &SentMark) -> Self {
        Self {
            id: m.id,
            version: m.version,
            partition: m.partition,
            offset: m.offset,
            order: m.order.map(|o| (hex::encode(o.key), o.seq)),
        }
    }
}

impl Sent {
    fn mark(&self) -> Option<SentMark> {
        let order = match &self.order {
            None => None,
            Some((key, seq)) => Some(OrderPos {
                key: hex::decode(key).ok()?.try_into().ok()?,
                seq: *seq,
            }),
        };
        Some(SentMark {
            id: self.id,
            version: self.version,
            partition: self.partition,
            offset: self.offset,
            order,
        })
    }
}

/// A progress record's value.
#[derive(Debug, Serialize, Deserialize)]
struct Progress {
    sent: Vec<Sent>,
}

/// Why a transaction wrote nothing.
#[derive(Debug)]
pub(crate) struct Aborted {
    /// Each message's own error, where its record was refused; None for
    /// one aborted with the others.
    pub(crate) errors: Vec<Option<SendError>>,
    /// The transaction's error, for the log and the retries' `last_error`.
    pub(crate) cause: String,
    /// The producer was fenced (another producer took the name) or can no
    /// longer go on: it must be opened again, and the owner's claims
    /// recovered, before anything more is sent.
    pub(crate) reopen: bool,
}

/// The transactional producer of one owner, and its progress topic.
/// Shared by the worker's claimer (which fences other owners and reads
/// their progress) and its sender (which runs the transactions and opens
/// the producer again when it must).
pub(crate) struct Transactions {
    settings: KafkaSettings,
    owner: SendOwner,
    progress_topic: String,
    /// The producer now: replaced whole when it is opened again.
    producer: Mutex<Arc<KafkaProducer>>,
}

impl std::fmt::Debug for Transactions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transactions")
            .field("owner", &self.owner)
            .field("progress_topic", &self.progress_topic)
            .finish_non_exhaustive()
    }
}

/// How long a transaction may stay open before the broker aborts it: the
/// send timeout (librdkafka asks that a send's timeout fit its
/// transaction's), 1 s at least.
fn transaction_timeout(settings: &KafkaSettings) -> Duration {
    settings.message_timeout.max(Duration::from_secs(1))
}

/// `settings`' producer configuration under the transactional id `name`.
fn transactional(settings: &KafkaSettings, name: &SendOwner) -> ClientConfig {
    let mut c = settings.client_config();
    c.set("transactional.id", name.as_str()).set(
        "transaction.timeout.ms",
        transaction_timeout(settings).as_millis().to_string(),
    );
    c
}

/// Opens a producer under `name`: every earlier one of that name is
/// fenced and its open transaction aborted.
async fn open_producer(
    settings: &KafkaSettings,
    name: &SendOwner,
) -> anyhow::Result<KafkaProducer> {
    let producer: KafkaProducer = transactional(settings, name)
        .create_with_context(Reports)
        .map_err(|e| anyhow::anyhow!("invalid Kafka producer configuration: {e}"))?;
    tokio::task::spawn_blocking(move || producer.init_transactions(CALL_TIMEOUT).map(|()| producer))
        .await?
        .map_err(|e| anyhow::anyhow!("opening the transactional producer {name}: {e}"))
}

impl Transactions {
    /// Creates the progress topic if it is missing and opens this owner's
    /// producer, fencing its predecessors.
    pub(crate) async fn open(
        settings: KafkaSettings,
        owner: SendOwner,
        progress_topic: String,
    ) -> anyhow::Result<Self> {
        // A cluster that cannot create topics by request (a managed one
        // whose topics are made elsewhere, librdkafka's mock) may have it,
        // or make it on first use: its first progress record says.
        if let Err(e) = create_progress_topic(&settings, &progress_topic).await {
            tracing::warn!(error = %e, topic = %progress_topic, "could not create the progress topic; going on in case it exists or is created on first use");
        }
        let producer = Mutex::new(Arc::new(open_producer(&settings, &owner).await?));
        Ok(Self {
            settings,
            owner,
            progress_topic,
            producer,
        })
    }

    /// Opens this owner's producer again (after it was fenced or failed
    /// for good).
    pub(crate) async fn reopen(&self) -> anyhow::Result<()> {
        let fresh = Arc::new(open_producer(&self.settings, &self.owner).await?);
        let old = std::mem::replace(&mut *self.current_lock(), fresh);
        // Destroying a librdkafka handle waits for its threads.
        tokio::task::spawn_blocking(move || drop(old));
        Ok(())
    }

    fn current_lock(&self) -> std::sync::MutexGuard<'_, Arc<KafkaProducer>> {
        self.producer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Fences `other`: a producer opened under its name and dropped. From
    /// then on nothing `other` had open can be committed, nor can it begin
    /// anything before it opens its producer again.
    pub(crate) async fn fence(&self, other: &SendOwner) -> anyhow::Result<()> {
        let fencer = open_producer(&self.settings, other).await?;
        tokio::task::spawn_blocking(move || drop(fencer)).await?;
        Ok(())
    }

    /// The SENT marks of `owner`'s last committed progress record: every
    /// record its transactions wrote whose mark the database may not have.
    /// Empty when it has none.
    pub(crate) async fn progress_of(&self, owner: &SendOwner) -> anyhow::Result<Vec<SentMark>> {
        let config = self.reader_config();
        let (topic, owner) = (self.progress_topic.clone(), owner.clone());
        let within = transaction_timeout(&self.settings) + READ_MARGIN;
        let last =
            tokio::task::spawn_blocking(move || last_progress(config, &topic, &owner, within))
                .await??;
        Ok(last
            .map(|p| p.sent.iter().filter_map(Sent::mark).collect())
            .unwrap_or_default())
    }

    fn reader_config(&self) -> ClientConfig {
        let mut c = self.settings.connection();
        c.set("group.id", format!("trustmsg-progress-{}", self.owner))
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_committed")
            .set("auto.offset.reset", "earliest");
        c
    }

    /// Sends `batch` (each message with its payload) in one transaction,
    /// with a progress record listing its messages and `unmarked` (the
    /// earlier ones whose marks are not written yet). The marks of the
    /// batch, in its order, once the transaction is committed.
    pub(crate) async fn send(
        &self,
        batch: Vec<(Message, Vec<u8>)>,
        unmarked: Vec<SentMark>,
    ) -> Result<Vec<SentMark>, Aborted> {
        let producer = self.current_lock().clone();
        let n = batch.len();
        let aborted = |cause: String, reopen: bool, errors: Vec<Option<SendError>>| Aborted {
            errors,
            cause,
            reopen,
        };
        if let Err(e) = producer.begin_transaction() {
            return Err(aborted(e.to_string(), true, vec![None; n]));
        }
        // Every record queued first, then every report awaited: the
        // transaction's records travel together.
        let mut reports = Vec::with_capacity(n);
        for (m, payload) in &batch {
            let Some(topic) = m.topic.as_deref() else {
                reports.push(Err(SendError::Permanent("message has no topic".into())));
                continue;
            };
            let id = m.id.to_string();
            let (tx, rx) = oneshot::channel::<Report>();
            let record = BaseRecord::<'_, str, [u8], _>::with_opaque_to(topic, Box::new(tx))
                .payload(payload.as_slice())
                .headers(record_headers(m, &id));
            let record = match m.key.as_deref() {
                Some(k) => record.key(k),
                None => record,
            };
            reports.push(match enqueue(&producer, record).await {
                Ok(()) => Ok(rx),
                Err(e) => Err(classify(&e)),
            });
        }
        // What the marks need of each message; the payloads go now
        // (librdkafka holds its copies).
        let claims: Vec<(u64, u64, Option<OrderPos>)> = batch
            .iter()
            .map(|(m, _)| (m.id, m.version, m.order_pos()))
            .collect();
        drop(batch);
        let mut marks = Vec::with_capacity(n);
        let mut errors: Vec<Option<SendError>> = Vec::with_capacity(n);
        let mut failed = None;
        for (report, (id, version, order)) in reports.into_iter().zip(claims) {
            let at = match report {
                Ok(rx) => rx
                    .await
                    .unwrap_or(Err(KafkaError::Canceled))
                    .map_err(|e| classify(&e)),
                Err(e) => Err(e),
            };
            match at {
                Ok((partition, offset)) => {
                    marks.push(SentMark {
                        id,
                        version,
                        partition,
                        offset,
                        order,
                    });
                    errors.push(None);
                }
                Err(e) => {
                    failed.get_or_insert_with(|| e.to_string());
                    errors.push(Some(e));
                }
            }
        }
        if let Some(cause) = failed {
            let reopen = !self.abort(&producer).await;
            return Err(aborted(cause, reopen, errors));
        }
        let acked = Instant::now();
        // The progress record, last in the transaction.
        let progress = Progress {
            sent: unmarked.iter().chain(&marks).map(Sent::from).collect(),
        };
        let value = serde_json::to_vec(&progress).expect("progress serialises");
        let (tx, rx) = oneshot::channel::<Report>();
        let record =
            BaseRecord::<'_, str, [u8], _>::with_opaque_to(&self.progress_topic, Box::new(tx))
                .key(self.owner.as_str())
                .payload(value.as_slice());
        let progressed = match enqueue(&producer, record).await {
            Ok(()) => rx.await.unwrap_or(Err(KafkaError::Canceled)),
            Err(e) => Err(e),
        };
        if let Err(e) = progressed {
            let reopen = !self.abort(&producer).await;
            return Err(aborted(
                format!("the progress record: {e}"),
                reopen,
                vec![None; n],
            ));
        }
        super::fault::before_kafka_commit();
        let progressed_at = Instant::now();
        match commit(&producer).await {
            Ok(()) => {
                tracing::debug!(
                    progress = ?progressed_at.duration_since(acked),
                    commit = ?progressed_at.elapsed(),
                    "a transaction's progress record and commit"
                );
                Ok(marks)
            }
            Err(e) => {
                // An abortable error is aborted; any other leaves the
                // producer to be opened again (which aborts what is open).
                let reopen = !(e.abortable && self.abort(&producer).await);
                Err(aborted(e.text, reopen, vec![None; n]))
            }
        }
    }

    /// Aborts `producer`'s transaction; one that cannot be aborted leaves
    /// the producer to be opened again.
    async fn abort(&self, producer: &Arc<KafkaProducer>) -> bool {
        let p = producer.clone();
        match tokio::task::spawn_blocking(move || p.abort_transaction(CALL_TIMEOUT)).await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "could not abort a Kafka transaction; the producer is opened again");
                false
            }
            Err(_) => false,
        }
    }
}

/// Why a commit failed, and whether the transaction can be aborted.
struct CommitError {
    text: String,
    abortable: bool,
}

/// Commits `producer`'s transaction, asking again while librdkafka says
/// the outcome is not known yet (a retriable error): a commit is never
/// left half-known, so the next claim begins after it is settled.
async fn commit(producer: &Arc<KafkaProducer>) -> Result<(), CommitError> {
    let began = Instant::now();
    loop {
        let p = producer.clone();
        let done = tokio::task::spawn_blocking(move || p.commit_transaction(CALL_TIMEOUT))
            .await
            .unwrap_or(Err(KafkaError::Canceled));
        let e = match done {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let (retriable, abortable) = match &e {
            KafkaError::Transaction(t) => (t.is_retriable(), t.txn_requires_abort()),
            _ => (false, false),
        };
        if retriable {
            tracing::warn!(error = %e, waited = ?began.elapsed(), "a Kafka transaction's commit is not settled yet; asking again");
            continue;
        }
        return Err(CommitError {
            text: e.to_string(),
            abortable,
        });
    }
}

/// Creates the progress topic, compacted, unless it exists.
async fn create_progress_topic(settings: &KafkaSettings, topic: &str) -> anyhow::Result<()> {
    let config = settings.connection();
    let admin: AdminClient<DefaultClientContext> = config
        .create()
        .map_err(|e| anyhow::anyhow!("a Kafka admin client: {e}"))?;
    // There already (or made by asking, where the cluster creates topics
    // on first use): nothing to create. A cluster that does not take
    // CreateTopics (librdkafka's mock) is not kept waiting for it.
    let (asker, name) = (config.clone(), topic.to_owned());
    let known = tokio::task::spawn_blocking(move || {
        let client: BaseConsumer = asker.create().ok()?;
        client
            .fetch_metadata(Some(&name), CALL_TIMEOUT)
            .ok()
            .and_then(|m| {
                m.topics()
                    .iter()
                    .find(|t| t.name() == name)
                    .map(|t| t.error().is_none() && !t.partitions().is_empty())
            })
    })
    .await?
    .unwrap_or(false);
    if known {
        return Ok(());
    }
    let new = NewTopic::new(topic, 1, TopicReplication::Fixed(-1))
        .set("cleanup.policy", "compact")
        .set("segment.ms", PROGRESS_SEGMENT_MS);
    // A broker answers in milliseconds; one that does not know the request
    // (librdkafka's mock) would hold the start for the whole timeout.
    let options = AdminOptions::new()
        .operation_timeout(Some(CREATE_TIMEOUT))
        .request_timeout(Some(CREATE_TIMEOUT));
    let results = admin
        .create_topics([&new], &options)
        .await
        .map_err(|e| anyhow::anyhow!("creating the progress topic {topic}: {e}"))?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((_, code)) => anyhow::bail!("creating the progress topic {topic}: {code}"),
        }
    }
    Ok(())
}

/// The last committed progress record of `owner` in `topic`, read from
/// its beginning up to each partition's end as it was when the read
/// began.
///
/// Not up to the first end a `read_committed` reader sees: that is the
/// last stable offset, which stops at the first record of any transaction
/// still open, and another instance's open transaction may hold it below a
/// progress record of `owner` committed after it began. Reading only up to
/// there took an older progress record for the last one, and sent again
/// what the newer one listed. So the end of each partition is taken first,
/// as a `read_uncommitted` client sees it (every record written, fenced
/// owners' included), and the read goes on until its position is past it:
/// past the commit or abort marker of every transaction begun below it,
/// however long another instance keeps one open (at most its transaction
/// timeout, after which the broker aborts it). After `within`, what was
/// read by then, with a warning: a transaction the broker never ends
/// holds every `read_committed` reader, and must not stop the sends.
fn last_progress(
    config: ClientConfig,
    topic: &str,
    owner: &SendOwner,
    within: Duration,
) -> anyhow::Result<Option<Progress>> {
    let consumer: BaseConsumer = config
        .create()
        .map_err(|e| anyhow::anyhow!("a Kafka consumer for the progress topic: {e}"))?;
    let ends = written_ends(&config, topic)?;
    if ends.is_empty() {
        return Ok(None);
    }
    let mut assignment = TopicPartitionList::new();
    for p in ends.keys() {
        assignment.add_partition_offset(topic, *p, Offset::Beginning)?;
    }
    consumer.assign(&assignment)?;
    let deadline = Instant::now() + within;
    let mut last = None;
    while !read_through(&consumer, topic, &ends)? {
        if Instant::now() > deadline {
            // Held longer than any transaction may stay open: one the broker
            // does not end (a hanging transaction). Every read_committed
            // reader of the partition waits at it; waiting on would stop
            // this instance's sends for good. What was committed before it
            // has been read.
            tracing::warn!(
                topic,
                owner = %owner,
                waited = ?within,
                ends = ?ends,
                "a transaction held open on the progress topic past its timeout keeps the \
                 read of the progress short of its end (a hanging transaction: find and abort \
                 it with kafka-transactions.sh); going on with what was committed before it"
            );
            break;
        }
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(e)) => anyhow::bail!("reading the progress topic {topic}: {e}"),
            Some(Ok(record)) if record.key() == Some(owner.as_str().as_bytes()) => {
                if let Some(value) = record.payload() {
                    last = Some(serde_json::from_slice::<Progress>(value).map_err(|e| {
                        anyhow::anyhow!(
                            "a progress record of {owner} at offset {}: {e}",
                            record.offset()
                        )
                    })?);
                }
            }
            Some(Ok(_)) => {}
        }
    }
    Ok(last)
}

/// The end of each partition of `topic` holding records, as a
/// `read_uncommitted` client sees it: the offset after its last record
/// written, committed or not.
fn written_ends(config: &ClientConfig, topic: &str) -> anyhow::Result<HashMap<i32, i64>> {
    let mut config = config.clone();
    config.set("isolation.level", "read_uncommitted");
    let client: BaseConsumer = config
        .create()
        .map_err(|e| anyhow::anyhow!("a Kafka client for the progress topic's ends: {e}"))?;
    let metadata = client
        .fetch_metadata(Some(topic), CALL_TIMEOUT)
        .map_err(|e| anyhow::anyhow!("the progress topic {topic}'s metadata: {e}"))?;
    let mut ends = HashMap::new();
    for p in metadata.topics().iter().flat_map(|t| t.partitions()) {
        let (low, high) = client
            .fetch_watermarks(topic, p.id(), CALL_TIMEOUT)
            .map_err(|e| anyhow::anyhow!("the end of the progress topic {topic}: {e}"))?;
        if high > low {
            ends.insert(p.id(), high);
        }
    }
    Ok(ends)
}

/// Whether `consumer` has read each partition of `ends` up to its end: its
/// position (which moves past commit and abort markers and aborted
/// records too) at or past it.
fn read_through(
    consumer: &BaseConsumer,
    topic: &str,
    ends: &HashMap<i32, i64>,
) -> anyhow::Result<bool> {
    let position = consumer.position()?;
    Ok(ends.iter().all(|(p, end)| {
        matches!(
            position.find_partition(topic, *p).map(|e| e.offset()),
            Some(Offset::Offset(at)) if at >= *end
        )
    }))
}
