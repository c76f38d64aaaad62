//! A message as stored, as asked for, and as changed: the row, a prepare,
//! a transition, who made it and the audit row it leaves.
//!
//! Beyond the types, what defines a message's identity lives here:
//! [`NewMessage::digest`] decides whether a repeated prepare is "the same
//! message" (producer API: same content → 200, other content → 409), so it
//! must stay stable across versions; it encodes every field with its length
//! so no two different messages share an encoding. [`order_key`] is the
//! same kind of identity for an ordered producer's key.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use trustmsg_verify_api::admin::{AuditView, MessageDetail};
use trustmsg_verify_api::{MessageStatus, MessageView, PayloadEncoding, SendStatus};

use super::{CheckAttemptEntry, Consumption};

/// A message row.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub id: u64,
    pub biz_id: String,
    pub message_key: String,
    /// None only for a rollback tombstone.
    pub topic: Option<String>,
    pub key: Option<String>,
    pub payload: Vec<u8>,
    pub headers: BTreeMap<String, String>,
    /// SHA-256 of the content (see [`NewMessage::digest`]); None for a tombstone.
    pub content_digest: Option<Vec<u8>>,
    pub status: MessageStatus,
    pub send_status: Option<SendStatus>,
    /// True for a row created by a rollback of an unknown message.
    pub tombstone: bool,
    pub version: u64,
    pub verify_attempts: u32,
    pub send_attempts: u32,
    pub last_error: Option<String>,
    pub next_verify_at: Option<DateTime<Utc>>,
    pub next_send_at: Option<DateTime<Utc>>,
    pub kafka_partition: Option<i32>,
    pub kafka_offset: Option<i64>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub decided_at: Option<DateTime<Utc>>,
    pub sent_at: Option<DateTime<Utc>>,
    /// An ordered producer's keyed message: its key's order group
    /// ([`order_key`]); None for every other message, and for one an
    /// operator skipped (taken out of its key's order).
    pub order_key: Option<Vec<u8>>,
    /// Its place in its key's commit order, taken at commit (None before).
    pub order_seq: Option<u64>,
    /// The earliest time it may be sent; None when it was not delayed.
    pub deliver_at: Option<DateTime<Utc>>,
    /// The prepare's W3C `traceparent`, version-00 form (migration 0011).
    pub traceparent: Option<String>,
    /// The prepare's W3C `tracestate`, kept only with a `traceparent`.
    pub tracestate: Option<String>,
}

impl Message {
    /// Where the message stands in its key's order, for its SENT mark: None
    /// when it is not ordered (or not committed yet).
    pub fn order_pos(&self) -> Option<OrderPos> {
        let key = self.order_key.as_deref()?.try_into().ok()?;
        Some(OrderPos {
            key,
            seq: self.order_seq?,
        })
    }

    /// Whether its commit left it waiting for its `deliver_at` rather than
    /// claimed for sending at once: the store's rule (a commit before
    /// `deliver_at` makes it due then) seen from the row it returned, whose
    /// `decided_at` is the commit's database clock. The forwarder's fast
    /// path leaves such a commit to the sweepers.
    pub fn scheduled_by_commit(&self) -> bool {
        matches!((self.deliver_at, self.decided_at), (Some(at), Some(decided)) if at > decided)
    }

    /// The admin API's whole view of the message (`GET
    /// /v1/admin/messages/{id}`, and `trustmsg admin archive find`), with
    /// what hangs off it: the payload as text when it is UTF-8, else base64.
    pub fn detail(
        self,
        audit: Vec<AuditEntry>,
        check_attempts: Vec<CheckAttemptEntry>,
        blocked_by: Option<u64>,
        consumptions: Vec<Consumption>,
    ) -> MessageDetail {
        let (payload, payload_encoding) = match std::str::from_utf8(&self.payload) {
            Ok(text) => (text.to_string(), PayloadEncoding::Utf8),
            Err(_) => (STANDARD.encode(&self.payload), PayloadEncoding::Base64),
        };
        MessageDetail {
            message: self.view(),
            payload,
            payload_encoding,
            headers: self.headers,
            audit: audit.into_iter().map(AuditEntry::view).collect(),
            check_attempts: check_attempts
                .into_iter()
                .map(CheckAttemptEntry::view)
                .collect(),
            blocked_by,
            consumptions: consumptions.into_iter().map(Consumption::view).collect(),
        }
    }

    /// The API's view of the row.
    pub fn view(&self) -> MessageView {
        MessageView {
            id: self.id,
            biz_id: self.biz_id.clone(),
            message_key: self.message_key.clone(),
            topic: self.topic.clone(),
            key: self.key.clone(),
            status: self.status,
            send_status: self.send_status,
            verify_attempts: self.verify_attempts,
            send_attempts: self.send_attempts,
            last_error: self.last_error.clone(),
            payload_size: self.payload.len() as u64,
            next_verify_at: self.next_verify_at,
            next_send_at: self.next_send_at,
            kafka_partition: self.kafka_partition,
            kafka_offset: self.kafka_offset,
            created_at: self.created_at,
            updated_at: self.updated_at,
            decided_at: self.decided_at,
            sent_at: self.sent_at,
            order_seq: self.order_seq,
            deliver_at: self.deliver_at,
            trace_id: self
                .traceparent
                .as_deref()
                .and_then(trustmsg_verify_api::trace_context::trace_id_of),
        }
    }
}

/// The order group of an ordered producer's message: SHA-256 over biz_id,
/// topic and record key, each with its length, so no two keys share one.
pub fn order_key(biz_id: &str, topic: &str, record_key: &str) -> Vec<u8> {
    let mut h = Sha256::new();
    for part in [biz_id, topic, record_key] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    h.finalize().to_vec()
}

/// A committed ordered message's place: its key and its seq in that key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderPos {
    pub key: [u8; 32],
    pub seq: u64,
}

/// A validated prepare, ready to insert.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMessage {
    pub biz_id: String,
    pub message_key: String,
    pub topic: String,
    pub key: Option<String>,
    pub payload: Vec<u8>,
    pub headers: BTreeMap<String, String>,
    /// Delay from now (database clock) until the first check-back.
    pub first_verify_after: Duration,
    /// The validated W3C `traceparent` to store (version-00 form). Not part
    /// of the content: a retried prepare under another trace is the same message.
    pub traceparent: Option<String>,
    /// The validated `tracestate`, only with a `traceparent`.
    pub tracestate: Option<String>,
    /// [`order_key`] when the producer is registered ordered and the
    /// message has a record key; None otherwise. Not part of the content:
    /// it follows the registration at the time of the prepare.
    pub order_key: Option<Vec<u8>>,
    /// When it may be sent at the earliest; None: as soon as committed.
    pub deliver: Option<Delivery>,
}

/// A message its producer's own transaction committed (a relayed row of
/// its outbox table), to be created COMMITTED with the audit row that says
/// who decided it ([`crate::store::MessageStore::insert_committed_batch`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NewCommitted {
    pub message: NewMessage,
    pub actor: Actor,
    pub reason: String,
}

/// A prepare's delivery time, as the producer gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// `deliver_at`: this instant (millisecond precision).
    At(DateTime<Utc>),
    /// `deliver_after_ms`: this long after the prepare, by the database
    /// clock (the clock every due-time uses, so instances with skewed clocks
    /// agree; the row's `created_at` is the same reading).
    After(Duration),
}

impl NewMessage {
    /// The digest that makes prepare idempotent: same digest, same message.
    /// A delivery time takes part as the producer gave it (an instant, or a
    /// delay in ms), so a replayed prepare with `deliver_after_ms` is the
    /// same message although the clock moved; a message without one has the
    /// digest it always had.
    pub fn digest(&self) -> Vec<u8> {
        content_digest(
            &self.topic,
            self.key.as_deref(),
            &self.payload,
            &self.headers,
            self.deliver,
        )
    }
}

/// SHA-256 over an unambiguous encoding of everything that reaches Kafka.
fn content_digest(
    topic: &str,
    key: Option<&str>,
    payload: &[u8],
    headers: &BTreeMap<String, String>,
    deliver: Option<Delivery>,
) -> Vec<u8> {
    fn field(h: &mut Sha256, bytes: &[u8]) {
        h.update((bytes.len() as u64).to_be_bytes());
        h.update(bytes);
    }
    let mut h = Sha256::new();
    field(&mut h, topic.as_bytes());
    match key {
        Some(k) => {
            h.update([1]);
            field(&mut h, k.as_bytes());
        }
        None => h.update([0]),
    }
    field(&mut h, payload);
    h.update((headers.len() as u64).to_be_bytes());
    for (k, v) in headers {
        field(&mut h, k.as_bytes());
        field(&mut h, v.as_bytes());
    }
    // Appended only when given: earlier digests stay valid.
    match deliver {
        None => {}
        Some(Delivery::At(t)) => {
            h.update([b'@']);
            h.update(t.timestamp_millis().to_be_bytes());
        }
        Some(Delivery::After(d)) => {
            h.update([b'+']);
            h.update(
                u64::try_from(d.as_millis())
                    .unwrap_or(u64::MAX)
                    .to_be_bytes(),
            );
        }
    }
    h.finalize().to_vec()
}

/// The outcome of inserting a prepared message.
#[derive(Debug, Clone, PartialEq)]
pub enum Inserted {
    /// A new row.
    Created(Message),
    /// (biz_id, message_key) already existed; this is the existing row.
    Existing(Message),
}

impl Inserted {
    /// The prepare found its own content in a message rolled back since:
    /// what the Kafka way in reads when Kafka delivers a prepare record
    /// again (at least once: a rebalance, a restart). It changes nothing
    /// there and is no dead letter, as any repeated record. Over HTTP the
    /// same prepare is refused 409 `already_rolled_back` (its caller waits
    /// for that answer before its local transaction); a producer of the
    /// Kafka way in gets Kafka's acknowledgement instead, and its barrier
    /// holds it.
    pub fn repeated_after_rollback(&self, digest: &[u8]) -> bool {
        matches!(self, Inserted::Existing(m)
            if !m.tombstone
                && m.status == MessageStatus::RolledBack
                && m.content_digest.as_deref() == Some(digest))
    }
}

/// Who made a change, for the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// The producer itself over the API.
    Producer(String),
    /// The verifier, after a check-back answer or the attempt limit.
    Verifier,
    /// The forwarder, after a send failure.
    Forwarder,
    /// A person through the admin API or CLI.
    Operator(String),
    /// The producer, through a record it submitted to Kafka (the Kafka way
    /// in); the message names the producer.
    Kafka,
    /// The producer's own transaction, which wrote the row to its outbox
    /// table (the local message table way), relayed by trustmsg; the
    /// message names the producer.
    Outbox,
}

impl std::fmt::Display for Actor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Actor::Producer(b) => write!(f, "producer:{b}"),
            Actor::Verifier => f.write_str("verifier"),
            Actor::Forwarder => f.write_str("forwarder"),
            Actor::Operator(who) => write!(f, "operator:{who}"),
            Actor::Kafka => f.write_str("kafka"),
            Actor::Outbox => f.write_str("outbox"),
        }
    }
}

/// One guarded status change of a message plus its audit row.
#[derive(Debug, Clone)]
pub struct Transition {
    pub id: u64,
    /// The state the row must still be in.
    pub from: MessageStatus,
    /// The version the row must still have.
    pub version: u64,
    pub to: MessageStatus,
    /// For `to = COMMITTED`: the send lease. The commit claims the row for this
    /// instance's forwarder (`next_send_at = now + lease`), which is the fast path.
    pub send_lease: Duration,
    /// Count this change as a check-back attempt (decisions made by check-back).
    pub verify_attempt: bool,
    /// Stored in `last_error` (VERIFY_FAILED) when set.
    pub error: Option<String>,
    pub actor: Actor,
    pub reason: String,
}

/// One audit row.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct AuditEntry {
    pub id: u64,
    pub message_id: u64,
    pub actor: String,
    pub action: String,
    pub from_status: Option<String>,
    pub to_status: Option<String>,
    pub from_send_status: Option<String>,
    pub to_send_status: Option<String>,
    pub reason: String,
    pub created_at: DateTime<Utc>,
}

impl AuditEntry {
    /// The admin API's view of the row.
    pub fn view(self) -> AuditView {
        AuditView {
            at: self.created_at,
            actor: self.actor,
            action: self.action,
            from_status: self.from_status,
            to_status: self.to_status,
            from_send_status: self.from_send_status,
            to_send_status: self.to_send_status,
            reason: self.reason,
        }
    }
}

/// A rollback of a message nobody prepared (`insert_tombstone`): the key it
/// names, who rolled it back and why.
#[derive(Debug, Clone, Copy)]
pub struct Tombstone<'a> {
    pub biz_id: &'a str,
    pub message_key: &'a str,
    pub actor: &'a Actor,
    pub reason: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_separates_fields_unambiguously() {
        let h = BTreeMap::new();
        assert_ne!(
            content_digest("ab", Some("c"), b"", &h, None),
            content_digest("a", Some("bc"), b"", &h, None)
        );
        assert_ne!(
            content_digest("t", None, b"", &h, None),
            content_digest("t", Some(""), b"", &h, None)
        );
        let mut h2 = BTreeMap::new();
        h2.insert("a".to_string(), "b".to_string());
        assert_ne!(
            content_digest("t", None, b"", &h, None),
            content_digest("t", None, b"", &h2, None)
        );
        assert_eq!(
            content_digest("t", None, b"x", &h2, None),
            content_digest("t", None, b"x", &h2, None)
        );
    }

    #[test]
    fn a_delivery_time_changes_the_digest_as_given_and_none_keeps_the_old_one() {
        let h = BTreeMap::new();
        // The digest of a message without a delivery time is the one every
        // version before it stored (SHA-256 of topic "t", no key, empty payload, no headers).
        let plain = content_digest("t", None, b"", &h, None);
        let mut old = Sha256::new();
        old.update(1u64.to_be_bytes());
        old.update(b"t");
        old.update([0]);
        old.update(0u64.to_be_bytes());
        old.update(0u64.to_be_bytes());
        assert_eq!(plain, old.finalize().to_vec());
        let at = DateTime::from_timestamp_millis(1_000).unwrap();
        let later = content_digest(
            "t",
            None,
            b"",
            &h,
            Some(Delivery::After(Duration::from_millis(1_000))),
        );
        let at_digest = content_digest("t", None, b"", &h, Some(Delivery::At(at)));
        assert_ne!(plain, later);
        assert_ne!(later, at_digest);
        assert_eq!(
            later,
            content_digest(
                "t",
                None,
                b"",
                &h,
                Some(Delivery::After(Duration::from_secs(1)))
            )
        );
        assert_ne!(
            later,
            content_digest(
                "t",
                None,
                b"",
                &h,
                Some(Delivery::After(Duration::from_secs(2)))
            )
        );
    }
}
