//! The intake: the rules and writes of a producer's messages, whichever
//! door they came through (the HTTP API, the Kafka way in, the outbox
//! relay). It validates a prepare and builds its row, prepares and decides
//! through the group commit, and says what an insert or a decision means
//! ([`Prepared`], [`IntakeError`]); it knows nothing of HTTP, Kafka records
//! or outbox rows. Each door translates its input into these calls and the
//! answers back into its own terms (`docs/architecture.md`, "The house").

mod error;
pub(crate) mod validate;

use std::time::Duration;

use trustmsg_verify_api::{MessageStatus, PrepareRequest};

pub(crate) use error::IntakeError;

use crate::group_commit::producer_writes::Coalescer;
use crate::registry::Registry;
use crate::store::{order_key, DecideOutcome, DynStore, Inserted, Message, NewMessage, Producer};

/// The limits and defaults every prepare is held to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Largest payload in bytes after decoding (`--max-payload-bytes`).
    pub(crate) max_payload_bytes: usize,
    /// Largest Kafka record a prepare may make (librdkafka's `message.max.bytes`).
    pub(crate) max_record_bytes: usize,
    /// Delay after prepare before the first check-back, for a producer
    /// with no registration.
    pub(crate) first_verify_after: Duration,
    /// Every producer must have a topic allow-list (`--require-producer-topics`).
    pub(crate) require_producer_topics: bool,
}

/// The intake's handles: cheap to clone, one per door.
#[derive(Clone)]
pub(crate) struct Intake {
    /// The message store (reads, and writes outside the group commit).
    pub(crate) store: DynStore,
    /// Producer registrations (cached).
    pub(crate) registry: Registry,
    /// Batches concurrent prepares and decisions into shared transactions.
    pub(crate) writes: Coalescer,
    /// What a prepare is held to.
    pub(crate) limits: Limits,
}

/// What a prepare's insert is for its caller, when it is not refused.
#[derive(Debug)]
pub(crate) enum Prepared {
    /// Stored now.
    Created(Message),
    /// Already stored with the same content: PREPARED, COMMITTED or
    /// VERIFY_FAILED, which the caller reads.
    Same(Message),
}

impl Intake {
    /// A prepare checked (limits, the producer's registration as the caller
    /// read it) and turned into the row to insert. `payload`: the bytes of a
    /// record submitted to Kafka or of an outbox row; None: `req.payload`,
    /// decoded as it says. Every door prepares through here, so a prepare
    /// is the same operation whichever way it came.
    pub(crate) fn new_message(
        &self,
        registered: Option<&Producer>,
        req: PrepareRequest,
        payload: Option<Vec<u8>>,
        traceparent: Option<String>,
        tracestate: Option<String>,
    ) -> Result<NewMessage, IntakeError> {
        let limits = &self.limits;
        let (max_payload, max_record) = (limits.max_payload_bytes, limits.max_record_bytes);
        let traced = traceparent.is_some();
        let valid = match payload {
            None => validate::prepare(&req, max_payload, max_record, traced)?,
            Some(bytes) => validate::prepare_bytes(&req, bytes, max_payload, max_record, traced)?,
        };
        topic_allowed(
            registered,
            &req.biz_id,
            &req.topic,
            limits.require_producer_topics,
        )?;
        // In order per key: taken from the registration as this prepare reads
        // it (the cached one); a message without a record key is not ordered,
        // as Kafka orders nothing without a key either.
        let order_key = match (registered, &req.key) {
            (Some(p), Some(key)) if p.ordered => Some(order_key(&req.biz_id, &req.topic, key)),
            _ => None,
        };
        let first_verify_after = registered.map_or(limits.first_verify_after, |p| {
            Duration::from_millis(p.first_verify_after_ms.into())
        });
        Ok(NewMessage {
            biz_id: req.biz_id,
            message_key: req.message_key,
            topic: req.topic,
            key: req.key,
            payload: valid.payload,
            headers: valid.headers,
            first_verify_after,
            order_key,
            deliver: valid.deliver,
            traceparent,
            tracestate,
        })
    }

    /// Prepares `new` through the group commit.
    pub(crate) async fn prepare(&self, new: NewMessage) -> Result<Prepared, IntakeError> {
        let digest = new.digest();
        prepared(self.writes.prepare(new).await?, &digest)
    }

    /// Commits (`commit`) or rolls back a message through the group commit.
    pub(crate) async fn decide(
        &self,
        biz_id: &str,
        message_key: &str,
        commit: bool,
    ) -> Result<Message, IntakeError> {
        let outcome = self
            .writes
            .decide(biz_id.to_string(), message_key.to_string(), commit)
            .await?;
        decided(outcome, commit, biz_id, message_key)
    }
}

/// What a prepare's insert means for its caller: created, the same content
/// again (PREPARED, COMMITTED or VERIFY_FAILED: the caller reads the
/// status), or refused: a tombstone, a message already rolled back, or
/// other content under the key.
///
/// A message already rolled back is refused whatever its content: a
/// producer that retries a request whose message it rolled back (its
/// business step failed, and it died before answering) must not run its
/// local transaction again, since the commit that would follow can never be
/// accepted (issue 58). A 200 with status ROLLED_BACK let such a retry
/// commit locally a change whose message is lost.
pub(crate) fn prepared(inserted: Inserted, digest: &[u8]) -> Result<Prepared, IntakeError> {
    match inserted {
        Inserted::Created(m) => Ok(Prepared::Created(m)),
        Inserted::Existing(m) if m.tombstone => Err(IntakeError::conflict(
            "rolled_back",
            format!(
                "message {:?} of {:?} was rolled back before it was prepared; use a new message_key",
                m.message_key, m.biz_id
            ),
        )),
        Inserted::Existing(m) if m.status == MessageStatus::RolledBack => {
            Err(IntakeError::conflict(
                "already_rolled_back",
                format!(
                    "message {:?} of {:?} is already ROLLED_BACK; its decision is final: do not \
                     run the local transaction again, and use a new message_key for a new attempt",
                    m.message_key, m.biz_id
                ),
            ))
        }
        Inserted::Existing(m) if m.content_digest.as_deref() == Some(digest) => {
            Ok(Prepared::Same(m))
        }
        Inserted::Existing(m) => Err(IntakeError::conflict(
            "prepare_conflict",
            format!(
                "message {:?} of {:?} was already prepared with different content (topic, key, payload, headers or delivery time)",
                m.message_key, m.biz_id
            ),
        )),
    }
}

/// What a decision's outcome means for its caller: the message, or a
/// conflict for the opposite decision, not found for a message never
/// prepared.
pub(crate) fn decided(
    outcome: DecideOutcome,
    commit: bool,
    biz_id: &str,
    message_key: &str,
) -> Result<Message, IntakeError> {
    match outcome {
        // A commit was handed to the forwarder by the write itself (see
        // `coalesce`), even if the caller is cut off now.
        DecideOutcome::Decided(m) | DecideOutcome::AlreadyDecided(m) => Ok(m),
        DecideOutcome::Conflict(m) => Err(IntakeError::conflict(
            if commit {
                "already_rolled_back"
            } else {
                "already_committed"
            },
            format!(
                "message {:?} of {:?} is already {}; its decision is final",
                m.message_key,
                m.biz_id,
                m.status.as_str()
            ),
        )),
        DecideOutcome::NotFound => Err(IntakeError::not_found(
            "message_not_found",
            format!(
                "no prepared message {message_key:?} for {biz_id:?}; prepare it first (nothing was created)"
            ),
        )),
    }
}

/// The producer's topic allow-list admits `topic`: `topic_not_allowed`
/// otherwise, naming the topic, the producer and what it may use. Checked
/// against the registration the caller already holds (the cached one), so
/// it costs no query. A registration without a list allows any topic, unless
/// the service requires lists (`--require-producer-topics`), which then
/// refuses it as it refuses a biz_id with no registration at all (only the
/// admin token or `--insecure-no-auth` can prepare for one).
fn topic_allowed(
    registered: Option<&Producer>,
    biz_id: &str,
    topic: &str,
    required: bool,
) -> Result<(), IntakeError> {
    let refuse = |message: String| {
        Err(IntakeError::NotAllowed {
            code: "topic_not_allowed",
            message,
        })
    };
    let Some(producer) = registered else {
        if required {
            return refuse(format!(
                "biz_id {biz_id:?} is not registered, so it has no topic allow-list, and this \
                 service runs with --require-producer-topics: register it with its topics \
                 (PUT /v1/producers/{biz_id} with \"topics\") before preparing for {topic:?}"
            ));
        }
        return Ok(());
    };
    match producer.allows_topic(topic) {
        Some(true) => Ok(()),
        None if !required => Ok(()),
        None => refuse(format!(
            "producer {biz_id:?} has no topic allow-list and this service runs with \
             --require-producer-topics, which requires one: an operator must give it its \
             topics (PUT /v1/producers/{biz_id} with \"topics\") before it can prepare for \
             {topic:?}"
        )),
        Some(false) => {
            let list = producer.topics.as_deref().unwrap_or_default();
            refuse(format!(
                "producer {biz_id:?} may not prepare messages for topic {topic:?}: its \
                 registration allows only {}; an operator can change that \
                 (PUT /v1/producers/{biz_id} with \"topics\")",
                list.iter()
                    .map(|t| format!("{t:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    }
}
