//! The Kafka sink: one idempotent producer (acks=all) per instance.
//!
//! A send resolves only on librdkafka's delivery report, so `Ok` means the
//! record is in Kafka at the returned partition/offset and nothing less. Every
//! error is classified for the caller:
//! - [`SendError::PossiblyPersisted`]: the send timed out in flight, its
//!   delivery was cancelled, or the outcome is otherwise unknown. The record
//!   may or may not be in Kafka; retrying may duplicate it, giving up may lose
//!   it, so it is retried and never failed.
//! - [`SendError::Permanent`]: Kafka will never take this record as it is
//!   (invalid topic, record too large, not authorised). Retrying cannot help.
//! - [`SendError::Unreachable`]: no broker could be reached or librdkafka's
//!   local queue is full (it cannot drain): nothing was tried, so it is
//!   retried after backoff without counting an attempt.
//! - [`SendError::Transient`]: anything else; retried after backoff until the
//!   attempt limit.
//! - [`SendError::Stalled`]: this producer can no longer make progress, and
//!   the sink has already built a new one (see below): retried soon, never
//!   counted.
//!
//! Only errors Kafka answered count towards `--max-send-attempts`
//! ([`SendError::counts_as_attempt`]): waiting out an outage must not use up
//! the limit, or the first real error after it would fail the message.
//!
//! **A producer that can no longer make progress is replaced at once.** The
//! idempotent producer carries state the broker must share (its producer id,
//! epoch and sequence numbers). When the broker loses it (a broker with memory
//! storage that restarts, a producer id expired while idle) or fences the
//! producer, librdkafka either enters a fatal state in which every send fails,
//! or retries every send until `message.timeout.ms`, for ever: only a new
//! producer gets a new id. So the sink builds a new producer when a send meets
//! (see [`stall`]) a fatal client error, a delivery report with one of the
//! broker's producer-state codes (fenced, unknown producer id, out-of-order
//! sequence, invalid epoch, invalid producer id mapping), or a timeout while
//! the cluster is reachable and answering (a metadata request succeeds, see
//! [`KafkaSink::answering`]): an unreachable cluster is an outage, waited out
//! as before, not a reason to rebuild. One rebuild serves a burst: a send
//! only replaces the producer it used, and only if it is still the current
//! one. Each rebuild is logged once and counted in
//! `trustmsg_kafka_producer_rebuilds_total{reason}`. A rebuild that keeps
//! recurring raises no alert of its own: the rows it leaves `PENDING` are what
//! an operator must hear about, and the overdue watch alerts on them
//! (`send_overdue`), as for any other reason a message is not sent.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message as _;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use tokio::sync::oneshot;
use trustmsg_verify_api::kafka_headers;

use crate::net::kafka_settings::{self, KafkaConfigArg, Redacted};
use crate::store::Message;

/// librdkafka settings the forwarder owns: overriding them through
/// `--kafka-config` would break a guarantee (no loss, lease > timeout).
const RESERVED_SETTINGS: &[&str] = &[
    "bootstrap.servers",
    "metadata.broker.list",
    "enable.idempotence",
    "acks",
    "request.required.acks",
    "message.timeout.ms",
    "delivery.timeout.ms",
];

/// librdkafka's name for the record size limit, which trustmsg sets from
/// `--kafka-message-max-bytes` because prepare checks against the same number.
const MESSAGE_MAX_BYTES: &str = "message.max.bytes";

/// librdkafka's bound on the payload bytes of its queue, which trustmsg
/// sets from `--payload-budget-mib`.
const QUEUE_MAX_KBYTES: &str = "queue.buffering.max.kbytes";

/// How long `send` waits for room in librdkafka's local queue before it
/// reports a (transient) queue-full error.
const QUEUE_TIMEOUT: Duration = Duration::from_secs(1);

/// How often [`enqueue`] tries again while librdkafka's queue is full.
const QUEUE_RETRY: Duration = Duration::from_millis(100);

/// Why a send did not end in a delivery report with an offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SendError {
    /// Retry after backoff; counts towards the attempt limit.
    #[error("transient Kafka error: {0}")]
    Transient(String),
    /// The record may be in Kafka: retry (a duplicate is acceptable, a loss is
    /// not); never counts towards the attempt limit.
    #[error("send timed out, possibly persisted: {0}")]
    PossiblyPersisted(String),
    /// Kafka could not be reached; retry after backoff, never counts towards
    /// the attempt limit.
    #[error("Kafka unreachable: {0}")]
    Unreachable(String),
    /// Kafka will never accept this record: stop and alert.
    #[error("permanent Kafka error: {0}")]
    Permanent(String),
    /// The producer could no longer make progress and was replaced; the
    /// record may be in Kafka. Retry soon; never counts.
    #[error("Kafka producer replaced ({0})")]
    Stalled(String),
}

impl SendError {
    /// Whether this failure uses up one of the message's send attempts: only
    /// an answer from Kafka does.
    pub(crate) fn counts_as_attempt(&self) -> bool {
        matches!(self, Self::Transient(_) | Self::Permanent(_))
    }
}

/// What the forwarder needs to reach Kafka.
#[derive(Clone)]
pub(crate) struct KafkaSettings {
    /// `bootstrap.servers`.
    pub(crate) brokers: String,
    /// Extra librdkafka producer settings (`key=value`).
    pub(crate) extra: Vec<(String, String)>,
    /// `message.timeout.ms`: the longest a send stays in flight.
    pub(crate) message_timeout: Duration,
    /// `message.max.bytes`: the largest record, as [`crate::handoff::record::record_size`] counts it.
    pub(crate) message_max_bytes: usize,
    /// `queue.buffering.max.kbytes`, in bytes: the payload budget
    /// (`--payload-budget-mib`), which bounds what librdkafka is handed anyway.
    pub(crate) queue_max_bytes: usize,
}

impl std::fmt::Debug for KafkaSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSettings")
            .field("brokers", &self.brokers)
            .field("extra", &Redacted(&self.extra))
            .field("message_timeout", &self.message_timeout)
            .field("message_max_bytes", &self.message_max_bytes)
            .field("queue_max_bytes", &self.queue_max_bytes)
            .finish()
    }
}

impl KafkaSettings {
    /// Parses `--kafka-config` entries (reading `@FILE`s), refusing malformed
    /// ones, the settings the forwarder owns, and a `message.max.bytes` other
    /// than `message_max_bytes` (prepare checks records against that one).
    pub(crate) fn parse_extra(
        entries: &[KafkaConfigArg],
        message_max_bytes: usize,
    ) -> anyhow::Result<Vec<(String, String)>> {
        kafka_settings::settings(entries)?
            .into_iter()
            .map(|(k, v)| {
                let k = k.as_str();
                if RESERVED_SETTINGS.contains(&k) {
                    anyhow::bail!(
                        "--kafka-config {k} is set by trustmsg (idempotence and acks=all keep \
                         messages from being lost; use --kafka-brokers and \
                         --kafka-message-timeout for the others)"
                    );
                }
                if k == QUEUE_MAX_KBYTES {
                    anyhow::bail!(
                        "--kafka-config {k} is set by trustmsg from --payload-budget-mib, \
                         which bounds the payloads held for sending: set that instead"
                    );
                }
                if k == MESSAGE_MAX_BYTES && v != message_max_bytes.to_string() {
                    anyhow::bail!(
                        "--kafka-config {k}={v} disagrees with --kafka-message-max-bytes \
                         ({message_max_bytes}), which prepare checks records against: \
                         set --kafka-message-max-bytes instead"
                    );
                }
                Ok((k.to_string(), v))
            })
            .collect()
    }

    /// The cluster and `--kafka-config` alone, for the clients beside the
    /// producer (the exactly-once mode's progress reader and topic
    /// creator), as the Kafka way in's consumer takes them: TLS and SASL
    /// reach them, a producer's setting is ignored with a warning.
    pub(super) fn connection(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        for (k, v) in &self.extra {
            c.set(k, v);
        }
        c.set("bootstrap.servers", &self.brokers);
        c
    }

    pub(super) fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        // librdkafka waits 5 ms for company before sending a batch. 0 sends
        // at once: against a real broker, produce → ack p50 fell from
        // 1.4-1.7 ms (1 ms) to 0.3-0.5 ms at 100-500 msg/s (issue 61,
        // docs/performance.md), and under load batches still fill while
        // earlier requests are in flight (idempotence allows five). Any
        // value above 0 waits about a millisecond (0.2 measured as 1).
        // --kafka-config linger.ms=N trades that back for fewer, larger
        // produce requests.
        c.set("linger.ms", "0");
        for (k, v) in &self.extra {
            c.set(k, v);
        }
        c.set("bootstrap.servers", &self.brokers)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set(MESSAGE_MAX_BYTES, self.message_max_bytes.to_string())
            // librdkafka counts payload bytes against it, as the budget does,
            // so its queue never refuses a send the budget let through
            // (librdkafka's own default is 1 GiB).
            .set(
                QUEUE_MAX_KBYTES,
                self.queue_max_bytes
                    .div_ceil(1024)
                    .clamp(1, i32::MAX as usize)
                    .to_string(),
            )
            .set(
                "message.timeout.ms",
                self.message_timeout.as_millis().max(1).to_string(),
            );
        c
    }
}

/// How long [`KafkaSink::answering`] waits for the cluster's metadata: a
/// cluster that answers does so in milliseconds, and the probe adds to the
/// time of the send that asks, which must stay well inside its send claim
/// (`--send-lease` is only required to exceed `--kafka-message-timeout`).
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// How long a cluster found silent is taken to stay silent: the timed-out
/// sends meanwhile do not ask again.
const SILENT_FOR: Duration = Duration::from_secs(2);

/// Why a producer was replaced: the `reason` label of
/// `trustmsg_kafka_producer_rebuilds_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stall {
    /// librdkafka raised a fatal error: every later send would fail.
    Fatal,
    /// The broker no longer knows or accepts this producer's id, epoch or
    /// sequence (it lost its state, the id expired, or the producer was fenced).
    ProducerState,
    /// Sends time out although the cluster answers.
    TimedOutWhileAnswering,
}

impl Stall {
    fn label(self) -> &'static str {
        match self {
            Self::Fatal => "fatal",
            Self::ProducerState => "producer_state",
            Self::TimedOutWhileAnswering => "timed_out_while_answering",
        }
    }
}

/// What a failed send says about the producer itself: `Some` when it can no
/// longer make progress whatever the cluster does, `None` when the failure is
/// the record's or the cluster's. A timeout is not decided here: it stalls the
/// producer only while the cluster answers ([`KafkaSink::answering`]).
pub(crate) fn stall(e: &KafkaError) -> Option<Stall> {
    use RDKafkaErrorCode as C;
    match e.rdkafka_error_code()? {
        C::Fatal => Some(Stall::Fatal),
        C::Fenced
        | C::ProducerFenced
        | C::UnknownProducerId
        | C::OutOfOrderSequenceNumber
        | C::InvalidProducerEpoch
        | C::InvalidProducerIdMapping => Some(Stall::ProducerState),
        _ => None,
    }
}

/// Whether a send failed by timing out in flight (not queued, not refused).
fn timed_out(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(RDKafkaErrorCode::MessageTimedOut | RDKafkaErrorCode::RequestTimedOut)
    )
}

/// Publishes messages; cheap to share behind an `Arc`.
pub(crate) struct KafkaSink {
    settings: KafkaSettings,
    producer: RwLock<Arc<KafkaProducer>>,
    /// One metadata probe at a time: a burst of timeouts asks the cluster
    /// once; a send that finds a probe running does not wait for it (that
    /// probe replaces the producer if it must), and the sends after it find
    /// the producer already replaced, or the cluster found silent (when,
    /// held here) so short a time ago that they do not ask again: in an
    /// outage every send times out, and asking once per send would hold each
    /// one for a probe.
    probe: tokio::sync::Mutex<Option<Instant>>,
}

impl std::fmt::Debug for KafkaSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSink")
            .field("brokers", &self.settings.brokers)
            .finish_non_exhaustive()
    }
}

impl KafkaSink {
    /// Builds the producer (it connects lazily, so a down cluster is not an error here).
    pub(crate) fn new(settings: KafkaSettings) -> anyhow::Result<Self> {
        let producer = Arc::new(Self::create(&settings)?);
        Ok(Self {
            settings,
            producer: RwLock::new(producer),
            probe: tokio::sync::Mutex::new(None),
        })
    }

    fn create(settings: &KafkaSettings) -> anyhow::Result<KafkaProducer> {
        settings
            .client_config()
            .create_with_context(Reports)
            .map_err(|e| anyhow::anyhow!("invalid Kafka producer configuration: {e}"))
    }

    fn current(&self) -> Arc<KafkaProducer> {
        self.producer
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces `failed` by a fresh producer unless another send already did.
    /// Returns whether `failed` is gone (replaced now or before).
    fn replace(&self, failed: &Arc<KafkaProducer>, why: Stall, error: &KafkaError) -> bool {
        let mut slot = self.producer.write().unwrap_or_else(|p| p.into_inner());
        if !Arc::ptr_eq(&slot, failed) {
            return true;
        }
        match Self::create(&self.settings) {
            Ok(p) => {
                metrics::counter!("trustmsg_kafka_producer_rebuilds_total", "reason" => why.label())
                    .increment(1);
                tracing::warn!(
                    reason = why.label(),
                    error = %error,
                    "the Kafka producer can no longer make progress; replaced it with a new one \
                     (its unfinished sends are retried without counting an attempt)"
                );
                *slot = Arc::new(p);
                true
            }
            Err(e) => {
                tracing::error!(error = %e, "could not rebuild the Kafka producer");
                false
            }
        }
    }

    /// Whether the cluster answers `producer` now (a metadata request within
    /// [`PROBE_TIMEOUT`]): then a timed-out send is the producer's fault.
    async fn answering(&self, producer: &Arc<KafkaProducer>) -> bool {
        let p = producer.clone();
        tokio::task::spawn_blocking(move || p.client().fetch_metadata(None, PROBE_TIMEOUT).is_ok())
            .await
            .unwrap_or(false)
    }

    /// Asks the cluster for `topic`'s metadata through `producer` (within
    /// [`PROBE_TIMEOUT`]), which replaces what librdkafka remembers of it:
    /// a topic it holds as refused is sendable again if the broker now says
    /// so. An unanswered request changes nothing.
    async fn refresh_topic(&self, producer: &Arc<KafkaProducer>, topic: &str) {
        let (p, topic) = (producer.clone(), topic.to_owned());
        let asked = tokio::task::spawn_blocking(move || {
            p.client().fetch_metadata(Some(&topic), PROBE_TIMEOUT)
        });
        if let Ok(Err(e)) = asked.await {
            tracing::debug!(error = %e, "a refused topic's metadata was not fetched");
        }
    }

    /// Decides whether `e`, met by a send through `producer`, means the
    /// producer is stuck; if so replaces it (once per producer) and says why.
    async fn diagnose(&self, producer: &Arc<KafkaProducer>, e: &KafkaError) -> Option<Stall> {
        let why = match (stall(e), producer.client().fatal_error()) {
            (Some(why), _) => why,
            (None, Some(_)) => Stall::Fatal,
            (None, None) if timed_out(e) => {
                if !Arc::ptr_eq(&self.current(), producer) {
                    // Another send of the burst found it stuck and replaced it.
                    return Some(Stall::TimedOutWhileAnswering);
                }
                // Waiting for another send's probe would stretch this send
                // past its claim; that probe acts for the burst.
                let Ok(mut silent_since) = self.probe.try_lock() else {
                    return None;
                };
                if silent_since.is_some_and(|t| t.elapsed() < SILENT_FOR) {
                    return None;
                }
                if !self.answering(producer).await {
                    *silent_since = Some(Instant::now());
                    return None;
                }
                *silent_since = None;
                Stall::TimedOutWhileAnswering
            }
            (None, None) => return None,
        };
        self.replace(producer, why, e).then_some(why)
    }

    /// Sends `m` with `payload` as its value and waits for its delivery
    /// report: `(partition, offset)`. The payload is dropped as soon as
    /// librdkafka has taken its copy, so a send in flight holds it once.
    pub(crate) async fn send(
        &self,
        m: &Message,
        payload: Vec<u8>,
    ) -> Result<(i32, i64), SendError> {
        let Some(topic) = m.topic.as_deref() else {
            return Err(SendError::Permanent("message has no topic".into()));
        };
        let producer = self.current();
        let id = m.id.to_string();
        let record = |report: oneshot::Sender<Report>| {
            let record = BaseRecord::<'_, str, [u8], _>::with_opaque_to(topic, Box::new(report))
                .payload(payload.as_slice())
                .headers(record_headers(m, &id));
            match m.key.as_deref() {
                Some(k) => record.key(k),
                None => record,
            }
        };
        let (report, mut delivered) = oneshot::channel();
        let mut queued = enqueue(&producer, record(report)).await;
        if is_topic_refused(&queued) {
            // librdkafka refuses at once every record of a topic a broker
            // has refused (it marks the topic failed) until its metadata
            // says otherwise, which may be seconds after an operator fixed
            // the ACL and redelivered: ask the cluster now and try once
            // more, so the refusal is the broker's of today.
            self.refresh_topic(&producer, topic).await;
            let (report, again) = oneshot::channel();
            delivered = again;
            queued = enqueue(&producer, record(report)).await;
        }
        let delivered = match queued {
            Ok(()) => {
                drop(payload);
                // No report: the producer went away with the record taken.
                delivered.await.unwrap_or(Err(KafkaError::Canceled))
            }
            Err(e) => Err(e),
        };
        let result = match delivered {
            Ok(at) => Ok(at),
            Err(e) => Err(match self.diagnose(&producer, &e).await {
                Some(why) => SendError::Stalled(format!("{}: {e}", why.label())),
                None => classify(&e),
            }),
        };
        if !Arc::ptr_eq(&producer, &self.current()) {
            // Maybe the last holder of a replaced producer: destroying a
            // librdkafka handle waits for its threads, keep that off the
            // async workers.
            tokio::task::spawn_blocking(move || drop(producer));
        }
        result
    }
}

/// The record headers of `m` (whose id is `id`): its user headers, then
/// trustmsg's own and its trace context.
pub(super) fn record_headers(m: &Message, id: &str) -> OwnedHeaders {
    let mut headers = OwnedHeaders::new_with_capacity(m.headers.len() + 5);
    // A traced message's own trace context replaces user headers of the
    // same names: consumers' propagators read one of each.
    let traced = m.traceparent.is_some();
    for (k, v) in &m.headers {
        if traced && (k == kafka_headers::TRACEPARENT || k == kafka_headers::TRACESTATE) {
            continue;
        }
        headers = headers.insert(Header {
            key: k,
            value: Some(v.as_bytes()),
        });
    }
    headers = headers
        .insert(Header {
            key: kafka_headers::MESSAGE_ID,
            value: Some(id.as_bytes()),
        })
        .insert(Header {
            key: kafka_headers::BIZ_ID,
            value: Some(m.biz_id.as_bytes()),
        })
        .insert(Header {
            key: kafka_headers::MESSAGE_KEY,
            value: Some(m.message_key.as_bytes()),
        });
    if let Some(tp) = &m.traceparent {
        headers = headers.insert(Header {
            key: kafka_headers::TRACEPARENT,
            value: Some(tp.as_bytes()),
        });
        if let Some(ts) = &m.tracestate {
            headers = headers.insert(Header {
                key: kafka_headers::TRACESTATE,
                value: Some(ts.as_bytes()),
            });
        }
    }
    headers
}

/// A delivery report: where the record is, or why it is not. Never a copy
/// of the record: rdkafka's `FutureProducer` copies the payload into every
/// failed report, so a burst of timed-out sends (an outage) would hold each
/// payload twice, outside the payload budget.
pub(super) type Report = Result<(i32, i64), KafkaError>;

/// Hands each delivery report to the send waiting for it.
pub(crate) struct Reports;

impl ClientContext for Reports {}

impl ProducerContext for Reports {
    type DeliveryOpaque = Box<oneshot::Sender<Report>>;

    fn delivery(&self, result: &DeliveryResult<'_>, to: Self::DeliveryOpaque) {
        let report = match result {
            Ok(m) => Ok((m.partition(), m.offset())),
            Err((e, _)) => Err(e.clone()),
        };
        // The send may have been given up (shutdown): nobody to tell.
        let _ = to.send(report);
    }
}

/// The producer: librdkafka's, polled by a thread of its own, reporting
/// through [`Reports`].
pub(super) type KafkaProducer = ThreadedProducer<Reports>;

/// A record whose report goes to its send.
pub(super) type Record<'a> = BaseRecord<'a, str, [u8], Box<oneshot::Sender<Report>>>;

/// Hands `record` to librdkafka's queue, waiting up to [`QUEUE_TIMEOUT`]
/// for room in it. librdkafka has copied the record once this returns.
pub(super) async fn enqueue(
    producer: &KafkaProducer,
    mut record: Record<'_>,
) -> Result<(), KafkaError> {
    let deadline = Instant::now() + QUEUE_TIMEOUT;
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back))
                if Instant::now() < deadline =>
            {
                record = back;
                tokio::time::sleep(QUEUE_RETRY).await;
            }
            Err((e, _)) => return Err(e),
        }
    }
}

/// Whether librdkafka refused to take a record because its topic's
/// authorization failed: a refusal it remembers, made before this record.
fn is_topic_refused(queued: &Result<(), KafkaError>) -> bool {
    matches!(
        queued,
        Err(KafkaError::MessageProduction(
            RDKafkaErrorCode::TopicAuthorizationFailed
        ))
    )
}

/// Sorts a produce error into what the forwarder does next.
pub(crate) fn classify(e: &KafkaError) -> SendError {
    use RDKafkaErrorCode as C;
    let text = e.to_string();
    // The delivery report never came because the producer went away after
    // taking the record: it may be in Kafka.
    if matches!(e, KafkaError::Canceled) {
        return SendError::PossiblyPersisted(text);
    }
    match e.rdkafka_error_code() {
        Some(
            C::InvalidTopic
            | C::MessageSizeTooLarge
            | C::MessageBatchTooLarge
            | C::InvalidMessageSize
            | C::InvalidRecord
            | C::TopicAuthorizationFailed
            | C::ClusterAuthorizationFailed
            | C::TransactionalIdAuthorizationFailed,
        ) => SendError::Permanent(text),
        // Timed out waiting for an acknowledgement, or the producer went away with
        // the send in flight: Kafka may have the record.
        Some(C::MessageTimedOut | C::RequestTimedOut | C::OperationTimedOut | C::TimedOutQueue)
        | Some(C::Fatal | C::PurgeInflight | C::BrokerDestroy) => {
            SendError::PossiblyPersisted(text)
        }
        // The producer's state, not the record: the producer is replaced
        // ([`stall`]); should that fail, the record is still not at fault.
        Some(
            C::Fenced
            | C::ProducerFenced
            | C::UnknownProducerId
            | C::OutOfOrderSequenceNumber
            | C::InvalidProducerEpoch
            | C::InvalidProducerIdMapping,
        ) => SendError::PossiblyPersisted(text),
        Some(C::AllBrokersDown | C::BrokerTransportFailure | C::Resolve | C::QueueFull) => {
            SendError::Unreachable(text)
        }
        _ => SendError::Transient(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use crate::handoff::record::record_size;

    fn produce(code: RDKafkaErrorCode) -> KafkaError {
        KafkaError::MessageProduction(code)
    }

    #[test]
    fn oversized_unauthorised_and_invalid_topic_records_are_permanent() {
        for code in [
            RDKafkaErrorCode::MessageSizeTooLarge,
            RDKafkaErrorCode::InvalidTopic,
            RDKafkaErrorCode::TopicAuthorizationFailed,
        ] {
            assert!(
                matches!(classify(&produce(code)), SendError::Permanent(_)),
                "{code:?}"
            );
        }
    }

    #[test]
    fn timeouts_are_possibly_persisted_not_failures() {
        assert!(matches!(
            classify(&produce(RDKafkaErrorCode::MessageTimedOut)),
            SendError::PossiblyPersisted(_)
        ));
    }

    #[test]
    fn a_delivery_cancelled_with_the_send_in_flight_is_possibly_persisted() {
        // The delivery future is cancelled when the producer goes away with the
        // record handed over: Kafka may have it.
        let e = classify(&KafkaError::Canceled);
        assert!(matches!(e, SendError::PossiblyPersisted(_)), "{e:?}");
        assert!(!e.counts_as_attempt());
    }

    #[test]
    fn broker_trouble_is_transient_and_counts_as_an_attempt() {
        for code in [
            RDKafkaErrorCode::NotEnoughReplicas,
            RDKafkaErrorCode::UnknownTopicOrPartition,
            RDKafkaErrorCode::LeaderNotAvailable,
        ] {
            let e = classify(&produce(code));
            assert!(matches!(e, SendError::Transient(_)), "{code:?}");
            assert!(e.counts_as_attempt(), "{code:?}");
        }
    }

    #[test]
    fn an_unreachable_cluster_is_retried_without_counting_an_attempt() {
        for code in [
            RDKafkaErrorCode::AllBrokersDown,
            RDKafkaErrorCode::BrokerTransportFailure,
            RDKafkaErrorCode::Resolve,
            RDKafkaErrorCode::QueueFull,
        ] {
            let e = classify(&produce(code));
            assert!(matches!(e, SendError::Unreachable(_)), "{code:?}");
            assert!(!e.counts_as_attempt(), "{code:?}");
        }
        let timeout = classify(&produce(RDKafkaErrorCode::MessageTimedOut));
        assert!(!timeout.counts_as_attempt());
    }

    #[test]
    fn the_brokers_producer_state_codes_and_fatal_errors_stall_the_producer() {
        for code in [
            RDKafkaErrorCode::UnknownProducerId,
            RDKafkaErrorCode::ProducerFenced,
            RDKafkaErrorCode::Fenced,
            RDKafkaErrorCode::OutOfOrderSequenceNumber,
            RDKafkaErrorCode::InvalidProducerEpoch,
            RDKafkaErrorCode::InvalidProducerIdMapping,
        ] {
            assert_eq!(
                stall(&produce(code)),
                Some(Stall::ProducerState),
                "{code:?}"
            );
            let e = classify(&produce(code));
            assert!(!e.counts_as_attempt(), "{code:?}: {e:?}");
        }
        assert_eq!(stall(&produce(RDKafkaErrorCode::Fatal)), Some(Stall::Fatal));
        assert!(!SendError::Stalled("x".into()).counts_as_attempt());
    }

    #[test]
    fn record_errors_outages_and_timeouts_alone_do_not_stall_the_producer() {
        // A timeout stalls it only while the cluster answers, which a send
        // error alone cannot tell.
        for code in [
            RDKafkaErrorCode::MessageTimedOut,
            RDKafkaErrorCode::AllBrokersDown,
            RDKafkaErrorCode::QueueFull,
            RDKafkaErrorCode::NotEnoughReplicas,
            RDKafkaErrorCode::MessageSizeTooLarge,
            RDKafkaErrorCode::FencedLeaderEpoch,
        ] {
            assert_eq!(stall(&produce(code)), None, "{code:?}");
        }
        assert_eq!(stall(&KafkaError::Canceled), None);
        assert!(timed_out(&produce(RDKafkaErrorCode::MessageTimedOut)));
        assert!(!timed_out(&produce(RDKafkaErrorCode::AllBrokersDown)));
    }

    #[test]
    fn reserved_settings_cannot_be_overridden() {
        let parse = |e: &str| KafkaSettings::parse_extra(&[e.into()], 1_000_000);
        assert!(parse("acks=1").is_err());
        assert!(parse("enable.idempotence=false").is_err());
        assert!(parse("linger.ms").is_err());
        assert_eq!(
            parse("linger.ms=5").unwrap(),
            vec![("linger.ms".to_string(), "5".to_string())]
        );
    }

    #[test]
    fn a_message_max_bytes_override_must_agree_with_the_flag() {
        let why = KafkaSettings::parse_extra(&["message.max.bytes=2000000".into()], 1_000_000)
            .unwrap_err()
            .to_string();
        assert!(why.contains("--kafka-message-max-bytes (1000000)"), "{why}");
        assert!(
            KafkaSettings::parse_extra(&["message.max.bytes=1000000".into()], 1_000_000).is_ok()
        );
    }

    /// Whether librdkafka, limited to `limit` bytes, takes a record of this
    /// shape into its queue (it checks the size there, before any broker).
    fn librdkafka_takes(
        limit: usize,
        key: &str,
        payload: &[u8],
        headers: &BTreeMap<String, String>,
        traced: bool,
    ) -> bool {
        use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:9")
            .set(MESSAGE_MAX_BYTES, limit.to_string())
            .create()
            .unwrap();
        let mut hdrs = OwnedHeaders::new();
        for (k, v) in headers {
            hdrs = hdrs.insert(Header {
                key: k,
                value: Some(v.as_bytes()),
            });
        }
        for (name, value) in [
            (kafka_headers::MESSAGE_ID, "12345"),
            (kafka_headers::BIZ_ID, "orders"),
            (kafka_headers::MESSAGE_KEY, "o-1"),
        ]
        .into_iter()
        .chain(traced.then_some((kafka_headers::TRACEPARENT, TRACEPARENT)))
        .chain(traced.then_some((kafka_headers::TRACESTATE, TRACESTATE_LONGEST.as_str())))
        {
            hdrs = hdrs.insert(Header {
                key: name,
                value: Some(value.as_bytes()),
            });
        }
        let record = BaseRecord::<str, [u8]>::to("t")
            .key(key)
            .payload(payload)
            .headers(hdrs);
        let taken = match producer.send(record) {
            Ok(()) => true,
            Err((e, _)) => {
                assert_eq!(
                    e.rdkafka_error_code(),
                    Some(RDKafkaErrorCode::MessageSizeTooLarge),
                    "{e}"
                );
                false
            }
        };
        producer.purge(rdkafka::producer::PurgeConfig::default().queue());
        taken
    }

    #[test]
    fn record_size_is_the_size_librdkafka_checks_against_its_limit() {
        let limit = 5_000;
        let mut headers = BTreeMap::new();
        headers.insert("content-type".to_string(), "application/json".to_string());
        headers.insert("h".repeat(70), "v".repeat(300));
        let key = "k".repeat(200);
        let fixed = record_size(Some(&key), 0, &headers, "orders", "o-1", Some(5), false);
        let fits = limit - fixed;
        assert_eq!(
            record_size(Some(&key), fits, &headers, "orders", "o-1", Some(5), false),
            limit
        );
        assert!(librdkafka_takes(
            limit,
            &key,
            &vec![b'x'; fits],
            &headers,
            false
        ));
        assert!(!librdkafka_takes(
            limit,
            &key,
            &vec![b'x'; fits + 1],
            &headers,
            false
        ));
        assert!(
            record_size(Some(&key), fits, &headers, "orders", "o-1", None, false) > limit,
            "an unknown id is counted at its longest"
        );
    }

    const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    static TRACESTATE_LONGEST: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("k={}", "v".repeat(510)));

    #[test]
    fn a_traced_record_counts_its_trace_headers_at_their_longest() {
        let limit = 5_000;
        let headers = BTreeMap::new();
        let fixed = record_size(Some("k"), 0, &headers, "orders", "o-1", Some(5), true);
        let fits = limit - fixed;
        assert_eq!(TRACESTATE_LONGEST.len(), 512);
        assert!(librdkafka_takes(
            limit,
            "k",
            &vec![b'x'; fits],
            &headers,
            true
        ));
        assert!(!librdkafka_takes(
            limit,
            "k",
            &vec![b'x'; fits + 1],
            &headers,
            true
        ));
    }
}
