//! The Kafka way in (cargo feature `kafka`): prepare, commit and rollback
//! submitted as signed records to trustmsg's submit topic, for producers that
//! already speak Kafka (see `docs/kafka-submit.md` for the whole contract).
//!
//! What a [`Submitter`] guarantees, and what it cannot:
//!
//! - Each call produces **one** record, keyed by the message key, so every
//!   operation of one message lands on one partition and trustmsg applies
//!   them in the order they were acknowledged.
//! - A call returns `Ok` only once Kafka has **acknowledged** the record
//!   (`acks=all`, idempotent producer: no duplicates from librdkafka's own
//!   retries, no reordering). Acknowledged means durable in Kafka, *not*
//!   applied by trustmsg: trustmsg reads the record later, and what it
//!   cannot apply (a bad signature, a prepare that conflicts, a commit after
//!   a rollback) goes to the dead-letter topic `<submit topic>.dlq` with the
//!   HTTP API's error code. The Submitter never learns that outcome; a
//!   message whose decision was dead-lettered stays PREPARED until
//!   check-back asks the producer, which is why a producer on this way in
//!   must answer check-back (see [`barrier`](crate::barrier)).
//! - A record Kafka does not acknowledge within `message.timeout.ms` (30 s
//!   unless the settings say otherwise) is [`Error::NotAcknowledged`]. It
//!   may still have been written; every operation is idempotent in trustmsg,
//!   so submitting it again is safe.
//! - What the record signature cannot express (a line break in a field or
//!   header, an `=` in a header name) and user headers in the reserved
//!   `trustmsg-` namespace are refused here, before anything is sent, as
//!   [`Error::Invalid`]: trustmsg would only dead-letter them.
//! - The signing secret is never shown by `Debug` nor logged.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use trustmsg_verify_api::kafka_headers::RESERVED_PREFIX;
use trustmsg_verify_api::submit::{self, Op, Signed, SubmitSignatureError};

use crate::{Error, Message};

/// librdkafka settings the Submitter owns: changing them would break what it
/// promises (acknowledged = written to every in-sync replica, once).
const RESERVED_SETTINGS: &[&str] = &[
    "bootstrap.servers",
    "metadata.broker.list",
    "enable.idempotence",
    "acks",
    "request.required.acks",
];

/// How long a call waits for acknowledgement unless the settings give
/// `message.timeout.ms`: librdkafka's own default (5 minutes) would hold a
/// transaction helper's local work back that long while Kafka is down.
const DEFAULT_MESSAGE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a call waits for room in librdkafka's local queue.
const QUEUE_TIMEOUT: Duration = Duration::from_secs(5);

/// The producer's signing secret, kept out of `Debug` output and logs.
#[derive(Clone)]
struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// Where an acknowledged record is in the submit topic: durable in Kafka,
/// not yet applied by trustmsg.
///
/// ```
/// let s = trustmsg_client::submit::Submitted { partition: 0, offset: 41 };
/// assert_eq!(s.offset, 41);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Submitted {
    /// The partition of the submit topic.
    pub partition: i32,
    /// The record's offset in it.
    pub offset: i64,
}

/// A producer that submits prepare, commit and rollback to trustmsg as
/// signed Kafka records (see the [module docs](self) for what an `Ok`
/// means). Cheap to clone: clones share one librdkafka producer.
///
/// ```no_run
/// use trustmsg_client::{submit::Submitter, Message};
///
/// # async fn run() -> Result<(), trustmsg_client::Error> {
/// let submitter = Submitter::new(
///     "kafka-1:9093,kafka-2:9093",
///     &[("security.protocol", "SASL_SSL"), ("sasl.mechanism", "SCRAM-SHA-256"),
///       ("sasl.username", "shop"), ("sasl.password", "…")],
///     "trustmsg.submit",
///     "shop",
///     "whsec_c2VjcmV0LWZyb20tcmVnaXN0cmF0aW9u",
/// )?;
/// submitter.prepare(&Message::new("order-42", "orders", r#"{"order":42}"#)).await?;
/// // ... the local transaction ...
/// submitter.commit("order-42").await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Submitter {
    producer: FutureProducer,
    topic: String,
    biz_id: String,
    secret: Secret,
}

impl std::fmt::Debug for Submitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Submitter")
            .field("topic", &self.topic)
            .field("biz_id", &self.biz_id)
            .field("secret", &self.secret)
            .finish_non_exhaustive()
    }
}

impl Submitter {
    /// A submitter producing to `topic` (trustmsg's `--submit-topic`) on
    /// `brokers` as producer `biz_id`, signing with its `signing_secret`
    /// (`whsec_…`, returned by its registration as `signing_secret`).
    ///
    /// `settings` are librdkafka settings for TLS, SASL and tuning, e.g.
    /// `("security.protocol", "SSL")`, `("message.timeout.ms", "10000")`
    /// (how long a call waits for acknowledgement; 30 s unless given). The
    /// Submitter always sets `enable.idempotence=true` and `acks=all`;
    /// settings that would change them, or the brokers, are refused.
    ///
    /// ```
    /// use trustmsg_client::submit::Submitter;
    ///
    /// let secret = "whsec_dHJ1c3Rtc2ctc3VibWl0LXRlc3Qta2V5LTMyYnl0ZXM=";
    /// let s = Submitter::new("127.0.0.1:9092", &[], "trustmsg.submit", "shop", secret).unwrap();
    /// assert_eq!(s.biz_id(), "shop");
    /// assert!(!format!("{s:?}").contains("whsec_"), "the secret stays out of logs");
    ///
    /// let weakened = Submitter::new("127.0.0.1:9092", &[("acks", "1")], "trustmsg.submit", "shop", secret);
    /// assert!(weakened.is_err());
    /// assert!(Submitter::new("127.0.0.1:9092", &[], "trustmsg.submit", "shop", "not-a-secret").is_err());
    /// ```
    pub fn new(
        brokers: &str,
        settings: &[(&str, &str)],
        topic: impl Into<String>,
        biz_id: impl Into<String>,
        signing_secret: impl Into<String>,
    ) -> Result<Self, Error> {
        let secret = Secret(signing_secret.into());
        // A secret that cannot sign would fail every call; say so now.
        let empty = BTreeMap::new();
        let probe = Signed {
            op: Op::Commit,
            biz_id: "",
            message_key: "",
            topic: "",
            key: None,
            headers: &empty,
            value: b"",
        };
        submit::sign(&secret.0, &probe)
            .map_err(|e| Error::Config(format!("signing secret: {e}")))?;

        let mut config = ClientConfig::new();
        config.set(
            "message.timeout.ms",
            DEFAULT_MESSAGE_TIMEOUT.as_millis().to_string(),
        );
        for (k, v) in settings {
            if RESERVED_SETTINGS.contains(k) {
                return Err(Error::Config(format!(
                    "Kafka setting {k:?} is the Submitter's own (brokers, enable.idempotence=true, acks=all)"
                )));
            }
            config.set(*k, *v);
        }
        config
            .set("bootstrap.servers", brokers)
            .set("enable.idempotence", "true")
            .set("acks", "all");
        let producer = config
            .create()
            .map_err(|e| Error::Config(format!("Kafka producer: {e}")))?;
        Ok(Self {
            producer,
            topic: topic.into(),
            biz_id: biz_id.into(),
            secret,
        })
    }

    /// The producer's id.
    ///
    /// ```
    /// # let secret = "whsec_dHJ1c3Rtc2ctc3VibWl0LXRlc3Qta2V5LTMyYnl0ZXM=";
    /// let s = trustmsg_client::submit::Submitter::new("127.0.0.1:9092", &[], "trustmsg.submit", "shop", secret).unwrap();
    /// assert_eq!(s.biz_id(), "shop");
    /// ```
    pub fn biz_id(&self) -> &str {
        &self.biz_id
    }

    /// The submit topic.
    ///
    /// ```
    /// # let secret = "whsec_dHJ1c3Rtc2ctc3VibWl0LXRlc3Qta2V5LTMyYnl0ZXM=";
    /// let s = trustmsg_client::submit::Submitter::new("127.0.0.1:9092", &[], "trustmsg.submit", "shop", secret).unwrap();
    /// assert_eq!(s.topic(), "trustmsg.submit");
    /// ```
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Submits the prepare of `message`: one record whose value is the
    /// payload's bytes, whose headers are the message's headers plus its
    /// delivery time (`trustmsg-deliver-after-ms` or `trustmsg-deliver-at`)
    /// and trace context (`traceparent`, `tracestate`), signed. Returns once
    /// Kafka acknowledged it; trustmsg then stores the message PREPARED, or
    /// dead-letters the record (e.g. `prepare_conflict`, `rolled_back`,
    /// `topic_not_allowed`).
    ///
    /// ```no_run
    /// # async fn run(submitter: trustmsg_client::submit::Submitter) -> Result<(), trustmsg_client::Error> {
    /// use std::time::Duration;
    /// use trustmsg_client::Message;
    ///
    /// let m = Message::new("reminder-7", "reminders", "{}")
    ///     .header("content-type", "application/json")
    ///     .deliver_after(Duration::from_secs(3600));
    /// let at = submitter.prepare(&m).await?;
    /// println!("prepare is at partition {} offset {}", at.partition, at.offset);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn prepare(&self, message: &Message) -> Result<Submitted, Error> {
        let req = message.to_request(&self.biz_id);
        let mut headers = req.headers.unwrap_or_default();
        if let Some(name) = headers
            .keys()
            .find(|n| n.to_ascii_lowercase().starts_with(RESERVED_PREFIX))
        {
            return Err(invalid(
                "invalid_headers",
                format!("header {name:?} uses the reserved prefix {RESERVED_PREFIX:?}; trustmsg sets those itself"),
            ));
        }
        if let Some(at) = req.deliver_at {
            headers.insert(submit::DELIVER_AT.to_string(), at);
        }
        if let Some(ms) = req.deliver_after_ms {
            headers.insert(submit::DELIVER_AFTER_MS.to_string(), ms.to_string());
        }
        // The explicit trace context wins over a user header of that name,
        // as over HTTP the request's trace headers win in the delivered record.
        for (name, value) in message.trace_headers() {
            headers.insert(name.to_string(), value);
        }
        let value = message.payload_bytes();
        self.send(Signed {
            op: Op::Prepare,
            biz_id: &self.biz_id,
            message_key: message.message_key(),
            topic: &req.topic,
            key: req.key.as_deref(),
            headers: &headers,
            value: &value,
        })
        .await
    }

    /// Submits the commit of message `message_key`: one record with an empty
    /// value. Returns once Kafka acknowledged it. trustmsg applies it once
    /// it has seen the prepare (a commit read first waits, up to its
    /// `--submit-commit-wait`, then is dead-lettered `message_not_found`); a
    /// commit after a rollback is dead-lettered `already_rolled_back`.
    ///
    /// ```no_run
    /// # async fn run(submitter: trustmsg_client::submit::Submitter) -> Result<(), trustmsg_client::Error> {
    /// submitter.commit("order-42").await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn commit(&self, message_key: &str) -> Result<Submitted, Error> {
        self.decide(Op::Commit, message_key).await
    }

    /// Submits the rollback of message `message_key`: one record with an
    /// empty value. Returns once Kafka acknowledged it. Read before its
    /// prepare, it leaves a tombstone, so the late prepare is dead-lettered
    /// `rolled_back`.
    ///
    /// ```no_run
    /// # async fn run(submitter: trustmsg_client::submit::Submitter) -> Result<(), trustmsg_client::Error> {
    /// submitter.rollback("order-42").await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn rollback(&self, message_key: &str) -> Result<Submitted, Error> {
        self.decide(Op::Rollback, message_key).await
    }

    async fn decide(&self, op: Op, message_key: &str) -> Result<Submitted, Error> {
        let none = BTreeMap::new();
        self.send(Signed {
            op,
            biz_id: &self.biz_id,
            message_key,
            topic: "",
            key: None,
            headers: &none,
            value: b"",
        })
        .await
    }

    /// Signs `r`, produces it keyed by its message key and waits for Kafka's
    /// acknowledgement.
    async fn send(&self, r: Signed<'_>) -> Result<Submitted, Error> {
        let signature = submit::sign(&self.secret.0, &r).map_err(|e| match e {
            SubmitSignatureError::Ambiguous(_) => invalid("invalid_request", e.to_string()),
            SubmitSignatureError::Signature(e) => Error::Config(format!("signing secret: {e}")),
        })?;
        let mut headers = OwnedHeaders::new_with_capacity(r.headers.len() + 6)
            .insert(header(submit::OP, r.op.as_str()))
            .insert(header(submit::BIZ_ID, r.biz_id))
            .insert(header(submit::MESSAGE_KEY, r.message_key));
        if r.op == Op::Prepare {
            headers = headers.insert(header(submit::TOPIC, r.topic));
            if let Some(key) = r.key {
                headers = headers.insert(header(submit::KEY, key));
            }
        }
        for (name, value) in r.headers {
            headers = headers.insert(header(name, value));
        }
        headers = headers.insert(header(submit::SIGNATURE, &signature));
        let record = FutureRecord::to(&self.topic)
            .key(r.message_key)
            .payload(r.value)
            .headers(headers);
        match self.producer.send(record, QUEUE_TIMEOUT).await {
            Ok(delivery) => Ok(Submitted {
                partition: delivery.partition,
                offset: delivery.offset,
            }),
            Err((e, _)) => {
                tracing::warn!(op = r.op.as_str(), message_key = %r.message_key, topic = %self.topic, error = %e, "submitted record not acknowledged");
                Err(Error::NotAcknowledged {
                    message: e.to_string(),
                })
            }
        }
    }
}

fn header<'a>(key: &'a str, value: &'a str) -> Header<'a, &'a str> {
    Header {
        key,
        value: Some(value),
    }
}

/// A refusal made here, with the code trustmsg's HTTP API would give.
fn invalid(code: &str, message: String) -> Error {
    Error::Invalid {
        status: 400,
        code: code.to_string(),
        message,
    }
}
