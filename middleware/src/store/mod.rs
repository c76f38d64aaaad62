//! Durable state: messages, producers and the audit log.
//!
//! One [`Store`] trait, one file per backend ([`mysql`] for production,
//! [`sqlite`] for `trustmsg dev` and single-instance use). The trait exposes one
//! small operation per statement (or per short transaction); the decision logic
//! that combines them lives once, in [`decide`], so both backends behave the same.
//!
//! Guarantees every backend gives:
//! - every state change is a guarded UPDATE (`WHERE id = ? AND status = ? AND
//!   version = ?`) that bumps `version`, so of two concurrent writers exactly one
//!   wins and a stale claimer's write matches nothing;
//! - a decision and its audit row are written in one transaction;
//! - due-times are computed with the database clock, so instances with skewed
//!   clocks agree on what is due;
//! - claims (for sending or for check-back) push the due-time out by a lease, so
//!   a crashed claimer's rows come back once the lease runs out.

pub mod mysql;
pub mod sqlite;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use trustmsg_verify_api::{MessageStatus, MessageView, SendStatus};

/// What can go wrong in the store. Callers treat all of these as transient
/// (retry later) except `Corrupt`, which means a row the code cannot read.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database failed or could not be reached.
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    /// Applying migrations failed.
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A row holds a value this version does not understand.
    #[error("unreadable row: {0}")]
    Corrupt(String),
    /// A bad `--database-url`.
    #[error("{0}")]
    Config(String),
}

/// Result of a store operation.
pub type StoreResult<T> = Result<T, StoreError>;

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
    /// SHA-256 of the content (see [`content_digest`]); None for a tombstone.
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
}

impl Message {
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
        }
    }
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
}

impl NewMessage {
    /// The digest that makes prepare idempotent: same digest, same message.
    pub fn digest(&self) -> Vec<u8> {
        content_digest(
            &self.topic,
            self.key.as_deref(),
            &self.payload,
            &self.headers,
        )
    }
}

/// SHA-256 over an unambiguous encoding of everything that reaches Kafka.
pub fn content_digest(
    topic: &str,
    key: Option<&str>,
    payload: &[u8],
    headers: &BTreeMap<String, String>,
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
}

impl std::fmt::Display for Actor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Actor::Producer(b) => write!(f, "producer:{b}"),
            Actor::Verifier => f.write_str("verifier"),
            Actor::Forwarder => f.write_str("forwarder"),
            Actor::Operator(who) => write!(f, "operator:{who}"),
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

/// Kafka's acknowledgement of one record, to be written back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentMark {
    pub id: u64,
    /// The version the claim left on the row.
    pub version: u64,
    pub partition: i32,
    pub offset: i64,
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
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
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
}

/// The storage operations; see the module docs for what every backend guarantees.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Applies pending migrations.
    async fn migrate(&self) -> StoreResult<()>;
    /// The database clock (UTC).
    async fn now(&self) -> StoreResult<DateTime<Utc>>;
    /// Cheap liveness query for `/readyz`.
    async fn ping(&self) -> StoreResult<()>;

    /// Inserts a PREPARED row, or returns the row already holding (biz_id, message_key).
    async fn insert_prepared(&self, m: &NewMessage) -> StoreResult<Inserted>;
    /// Inserts a ROLLED_BACK tombstone for a rollback of an unknown message, with
    /// its audit row. None when a row for the key appeared meanwhile.
    async fn insert_tombstone(
        &self,
        biz_id: &str,
        message_key: &str,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>>;
    async fn find_message(&self, biz_id: &str, message_key: &str) -> StoreResult<Option<Message>>;
    async fn find_message_by_id(&self, id: u64) -> StoreResult<Option<Message>>;
    /// Applies a guarded transition with its audit row; None when the guard
    /// matched nothing (someone else changed the row first).
    async fn transition(&self, t: &Transition) -> StoreResult<Option<Message>>;

    /// [`Store::insert_prepared`] for many messages at once, one result per
    /// input in order. A backend may write them in one transaction (one
    /// durable commit for the lot); the default writes them one by one.
    /// Within one batch the first of several identical keys is the one created.
    async fn insert_prepared_batch(&self, batch: &[NewMessage]) -> StoreResult<Vec<Inserted>> {
        insert_prepared_each(self, batch).await
    }

    /// The rows holding these (biz_id, message_key) pairs, in any order.
    async fn find_messages(&self, keys: &[(&str, &str)]) -> StoreResult<Vec<Message>> {
        let mut out = Vec::with_capacity(keys.len());
        for (b, k) in keys {
            out.extend(self.find_message(b, k).await?);
        }
        Ok(out)
    }

    /// [`Store::transition`] for many rows, one result per input in order. A
    /// backend may apply them in one transaction; when it cannot tell which
    /// guards matched it must fall back to one by one. The default is one by one.
    async fn transition_batch(&self, ts: &[Transition]) -> StoreResult<Vec<Option<Message>>> {
        transition_each(self, ts).await
    }
    async fn audit_trail(&self, message_id: u64) -> StoreResult<Vec<AuditEntry>>;

    /// Claims up to `limit` committed rows whose send is due, pushing their
    /// `next_send_at` out by `lease` and bumping `version`. Rows another
    /// instance is claiming right now are skipped, not waited for.
    async fn claim_due_sends(&self, limit: u32, lease: Duration) -> StoreResult<Vec<Message>>;
    /// Marks claimed rows SENT (guarded by the claim's version); returns how many matched.
    async fn mark_sent(&self, marks: &[SentMark]) -> StoreResult<u64>;
    /// Records a failed send attempt and schedules the next one after `delay`.
    async fn reschedule_send(
        &self,
        id: u64,
        version: u64,
        error: &str,
        delay: Duration,
    ) -> StoreResult<bool>;
    /// Gives up sending: SEND_FAILED with the error and an audit row.
    async fn mark_send_failed(
        &self,
        id: u64,
        version: u64,
        error: &str,
        actor: &Actor,
    ) -> StoreResult<Option<Message>>;

    /// Claims up to `limit` PREPARED rows whose check-back is due, like
    /// [`Store::claim_due_sends`].
    async fn claim_due_verifies(&self, limit: u32, lease: Duration) -> StoreResult<Vec<Message>>;
    /// Records a check-back attempt that decided nothing and schedules the next.
    async fn reschedule_verify(
        &self,
        id: u64,
        version: u64,
        error: &str,
        delay: Duration,
    ) -> StoreResult<bool>;

    /// Gives a check-back claim back without counting an attempt: the row is
    /// due again after `delay` (its producer was at its concurrency limit).
    /// False when the claim was stale (the row changed meanwhile).
    async fn release_verify(&self, id: u64, version: u64, delay: Duration) -> StoreResult<bool>;

    async fn upsert_producer(&self, p: &ProducerRecord) -> StoreResult<Producer>;
    async fn find_producer(&self, biz_id: &str) -> StoreResult<Option<Producer>>;
    async fn delete_producer(&self, biz_id: &str) -> StoreResult<bool>;
    async fn set_producer_token(&self, biz_id: &str, token_hash: &[u8]) -> StoreResult<bool>;
}

/// [`Store::insert_prepared`] for each message in turn.
pub async fn insert_prepared_each<S: Store + ?Sized>(
    store: &S,
    batch: &[NewMessage],
) -> StoreResult<Vec<Inserted>> {
    let mut out = Vec::with_capacity(batch.len());
    for m in batch {
        out.push(store.insert_prepared(m).await?);
    }
    Ok(out)
}

/// [`Store::transition`] for each transition in turn.
pub async fn transition_each<S: Store + ?Sized>(
    store: &S,
    ts: &[Transition],
) -> StoreResult<Vec<Option<Message>>> {
    let mut out = Vec::with_capacity(ts.len());
    for t in ts {
        out.push(store.transition(t).await?);
    }
    Ok(out)
}

/// Shared handle to the configured backend.
pub type DynStore = Arc<dyn Store>;

/// Opens the backend named by the URL scheme (`mysql://` or `sqlite://`).
pub async fn connect(url: &str) -> StoreResult<DynStore> {
    if url.starts_with("mysql://") {
        Ok(Arc::new(mysql::MySqlStore::connect(url).await?))
    } else if url.starts_with("sqlite:") {
        Ok(Arc::new(sqlite::SqliteStore::connect(url).await?))
    } else {
        Err(StoreError::Config(format!(
            "unsupported --database-url {:?}: use mysql://user:pass@host/db or sqlite://path.db",
            redact_url(url)
        )))
    }
}

/// The URL with any password replaced, safe to log.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// Creates the MySQL database named in `url` if it does not exist yet
/// (`trustmsg migrate` and `serve --auto-migrate`). SQLite files are created
/// on connect.
pub async fn create_database_if_missing(url: &str) -> StoreResult<()> {
    use sqlx::migrate::MigrateDatabase;
    if url.starts_with("mysql://") && !sqlx::MySql::database_exists(url).await? {
        sqlx::MySql::create_database(url).await?;
        tracing::info!(url = %redact_url(url), "created database");
    }
    Ok(())
}

/// What a producer's (or the verifier's, or an operator's) decision did.
#[derive(Debug, Clone, PartialEq)]
pub enum DecideOutcome {
    /// This call changed the row; for a commit the row is now claimed for sending.
    Decided(Message),
    /// The row already held this decision (an idempotent repeat).
    AlreadyDecided(Message),
    /// The row holds the opposite final decision.
    Conflict(Message),
    /// Commit of a message that was never prepared; nothing was created.
    NotFound,
}

/// Which message a decision is for.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    Key {
        biz_id: &'a str,
        message_key: &'a str,
    },
    Id(u64),
}

/// A commit or rollback request, from whoever makes it.
#[derive(Debug, Clone)]
pub struct DecideRequest<'a> {
    pub target: Target<'a>,
    pub commit: bool,
    pub actor: Actor,
    pub reason: String,
    pub send_lease: Duration,
    /// Count the change as a check-back attempt (the verifier's decisions).
    pub verify_attempt: bool,
}

impl DecideRequest<'_> {
    /// The guarded change this request makes to `m`, currently in a
    /// non-final state, towards `to`.
    fn transition_of(&self, m: &Message, to: MessageStatus) -> Transition {
        Transition {
            id: m.id,
            from: m.status,
            version: m.version,
            to,
            send_lease: self.send_lease,
            verify_attempt: self.verify_attempt,
            error: None,
            actor: self.actor.clone(),
            reason: self.reason.clone(),
        }
    }
}

/// Commits or rolls back a message with the state rules of DESIGN §2:
/// PREPARED and VERIFY_FAILED take either decision; a repeat of the final
/// decision is `AlreadyDecided`; the opposite one is `Conflict`; commit of an
/// unknown message is `NotFound`; rollback of an unknown message leaves a
/// tombstone so a late prepare is refused rather than orphaned.
pub async fn decide(store: &dyn Store, req: DecideRequest<'_>) -> StoreResult<DecideOutcome> {
    let to = if req.commit {
        MessageStatus::Committed
    } else {
        MessageStatus::RolledBack
    };
    // A lost race re-reads and re-decides; each loop means another writer made
    // progress, so a small bound is only a guard against a bug.
    for _ in 0..16 {
        let current = match req.target {
            Target::Key {
                biz_id,
                message_key,
            } => store.find_message(biz_id, message_key).await?,
            Target::Id(id) => store.find_message_by_id(id).await?,
        };
        let Some(m) = current else {
            let Target::Key {
                biz_id,
                message_key,
            } = req.target
            else {
                return Ok(DecideOutcome::NotFound);
            };
            if req.commit {
                return Ok(DecideOutcome::NotFound);
            }
            match store
                .insert_tombstone(biz_id, message_key, &req.actor, &req.reason)
                .await?
            {
                Some(t) => return Ok(DecideOutcome::Decided(t)),
                None => continue,
            }
        };
        match m.status {
            s if s == to => return Ok(DecideOutcome::AlreadyDecided(m)),
            s if s.is_final() => return Ok(DecideOutcome::Conflict(m)),
            _ => {
                let t = req.transition_of(&m, to);
                if let Some(updated) = store.transition(&t).await? {
                    return Ok(DecideOutcome::Decided(updated));
                }
            }
        }
    }
    Err(StoreError::Corrupt(
        "decision kept losing races; giving up after 16 tries".into(),
    ))
}

/// [`decide`] for many producer decisions (by key) at once: one read of all
/// the rows, one batched transition for all that can change, and the plain
/// [`decide`] for whatever needs more (a tombstone, a lost race, a key that
/// appears twice in the batch). Same outcomes as deciding one by one.
pub async fn decide_batch(
    store: &dyn Store,
    reqs: &[DecideRequest<'_>],
) -> StoreResult<Vec<DecideOutcome>> {
    let keys: Vec<(&str, &str)> = reqs
        .iter()
        .filter_map(|r| match r.target {
            Target::Key {
                biz_id,
                message_key,
            } => Some((biz_id, message_key)),
            Target::Id(_) => None,
        })
        .collect();
    if keys.len() != reqs.len() {
        let mut out = Vec::with_capacity(reqs.len());
        for r in reqs {
            out.push(decide(store, r.clone()).await?);
        }
        return Ok(out);
    }
    let rows = store.find_messages(&keys).await?;
    let by_key: HashMap<(&str, &str), &Message> = rows
        .iter()
        .map(|m| ((m.biz_id.as_str(), m.message_key.as_str()), m))
        .collect();
    let mut outcomes: Vec<Option<DecideOutcome>> = vec![None; reqs.len()];
    let mut transitions = Vec::new();
    let mut transition_of = Vec::new();
    let mut seen = HashSet::new();
    for (i, (req, key)) in reqs.iter().zip(&keys).enumerate() {
        if !seen.insert(*key) {
            continue; // decided one by one below, after the first
        }
        let to = if req.commit {
            MessageStatus::Committed
        } else {
            MessageStatus::RolledBack
        };
        match by_key.get(key) {
            None if req.commit => outcomes[i] = Some(DecideOutcome::NotFound),
            None => {} // a tombstone: one by one
            Some(m) if m.status == to => {
                outcomes[i] = Some(DecideOutcome::AlreadyDecided((*m).clone()))
            }
            Some(m) if m.status.is_final() => {
                outcomes[i] = Some(DecideOutcome::Conflict((*m).clone()))
            }
            Some(m) => {
                transitions.push(req.transition_of(m, to));
                transition_of.push(i);
            }
        }
    }
    // One batched UPDATE per target status (commits, rollbacks).
    for to in [MessageStatus::Committed, MessageStatus::RolledBack] {
        let (group, index): (Vec<Transition>, Vec<usize>) = transitions
            .iter()
            .zip(&transition_of)
            .filter(|(t, _)| t.to == to)
            .map(|(t, i)| (t.clone(), *i))
            .unzip();
        if group.is_empty() {
            continue;
        }
        for (result, i) in store.transition_batch(&group).await?.into_iter().zip(index) {
            outcomes[i] = result.map(DecideOutcome::Decided);
        }
    }
    let mut out = Vec::with_capacity(reqs.len());
    for (req, outcome) in reqs.iter().zip(outcomes) {
        out.push(match outcome {
            Some(o) => o,
            None => decide(store, req.clone()).await?,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_separates_fields_unambiguously() {
        let h = BTreeMap::new();
        assert_ne!(
            content_digest("ab", Some("c"), b"", &h),
            content_digest("a", Some("bc"), b"", &h)
        );
        assert_ne!(
            content_digest("t", None, b"", &h),
            content_digest("t", Some(""), b"", &h)
        );
        let mut h2 = BTreeMap::new();
        h2.insert("a".to_string(), "b".to_string());
        assert_ne!(
            content_digest("t", None, b"", &h),
            content_digest("t", None, b"", &h2)
        );
        assert_eq!(
            content_digest("t", None, b"x", &h2),
            content_digest("t", None, b"x", &h2)
        );
    }
}
