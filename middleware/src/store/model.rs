//! The data model every backend stores and returns.
//!
//! These types carry no behaviour of their own beyond what defines identity:
//! [`NewMessage::digest`] decides whether a repeated prepare is "the same message"
//! (producer API: same content → 200, other content → 409), so it must stay stable
//! across versions; it encodes every field with its length so no two different
//! messages share an encoding.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use trustmsg_verify_api::admin::{AlertKind, AlertState};
use trustmsg_verify_api::consumers::ConsumptionState;
use trustmsg_verify_api::{MessageStatus, MessageView, SendStatus};

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
}

impl std::fmt::Display for Actor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Actor::Producer(b) => write!(f, "producer:{b}"),
            Actor::Verifier => f.write_str("verifier"),
            Actor::Forwarder => f.write_str("forwarder"),
            Actor::Operator(who) => write!(f, "operator:{who}"),
            Actor::Kafka => f.write_str("kafka"),
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

/// What a claim took (`claim_due_sends`, `claim_due_verifies`): the rows it
/// could read, and the rows it set aside because it could not.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Claimed {
    /// The claimed rows, in id order; each carries the claim's version.
    pub messages: Vec<Message>,
    /// Rows the claim could not read, now quarantined: out of the scan that
    /// found them, with the reason in `last_error` and an audit row. The
    /// caller alerts once for each.
    pub quarantined: Vec<Quarantined>,
    /// When the claim was taken, by the database clock (None when it took
    /// nothing): each row's claim lasts from then to its due column, which
    /// tells a claimer how long it holds each row.
    pub claimed_at: Option<DateTime<Utc>>,
    /// A send claim stopped before its limit because the next due row's
    /// payload did not fit its [`PayloadRoom`]: more is due, and waits for
    /// room.
    pub out_of_room: bool,
}

/// What one chunk of the move of long contents out of rows written before
/// migration 0018 did ([`crate::store::Store::move_payloads`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PayloadMove {
    /// Rows walked past.
    pub walked: u64,
    /// Of those, rows whose content was moved to `message_payloads`.
    pub moved: u64,
    /// The walk had reached the last row: there is nothing more to move.
    pub finished: bool,
}

impl PayloadMove {
    /// A walk that is over.
    pub const FINISHED: Self = Self {
        walked: 0,
        moved: 0,
        finished: true,
    };
}

/// How much payload a send claim may read ([`crate::store::Store::claim_due_sends`]):
/// it takes rows in due order while their payloads, by the length the
/// prepare recorded (`payload_bytes`), fit in `bytes`. A row from before
/// that column counts as `unknown` bytes (the largest a payload may be).
/// A claim's rows are read whole, so this is what bounds the memory a claim
/// takes, whatever the payloads turn out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadRoom {
    /// Payload bytes the claim may read.
    pub bytes: u64,
    /// What a row of unknown length counts for.
    pub unknown: u64,
}

impl PayloadRoom {
    /// Room for any number of rows of any size.
    pub const UNBOUNDED: Self = Self {
        bytes: u64::MAX,
        unknown: 0,
    };

    /// Whether `limit` rows fit whatever their lengths: the claim need not
    /// look at them first.
    pub fn fits_any(self, limit: u32) -> bool {
        u64::from(limit).saturating_mul(self.unknown) <= self.bytes
    }

    /// How many of `lengths` (in due order; None: unknown) fit, from the
    /// first on.
    pub fn prefix(self, lengths: impl IntoIterator<Item = Option<u64>>) -> usize {
        let mut used = 0u64;
        lengths
            .into_iter()
            .take_while(|len| {
                used = used.saturating_add(len.unwrap_or(self.unknown));
                used <= self.bytes
            })
            .count()
    }
}

/// How long a check-back claim lasts ([`crate::store::Store::claim_due_verifies`]):
/// per row, what its call may take plus a margin. A call takes at most its
/// producer's `verify_timeout_ms`, cut to `max_timeout` (`--verify-timeout-max`)
/// for a registration made under a higher cap; a row whose producer is not
/// registered is covered for `max_timeout`. So a crashed instance's rows come
/// back as soon as their own calls could have ended, not after a lease sized
/// for the slowest producer anyone may register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifyLease {
    /// Added to the call's timeout (`--verify-lease-margin`): the time a
    /// claimed row may wait for a free call slot, and the time the writes
    /// after its call have (see `crate::verifier`).
    pub margin: Duration,
    /// The longest one call may take (`--verify-timeout-max`).
    pub max_timeout: Duration,
}

impl VerifyLease {
    /// The longest a call to a producer registered with `timeout_ms` (None:
    /// not registered) may take.
    pub fn call_timeout(&self, timeout_ms: Option<u32>) -> Duration {
        timeout_ms.map_or(self.max_timeout, |ms| {
            Duration::from_millis(ms.into()).min(self.max_timeout)
        })
    }

    /// How long a claim on a row of a producer registered with `timeout_ms`
    /// (None: not registered) lasts.
    pub fn covering(&self, timeout_ms: Option<u32>) -> Duration {
        self.call_timeout(timeout_ms).saturating_add(self.margin)
    }
}

impl Claimed {
    /// Rows the claim took, readable or not: the number to compare with the
    /// limit asked for.
    pub fn taken(&self) -> usize {
        self.messages.len() + self.quarantined.len()
    }
}

/// A row a claim found due but could not read (an unknown value, headers
/// that are not JSON, …), and set aside: its due column is NULL, so no scan
/// takes it again until a person repairs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    pub id: u64,
    /// As far as it can be read (invalid UTF-8 replaced; empty if unreadable).
    pub biz_id: String,
    /// As far as it can be read, like `biz_id`.
    pub message_key: String,
    /// What is now in `last_error`: `quarantined: unreadable row: <why>`.
    pub reason: String,
}

/// The messages that wait for something, for `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Backlog {
    /// `(status, send_status, count)` for PREPARED, VERIFY_FAILED, and
    /// COMMITTED with PENDING or SEND_FAILED; states with none are absent.
    pub counts: Vec<(String, Option<String>, u64)>,
    /// When the oldest PREPARED message was prepared.
    pub oldest_prepared_at: Option<DateTime<Utc>>,
    /// Since when the oldest message whose send is PENDING and due has
    /// waited: its commit, or its `deliver_at` if later.
    pub oldest_pending_send_at: Option<DateTime<Utc>>,
    /// Committed messages whose send waits for a `deliver_at` still in the
    /// future: not backlog, so not in `counts` either.
    pub scheduled: u64,
    /// Alerts not yet delivered to the webhook (state pending).
    pub pending_alerts: u64,
    /// Submitted commits waiting for their prepare (the Kafka way in).
    pub waiting_commits: u64,
    /// When the oldest of them was raised.
    pub oldest_pending_alert_at: Option<DateTime<Utc>>,
    /// The database clock when this was read.
    pub at: DateTime<Utc>,
}

/// One check-back call, as the verifier records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckAttempt {
    pub message_id: u64,
    /// 1 for the first call of the message.
    pub attempt: u32,
    pub duration_ms: u32,
    /// None when no answer came (refused, timed out, denied address).
    pub http_status: Option<u16>,
    /// `commit`, `rollback`, `unknown` or `failed`.
    pub outcome: &'static str,
    /// A short reason when the call decided nothing.
    pub error: Option<String>,
}

/// A recorded check-back call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct CheckAttemptEntry {
    pub attempt: u32,
    pub at: DateTime<Utc>,
    pub duration_ms: u32,
    pub http_status: Option<u16>,
    pub outcome: String,
    pub error: Option<String>,
}

/// Which messages an operator lists; the fields that are set combine with AND.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageFilter {
    pub status: Option<MessageStatus>,
    pub send_status: Option<SendStatus>,
    pub biz_id: Option<String>,
    pub topic: Option<String>,
    /// Created at or after.
    pub created_after: Option<DateTime<Utc>>,
    /// Created strictly before.
    pub created_before: Option<DateTime<Utc>>,
}

/// What an operator's repair puts back in the queue it failed out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    /// COMMITTED + SEND_FAILED → PENDING: send attempts back to 0, sent again at once.
    Redeliver,
    /// VERIFY_FAILED → PREPARED: check-back attempts back to 0, checked again at once.
    Reverify,
}

/// What one chunk of a bulk [`Requeue`] did, in one transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequeuedChunk {
    /// Rows changed (each with its audit row).
    pub changed: u64,
    /// The highest id the chunk changed: the next chunk starts after it.
    /// None when no row was left to change.
    pub last_id: Option<u64>,
}

/// One producer's messages at a glance: exact counts of the messages an
/// operator may still act on, and how many finished recently.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerSummary {
    pub biz_id: String,
    /// Live messages by status: `PREPARED`, `VERIFY_FAILED`, and `COMMITTED`
    /// not yet in Kafka; states with none are absent.
    pub by_status: BTreeMap<String, u64>,
    /// Committed messages not yet in Kafka by send status (`PENDING`,
    /// `SEND_FAILED`).
    pub by_send_status: BTreeMap<String, u64>,
    /// Messages that reached SENT within the summary's recent window.
    pub sent_recently: u64,
    /// Messages ROLLED_BACK within the summary's recent window.
    pub rolled_back_recently: u64,
    /// When the oldest message still PREPARED was prepared.
    pub oldest_prepared_at: Option<DateTime<Utc>>,
    /// Since when the oldest message whose send is still PENDING (and due)
    /// has waited: its commit, or its `deliver_at` if later.
    pub oldest_pending_send_at: Option<DateTime<Utc>>,
    /// Committed messages waiting for a `deliver_at` still in the future;
    /// not in `by_status` or `by_send_status`.
    pub scheduled: u64,
}

/// What an overdue message has been waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Its send to Kafka: COMMITTED, send still PENDING, counted from the
    /// commit or from its `deliver_at` if that came later.
    Send,
    /// A decision: PREPARED, counted from the prepare.
    Decision,
}

/// A message [`crate::store::Store::flag_overdue`] flagged: it has waited
/// longer than the threshold, and this call is the one that found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overdue {
    pub id: u64,
    pub biz_id: String,
    pub message_key: String,
    /// Send attempts ([`Wait::Send`]) or check-back attempts ([`Wait::Decision`]).
    pub attempts: u32,
    /// When the wait began: the commit, or the prepare (None if unreadable).
    pub since: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
}

/// An alert as raised, before the outbox gives it its id: what the webhook
/// body and the ERROR log line say about the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAlert {
    pub kind: AlertKind,
    pub message_id: u64,
    pub biz_id: String,
    pub message_key: String,
    /// Check-back attempts (verify_failed, verify_overdue) or send attempts
    /// (send_failed, send_overdue); 0 for a quarantined row, whose counters
    /// may be what is unreadable.
    pub attempts: u32,
    pub last_error: String,
    /// The consumer group of a consumption alert; None for a message alert.
    pub group: Option<String>,
}

impl NewAlert {
    /// The alert of a message that has just become VERIFY_FAILED or
    /// SEND_FAILED (`kind`), as the row now stands.
    pub(crate) fn failed(kind: AlertKind, m: &Message) -> Self {
        let attempts = match kind {
            AlertKind::SendFailed | AlertKind::SendOverdue => m.send_attempts,
            _ => m.verify_attempts,
        };
        Self {
            kind,
            message_id: m.id,
            biz_id: m.biz_id.clone(),
            message_key: m.message_key.clone(),
            attempts,
            last_error: m.last_error.clone().unwrap_or_default(),
            group: None,
        }
    }

    /// The alert of a row a claim set aside.
    pub(crate) fn quarantined(q: &Quarantined) -> Self {
        Self {
            kind: AlertKind::Quarantined,
            message_id: q.id,
            biz_id: q.biz_id.clone(),
            message_key: q.message_key.clone(),
            attempts: 0,
            last_error: q.reason.clone(),
            group: None,
        }
    }

    /// The alert of a message that has waited for `wait` longer than `after`.
    pub(crate) fn overdue(wait: Wait, after: Duration, o: &Overdue) -> Self {
        let (kind, waiting) = match wait {
            Wait::Send => (AlertKind::SendOverdue, "committed and not yet in Kafka"),
            Wait::Decision => (AlertKind::VerifyOverdue, "prepared and not yet decided"),
        };
        let since = o
            .since
            .map_or_else(|| "an unreadable time".to_string(), |t| t.to_rfc3339());
        let last = o.last_error.as_deref().unwrap_or("none");
        Self {
            kind,
            message_id: o.id,
            biz_id: o.biz_id.clone(),
            message_key: o.message_key.clone(),
            attempts: o.attempts,
            last_error: format!(
                "{waiting} for more than {} (since {since}); last error: {last}",
                humantime::format_duration(after)
            ),
            group: None,
        }
    }
}

/// A registered consumer group (the consumption ledger).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroup {
    pub name: String,
    /// The topics it consumes: exact names, prefixes ending in `*`, or `*`.
    pub topics: Vec<String>,
    /// SHA-256 of the group's bearer token.
    pub token_hash: Vec<u8>,
    pub max_failures: u32,
    pub in_progress_timeout_ms: u32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl ConsumerGroup {
    /// How long a begun consumption holds its message.
    pub fn in_progress_timeout(&self) -> Duration {
        Duration::from_millis(u64::from(self.in_progress_timeout_ms))
    }
}

/// What a consumer group registration stores; an update keeps the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupRecord {
    pub name: String,
    pub topics: Vec<String>,
    /// Stored on creation only.
    pub token_hash: Vec<u8>,
    pub max_failures: u32,
    pub in_progress_timeout_ms: u32,
}

/// One group's consumption of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumption {
    pub group: String,
    pub message_id: u64,
    pub state: ConsumptionState,
    pub attempts: u32,
    pub last_error: Option<String>,
    pub first_began_at: DateTime<Utc>,
    pub last_began_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
}

/// What a begin decided ([`crate::store::Store::begin_consumption`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Began {
    /// No such message.
    UnknownMessage,
    /// Go (first time, retry or takeover): the row as this begin left it.
    Go(Consumption),
    /// Another delivery holds it: the row as it is.
    InProgress(Consumption),
    /// Processed already.
    Done(Consumption),
}

/// What a finish did ([`crate::store::Store::finish_consumption`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finished {
    /// No such message.
    UnknownMessage,
    /// The group never began this message.
    NotBegun,
    /// Recorded: the row as this finish left it (or, for a repeat of the
    /// finish that made it so, as it was: nothing changed).
    Recorded { row: Consumption, changed: bool },
    /// The consumption is finished the other way (`done` and a failure
    /// came, or `failed` and a success came without a begin first).
    Conflict(Consumption),
}

/// One consumer group at a glance.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerGroupCounts {
    pub group: String,
    pub topics: Vec<String>,
    pub processed: u64,
    pub failing: u64,
    pub in_progress: u64,
    pub lag: u64,
}

/// A consumption the stuck watch flagged (its alert raised).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StuckConsumption {
    pub group: String,
    pub message_id: u64,
    pub attempts: u32,
    pub since: DateTime<Utc>,
}

/// Which alerts an operator lists; the fields that are set combine with AND.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AlertFilter {
    pub state: Option<AlertState>,
    pub message_id: Option<u64>,
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

/// Kafka's acknowledgement of one record, to be written back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentMark {
    pub id: u64,
    /// The version the claim left on the row.
    pub version: u64,
    pub partition: i32,
    pub offset: i64,
    /// The message's place in its key when it is ordered ([`Message::order_pos`]):
    /// its SENT mark then also makes the key's next message due.
    pub order: Option<OrderPos>,
}

/// A commit submitted through Kafka before its prepare was seen, to be kept
/// until its prepare is in (the Kafka way in, `crate::submit`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewWaitingCommit {
    pub biz_id: String,
    pub message_key: String,
    /// Where the record was read: partition and offset of the submit topic.
    pub partition: i32,
    pub offset: i64,
    /// The record's key and headers as submitted (a commit has no value), so
    /// a dead-lettered commit is the record the producer sent.
    pub record_key: Option<Vec<u8>>,
    pub headers: Vec<(String, String)>,
    /// How long it may wait for its prepare.
    pub wait: Duration,
}

/// A waiting commit as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingCommit {
    pub id: u64,
    pub biz_id: String,
    pub message_key: String,
    pub partition: i32,
    pub offset: i64,
    pub record_key: Option<Vec<u8>>,
    pub headers: Vec<(String, String)>,
    /// Tries so far to apply it.
    pub attempts: u32,
    pub received_at: DateTime<Utc>,
    /// When it is dead-lettered if its prepare is still missing.
    pub give_up_at: DateTime<Utc>,
    /// When it is tried next (or its claim runs out).
    pub next_try_at: DateTime<Utc>,
    /// The database clock when it was read.
    pub now: DateTime<Utc>,
}

/// A producer registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Producer {
    pub biz_id: String,
    pub verify_url: String,
    pub verify_timeout_ms: u32,
    pub first_verify_after_ms: u32,
    pub max_verify_attempts: u32,
    /// SHA-256 of the bearer token.
    pub token_hash: Vec<u8>,
    pub signing_secret: String,
    /// The topics it may prepare for (exact names, prefixes ending in `*`,
    /// or `*`); None: no allow-list (any topic).
    pub topics: Option<Vec<String>>,
    /// In order per key (issue 28).
    pub ordered: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Producer {
    /// Whether its allow-list lets it prepare for `topic` (None: it has no
    /// list). A linear scan: a list holds at most a hundred short entries,
    /// and it runs on the registration the API already holds.
    pub fn allows_topic(&self, topic: &str) -> Option<bool> {
        let list = self.topics.as_ref()?;
        Some(list.iter().any(|entry| match entry.strip_suffix('*') {
            Some(prefix) => topic.starts_with(prefix),
            None => entry == topic,
        }))
    }
}

/// The writable fields of a producer registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerRecord {
    pub biz_id: String,
    pub verify_url: String,
    pub verify_timeout_ms: u32,
    pub first_verify_after_ms: u32,
    pub max_verify_attempts: u32,
    pub token_hash: Vec<u8>,
    pub signing_secret: String,
    /// Replaces the stored list on an update (None removes it).
    pub topics: Option<Vec<String>>,
    /// In order per key.
    pub ordered: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_room_fits_rows_in_order_until_the_next_would_overflow() {
        let room = PayloadRoom {
            bytes: 100,
            unknown: 60,
        };
        assert_eq!(room.prefix([Some(40), Some(60), Some(1)]), 2);
        assert_eq!(room.prefix([Some(41), None]), 1, "unknown counts as 60");
        // In order: a small row after one that does not fit waits too.
        assert_eq!(room.prefix([Some(101), Some(1)]), 0);
        assert_eq!(room.prefix([None, Some(40)]), 2);
        assert!(room.fits_any(1) && !room.fits_any(2));
        assert!(PayloadRoom::UNBOUNDED.fits_any(u32::MAX));
        assert_eq!(PayloadRoom::UNBOUNDED.prefix([Some(u64::MAX), None]), 2);
    }

    #[test]
    fn an_allow_list_matches_exact_names_and_prefixes_only() {
        let producer = |topics: Option<&[&str]>| Producer {
            biz_id: "shop".into(),
            verify_url: "http://127.0.0.1:9/check".into(),
            verify_timeout_ms: 1,
            first_verify_after_ms: 1,
            max_verify_attempts: 1,
            token_hash: vec![],
            signing_secret: String::new(),
            topics: topics.map(|t| t.iter().map(|s| s.to_string()).collect()),
            ordered: false,
            created_at: DateTime::<Utc>::MIN_UTC,
            updated_at: DateTime::<Utc>::MIN_UTC,
        };
        let shop = producer(Some(&["orders", "shop.*"]));
        for (topic, allowed) in [
            ("orders", true),
            ("shop.x", true),
            ("shop.", true),
            ("shop", false),
            ("orders2", false),
            ("Orders", false),
            ("payments", false),
        ] {
            assert_eq!(shop.allows_topic(topic), Some(allowed), "{topic}");
        }
        assert_eq!(producer(Some(&["*"])).allows_topic("anything"), Some(true));
        assert_eq!(producer(None).allows_topic("anything"), None);
    }

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

/// What happened in one minute, counted by the instances as they did it
/// (`flow_minutes`, see [`crate::store::Store::add_flow`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowCounts {
    /// Messages prepared (rows created; a repeated prepare is not counted).
    pub prepared: u64,
    /// Messages committed, by whoever decided (producer, check-back, operator).
    pub committed: u64,
    /// Messages rolled back (a rollback of an unknown message included).
    pub rolled_back: u64,
    /// Records Kafka acknowledged.
    pub sent: u64,
    /// Messages that went VERIFY_FAILED or SEND_FAILED.
    pub failed: u64,
    /// Check-back calls answered `commit`.
    pub checks_commit: u64,
    /// Check-back calls answered `rollback`.
    pub checks_rollback: u64,
    /// Check-back calls answered `unknown`.
    pub checks_unknown: u64,
    /// Check-back calls that got no usable answer.
    pub checks_failed: u64,
}

impl FlowCounts {
    /// The column names of `flow_minutes`, in the order of [`FlowCounts::values`].
    pub const COLUMNS: [&'static str; 9] = [
        "prepared",
        "committed",
        "rolled_back",
        "sent",
        "failed",
        "checks_commit",
        "checks_rollback",
        "checks_unknown",
        "checks_failed",
    ];

    /// The counts in the order of [`FlowCounts::COLUMNS`].
    pub fn values(&self) -> [u64; 9] {
        [
            self.prepared,
            self.committed,
            self.rolled_back,
            self.sent,
            self.failed,
            self.checks_commit,
            self.checks_rollback,
            self.checks_unknown,
            self.checks_failed,
        ]
    }

    /// The counts from values in the order of [`FlowCounts::COLUMNS`].
    pub fn from_values(v: [u64; 9]) -> Self {
        let [prepared, committed, rolled_back, sent, failed, checks_commit, checks_rollback, checks_unknown, checks_failed] =
            v;
        Self {
            prepared,
            committed,
            rolled_back,
            sent,
            failed,
            checks_commit,
            checks_rollback,
            checks_unknown,
            checks_failed,
        }
    }

    /// Whether nothing was counted.
    pub fn is_zero(&self) -> bool {
        self.values() == [0; 9]
    }
}

/// One minute of the flow: as one instance adds it
/// ([`crate::store::Store::add_flow`]), or as the sum of all is read back
/// ([`crate::store::Store::flow_since`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowMinute {
    /// The minute's start (seconds and below zero).
    pub minute: DateTime<Utc>,
    pub counts: FlowCounts,
    /// The backlog as last sampled in the minute; None when not sampled.
    pub backlog: Option<BacklogSample>,
}

/// The backlog at one moment, as `crate::workers::backlog` read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BacklogSample {
    /// When it was read (the database clock); of two samples of a minute
    /// the later one is kept, whichever instance adds it first.
    pub at: DateTime<Utc>,
    /// Messages PREPARED.
    pub prepared: u64,
    /// Committed messages whose send is PENDING (and due).
    pub pending: u64,
}
