//! Durable state: messages, producers and the audit log.
//!
//! One [`Store`] trait, one file per backend ([`mysql`] for production,
//! [`sqlite`] for single-instance use). The trait exposes one small operation
//! per statement (or per short transaction); the decision logic that combines
//! them lives once, in [`decide()`], so both backends behave the same. What the
//! two SQL backends share (column lists, what each transition sets, audit rows,
//! row decoding) lives once too, in `sql/`; a backend file holds only its
//! dialect: its SQL text, its locking and its clock expression.
//!
//! Guarantees every backend gives:
//! - every state change is a guarded UPDATE (`WHERE id = ? AND status = ? AND
//!   version = ?`) that bumps `version`, so of two concurrent writers exactly one
//!   wins and a stale claimer's write matches nothing;
//! - a decision and its audit row are written in one transaction;
//! - due-times are computed with the database clock, so instances with skewed
//!   clocks agree on what is due;
//! - claims (for sending or for check-back) push the due-time out by a lease, so
//!   a crashed claimer's rows come back once the lease runs out; a check-back
//!   claim lasts as long as its own producer's call may take plus a margin
//!   ([`VerifyLease`]), a send claim `--send-lease`;
//! - a claim reads its rows one by one: a row this version cannot read (a
//!   value it does not know, headers that are not JSON: [`StoreError::Corrupt`])
//!   is quarantined instead of failing the batch. Its due column is set to
//!   NULL (no scan takes it again), `last_error` says `quarantined: unreadable
//!   row: <why>`, an audit row with action `quarantine` is written, and the
//!   claim reports it ([`Claimed::quarantined`]) so the worker alerts once.
//!   Otherwise the same row would fail every claim that reaches it and stall
//!   the forwarder or the verifier for every message behind it.
//! - an ordered producer's keyed messages are sent in commit order: a
//!   commit takes its key's next seq under the key's row lock in the same
//!   transaction, only the key's head is due, and the head's SENT mark (or
//!   an operator's skip) makes the next one due in the same transaction
//!   (`sql/ordering.rs`); nothing of it runs for an unordered message;
//! - every state change that needs a person (VERIFY_FAILED, SEND_FAILED, a
//!   quarantine, an overdue flag) writes its alert to the `alerts` outbox in
//!   the same transaction, so the alert exists if and only if the change
//!   does, whatever crashes after; the instance whose transaction wrote it
//!   logs and counts it once that transaction has committed (see
//!   `sql/alerts.rs`), and any instance delivers it ([`crate::workers::alerts`]).

mod database_url;
mod db_clock;
pub(crate) mod deadline;
mod decide;
mod migrations;
mod model;
pub mod mysql;
pub mod shards;
mod sql;
pub mod sqlite;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use trustmsg_verify_api::admin::AlertView;
use trustmsg_verify_api::MessageView;

pub use database_url::{Backend, DatabaseUrl, UrlRefused};
pub use decide::{
    decide, decide_batch, decide_batch_known, producer_reason, DecideOutcome, DecideRequest, Target,
};
pub use model::{
    order_key, Actor, AlertFilter, AuditEntry, Backlog, BacklogSample, Began, CheckAttempt,
    CheckAttemptEntry, Claimed, ConsumerGroup, ConsumerGroupCounts, ConsumerGroupRecord,
    Consumption, Delivery, Finished, FlowCounts, FlowMinute, Inserted, Message, MessageFilter,
    NewAlert, NewMessage, NewWaitingCommit, OrderPos, Overdue, PayloadMove, PayloadRoom, Producer,
    ProducerRecord, ProducerSummary, Quarantined, Requeue, RequeuedChunk, SentMark,
    StuckConsumption, Transition, VerifyLease, Wait, WaitingCommit,
};

/// What can go wrong in the store. Each variant says what its caller should
/// do: retry, alert a person, or fix the configuration.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database failed or could not be reached. Transient: retry later
    /// (the API answers 503, the workers retry on their next tick).
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    /// Applying migrations failed. Not transient: the schema or the
    /// migration files need a person; start-up stops here.
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A row holds a value this version cannot read (an unknown status, text
    /// that is not UTF-8, a number out of range, headers that are not JSON).
    /// Retrying reads the same row: alert, a person must look at it. (A
    /// claim quarantines such a row and goes on with the others.)
    #[error("unreadable row: {0}")]
    Corrupt(String),
    /// A decision kept losing its guarded UPDATE to concurrent writers. Each
    /// loss means another writer made progress, so this is transient: retry.
    #[error("lost too many races: {0}")]
    Contention(&'static str),
    /// A row this call had just written or seen was gone when it read it back:
    /// a concurrent delete won the race. Transient: retry, which sees the
    /// row's current state.
    #[error("row vanished: {0}")]
    Vanished(&'static str),
    /// The database could not be reached, as found by a statement made for
    /// several callers at once (each gets this copy of the cause). Transient:
    /// retry later.
    #[error("database unreachable: {0}")]
    Unavailable(String),
    /// The write batcher has stopped because the service is shutting down.
    /// Retry against another instance (or this one once it is back).
    #[error("the write batcher stopped (shutting down)")]
    ShuttingDown,
}

impl StoreError {
    /// Whether the database could not be reached at all (no connection, a
    /// connection lost, the pool's acquire timeout): every statement would
    /// fail the same way for now, so retrying at once, or statement by
    /// statement, only adds waiting.
    pub fn is_unreachable(&self) -> bool {
        match self {
            Self::Db(e) => matches!(
                e,
                sqlx::Error::Io(_)
                    | sqlx::Error::Tls(_)
                    | sqlx::Error::PoolTimedOut
                    | sqlx::Error::PoolClosed
                    | sqlx::Error::WorkerCrashed
            ),
            Self::Unavailable(_) => true,
            _ => false,
        }
    }
}

/// Check-back calls kept per message (the newest).
pub const CHECK_ATTEMPTS_KEPT: u32 = 50;

/// Result of a store operation.
pub type StoreResult<T> = Result<T, StoreError>;

/// The storage operations; see the module docs for what every backend guarantees.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Applies pending migrations.
    async fn migrate(&self) -> StoreResult<()>;
    /// The database clock (UTC).
    async fn now(&self) -> StoreResult<DateTime<Utc>>;
    /// Cheap liveness query for `/readyz`: Ok while the store can serve
    /// anything (with several shards, while any shard answers).
    async fn ping(&self) -> StoreResult<()>;
    /// The shards that do not answer now, by name (`/readyz` lists them);
    /// empty for a store of one database, which `ping` covers.
    async fn degraded(&self) -> Vec<String> {
        Vec::new()
    }
    /// How many message databases the store spreads messages over.
    fn shards(&self) -> usize {
        1
    }
    /// The shard (`0..shards()`) a new message is written to.
    fn shard_of_new(&self, m: &NewMessage) -> usize {
        let _ = m;
        0
    }
    /// The shard to look for (biz_id, message_key) on first.
    fn shard_of_key(&self, biz_id: &str, message_key: &str) -> usize {
        let _ = (biz_id, message_key);
        0
    }

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

    /// [`Store::transition_batch`] for rows the caller has just read: `seen[i]`
    /// is the row `ts[i]` was made from, as it was at `ts[i].version`. A
    /// backend may apply each change to the row it was given instead of
    /// reading the row back; the results are the same. The default ignores
    /// `seen`.
    async fn transition_batch_seen(
        &self,
        ts: &[Transition],
        seen: &[&Message],
    ) -> StoreResult<Vec<Option<Message>>> {
        let _ = seen;
        self.transition_batch(ts).await
    }
    async fn audit_trail(&self, message_id: u64) -> StoreResult<Vec<AuditEntry>>;

    /// Claims up to `limit` committed rows whose send is due, oldest due
    /// first and as many as fit `room` ([`Claimed::out_of_room`] when that
    /// stopped it), pushing their `next_send_at` out by `lease` and bumping
    /// `version`. Rows another instance is claiming right now are skipped,
    /// not waited for. A row it cannot read is quarantined (see the module
    /// docs), not returned.
    async fn claim_due_sends(
        &self,
        limit: u32,
        room: PayloadRoom,
        lease: Duration,
    ) -> StoreResult<Claimed>;
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
    /// Schedules the next send after `delay` and records why, without counting
    /// an attempt: Kafka gave no answer (unreachable, or the send timed out and
    /// may be stored), and waiting out an outage must not use up the attempt
    /// limit. Guarded like [`Store::reschedule_send`].
    async fn postpone_send(
        &self,
        id: u64,
        version: u64,
        error: &str,
        delay: Duration,
    ) -> StoreResult<bool>;
    /// Gives back send claims a commit took for this instance's forwarder
    /// when the fast path could not take them (its channel full, the
    /// forwarder stopping): each row, named by its claim's `(id, version)`,
    /// is due at once for any sweeper instead of after the lease. Returns
    /// how many matched; a stale claim (the row changed meanwhile) matches
    /// nothing. The version stays: nobody was sending under the claim.
    async fn release_sends(&self, claims: &[(u64, u64)]) -> StoreResult<u64>;
    /// Gives up sending: SEND_FAILED with the error and an audit row.
    async fn mark_send_failed(
        &self,
        id: u64,
        version: u64,
        error: &str,
        actor: &Actor,
    ) -> StoreResult<Option<Message>>;

    /// An operator's redeliver: SEND_FAILED → PENDING, send attempts back to
    /// 0, due at once, with an audit row; guarded by `version`. None when the
    /// guard matched nothing (the row changed meanwhile, or is not SEND_FAILED).
    async fn redeliver(
        &self,
        id: u64,
        version: u64,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>>;

    /// An operator's skip of an ordered key's blocking head: `m` (as the
    /// caller read it, guarded by its version) must be COMMITTED,
    /// SEND_FAILED and its key's head. It stays SEND_FAILED but leaves its
    /// key's order (a later redeliver sends it unordered); the key moves
    /// past it and its next message is due at once; audited (`skip`). None
    /// when the guard matched nothing or it is not the head.
    async fn skip_blocked(
        &self,
        m: &Message,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>>;

    /// For a committed ordered message waiting for an earlier one of its
    /// key: the id of the key's head (the earliest message not yet SENT or
    /// skipped). None for every other message.
    async fn blocked_by(&self, m: &Message) -> StoreResult<Option<u64>>;

    /// An operator's send-now of a message waiting for its `deliver_at`:
    /// COMMITTED with its send PENDING and `deliver_at` still in the future
    /// (database clock). Its `deliver_at` and `next_send_at` become now, so
    /// any sweeper sends it at once and its wait counts from now, with an
    /// audit row (`send_now`); guarded by `version`. None when the guard
    /// matched nothing (the row changed meanwhile, or is not such a message).
    async fn send_now(
        &self,
        id: u64,
        version: u64,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>>;

    /// One chunk of an operator's bulk redeliver or re-verify, in one
    /// transaction: the first `limit` rows by id above `after_id` that match
    /// `filter` and are in the state `requeue` applies to (SEND_FAILED, or
    /// VERIFY_FAILED) are locked, changed as [`Store::redeliver`] or a
    /// re-verify transition changes one (version bumped, so a stale claim
    /// matches nothing) and audited with `actor` and `reason`. All of the
    /// chunk or none of it is written; a row in another state is never
    /// touched, so running a bulk action again changes only what is left.
    async fn requeue_chunk(
        &self,
        requeue: Requeue,
        filter: &MessageFilter,
        after_id: u64,
        limit: u32,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<RequeuedChunk>;
    /// How many rows [`Store::requeue_chunk`] would change for `filter` now
    /// (a bulk action's dry run).
    async fn count_requeueable(&self, requeue: Requeue, filter: &MessageFilter)
        -> StoreResult<u64>;

    /// Claims up to `limit` PREPARED rows whose check-back is due, like
    /// [`Store::claim_due_sends`], each for as long as `lease` covers its
    /// producer's call ([`VerifyLease::covering`], by the registration as
    /// this claim reads it). The registrations are read without locking
    /// them: a claim never waits for, or skips rows because of, a producer
    /// row someone else holds.
    async fn claim_due_verifies(&self, limit: u32, lease: VerifyLease) -> StoreResult<Claimed>;
    /// Records a check-back attempt that decided nothing and schedules the next.
    async fn reschedule_verify(
        &self,
        id: u64,
        version: u64,
        error: &str,
        delay: Duration,
    ) -> StoreResult<bool>;

    /// Gives check-back claims back without counting an attempt: each row,
    /// named by its claim's `(id, version)`, is due again after `delay` (its
    /// producer was at its concurrency limit). Returns how many matched; a
    /// stale claim (the row changed meanwhile) matches nothing.
    async fn release_verifies(&self, claims: &[(u64, u64)], delay: Duration) -> StoreResult<u64>;

    /// Flags up to `limit` messages that have been waiting for `wait` longer
    /// than `older_than` (since their commit or prepare, or since an
    /// operator's redeliver or re-verify put them back) and were not flagged
    /// for it, and returns the ones this call flagged. Each message is
    /// flagged once per kind of wait, by one caller, until an operator puts
    /// it back in that queue, so alerting on what this returns alerts exactly
    /// once across instances.
    /// Flagging changes neither the state nor the version: a claim in flight
    /// on the row stays valid.
    async fn flag_overdue(
        &self,
        wait: Wait,
        older_than: Duration,
        limit: u32,
    ) -> StoreResult<Vec<Overdue>>;

    /// Claims up to `limit` pending alerts whose next POST is due, pushing
    /// `next_attempt_at` out by `lease` so no other instance takes them
    /// meanwhile (rows another instance is claiming right now are skipped,
    /// not waited for). A claimer that dies mid-POST leaves its alerts to
    /// come back after the lease.
    async fn claim_due_alerts(&self, limit: u32, lease: Duration) -> StoreResult<Vec<AlertView>>;
    /// The webhook took alert `id`: delivered. False when it was no longer
    /// pending (another instance's POST of it was marked first).
    async fn mark_alert_delivered(&self, id: u64) -> StoreResult<bool>;
    /// A POST of alert `id` failed: counts the attempt, keeps `error`, and
    /// makes it due again after `delay`. False when it was no longer pending.
    async fn retry_alert_later(&self, id: u64, error: &str, delay: Duration) -> StoreResult<bool>;
    /// For an instance without a webhook: settles up to `limit` due pending
    /// alerts as `no_webhook` (their log line and counter were all there
    /// was to them), so they do not wait forever; returns how many.
    async fn settle_alerts_without_webhook(&self, limit: u32) -> StoreResult<u64>;
    /// Up to `limit` alerts matching `filter`, newest first, with ids below
    /// `before` when given (keyset pagination, like [`Store::list_messages`]).
    async fn list_alerts(
        &self,
        filter: AlertFilter,
        limit: u32,
        before: Option<u64>,
    ) -> StoreResult<Vec<AlertView>>;

    /// Up to `limit` messages matching `filter`, newest (highest id) first,
    /// with ids below `before` when given (keyset pagination: rows inserted
    /// meanwhile have higher ids, so a page boundary never skips or repeats
    /// a row). The views are read without the payloads, which can be large.
    async fn list_messages(
        &self,
        filter: &MessageFilter,
        limit: u32,
        before: Option<u64>,
    ) -> StoreResult<Vec<MessageView>>;
    /// Per producer with live messages or messages finished within `recent`:
    /// exact counts of the live ones by status and send status, the oldest
    /// waiting message of each kind, and how many were SENT and ROLLED_BACK
    /// within `recent`. Reads no finished row older than that, so its cost
    /// does not grow with the table.
    async fn summary(&self, recent: std::time::Duration) -> StoreResult<Vec<ProducerSummary>>;
    /// Every registration, by biz_id.
    async fn list_producers(&self) -> StoreResult<Vec<Producer>>;
    /// Retention: deletes up to `limit` messages that are SENT or
    /// ROLLED_BACK and unchanged for longer than `older_than`, with their
    /// audit, check-attempt and consumption-ledger rows and their content
    /// kept apart (`message_payloads`), in one short transaction; returns how
    /// many rows it deleted. Never touches PREPARED, VERIFY_FAILED,
    /// PENDING or SEND_FAILED rows. In the same transaction, up to `limit`
    /// settled alerts (delivered or no_webhook) unchanged for longer than
    /// `older_than` go too (never a pending one); the count includes them.
    async fn purge_finished(&self, older_than: Duration, limit: u32) -> StoreResult<u64>;
    /// The move of long contents out of rows written before migration
    /// 0018 (`sql/content.rs`): walks up to `limit` rows past where the
    /// last call stopped, in id order, and moves the content of those whose
    /// content is too long for their row to `message_payloads`, in one
    /// short transaction. [`PayloadMove::finished`] once the walk found no
    /// row left; every call after that does nothing.
    async fn move_payloads(&self, limit: u32) -> StoreResult<PayloadMove>;
    /// The waiting messages in one grouped query over the status index's
    /// waiting ranges (never the whole table), and the pending alerts.
    async fn backlog(&self) -> StoreResult<Backlog>;
    /// Records check-back calls (of any messages, one statement for the
    /// lot), keeping the newest [`CHECK_ATTEMPTS_KEPT`] of each message.
    async fn record_check_attempts(&self, calls: &[CheckAttempt]) -> StoreResult<()>;
    /// A message's recorded check-back calls, oldest first.
    async fn check_attempts(&self, message_id: u64) -> StoreResult<Vec<CheckAttemptEntry>>;

    /// Adds one instance's counts to the minute's row of `flow_minutes` in
    /// one statement (created at zero if missing), so the row holds the sum
    /// over every instance. A backlog sample, when given, replaces the
    /// minute's if it was taken later; a None leaves it as it is.
    async fn add_flow(&self, f: &FlowMinute) -> StoreResult<()>;
    /// The minutes from `since` on that have a row, oldest first.
    async fn flow_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<FlowMinute>>;
    /// Deletes the minutes before `before`; returns how many.
    async fn purge_flow(&self, before: DateTime<Utc>) -> StoreResult<u64>;

    /// Keeps a submitted commit whose prepare has not been seen, due for its
    /// first retry at once. A second one for the same (biz_id, message_key)
    /// changes nothing (a replayed record): false then.
    async fn park_commit(&self, w: &NewWaitingCommit) -> StoreResult<bool>;
    /// Claims up to `limit` waiting commits whose retry is due, pushing
    /// their `next_try_at` out by `lease` so no other instance takes them
    /// meanwhile (rows another instance is claiming are skipped).
    async fn claim_waiting_commits(
        &self,
        limit: u32,
        lease: Duration,
    ) -> StoreResult<Vec<WaitingCommit>>;
    /// A retry of waiting commit `id` found its prepare still missing: one
    /// more attempt, tried again after `delay`.
    async fn retry_waiting_commit(&self, id: u64, delay: Duration) -> StoreResult<bool>;
    /// Waiting commit `id` is settled (applied, or dead-lettered): gone.
    async fn unpark_commit(&self, id: u64) -> StoreResult<bool>;
    /// How many commits wait for their prepare.
    async fn count_waiting_commits(&self) -> StoreResult<u64>;
    /// Up to `limit` waiting commits with ids above `after`, oldest first.
    async fn list_waiting_commits(&self, limit: u32, after: u64)
        -> StoreResult<Vec<WaitingCommit>>;

    async fn upsert_producer(&self, p: &ProducerRecord) -> StoreResult<Producer>;
    async fn find_producer(&self, biz_id: &str) -> StoreResult<Option<Producer>>;
    async fn delete_producer(&self, biz_id: &str) -> StoreResult<bool>;
    async fn set_producer_token(&self, biz_id: &str, token_hash: &[u8]) -> StoreResult<bool>;

    /// Creates a consumer group, or replaces its settings (topics, limits);
    /// an update keeps its token hash and `created_at`.
    async fn upsert_consumer_group(&self, g: &ConsumerGroupRecord) -> StoreResult<ConsumerGroup>;
    async fn find_consumer_group(&self, name: &str) -> StoreResult<Option<ConsumerGroup>>;
    /// Every consumer group, by name.
    async fn list_consumer_groups(&self) -> StoreResult<Vec<ConsumerGroup>>;
    /// Deletes a group's registration (its token stops working); its ledger
    /// rows stay with their messages (retention takes them), so a group
    /// registered again under the name goes on with its ledger.
    async fn delete_consumer_group(&self, name: &str) -> StoreResult<bool>;
    async fn set_consumer_group_token(&self, name: &str, token_hash: &[u8]) -> StoreResult<bool>;

    /// `group` begins consuming message `message_id`, in one transaction
    /// holding the consumption's row lock, so of two concurrent begins one is
    /// told to go: first time, a retry after a failure, or a takeover of an
    /// in-progress consumption older than the group's timeout go (attempts
    /// counted, the stuck alert re-armed); an in-progress one within it
    /// and a done one do not.
    async fn begin_consumption(&self, group: &ConsumerGroup, message_id: u64)
        -> StoreResult<Began>;
    /// `group` finishes consuming `message_id` (`ok`, or failed with
    /// `error`), under the row lock. A failure that makes `max_failures`
    /// raises the `consumption_failing` alert in the same transaction (once
    /// per message and group). A repeat of the finish that made the row what
    /// it is changes nothing.
    async fn finish_consumption(
        &self,
        group: &ConsumerGroup,
        message_id: u64,
        ok: bool,
        error: Option<&str>,
    ) -> StoreResult<Finished>;
    /// Every group's consumption of `message_id`, by group name.
    async fn consumptions_of(&self, message_id: u64) -> StoreResult<Vec<Consumption>>;
    /// Flags up to `limit` in-progress consumptions past their group's
    /// timeout that were not flagged since their begin, raising each one's
    /// `consumption_stuck` alert in the flag's transaction: exactly once per
    /// begin across instances.
    async fn flag_stuck_consumptions(&self, limit: u32) -> StoreResult<Vec<StuckConsumption>>;
    /// Per registered group: its done, failed and in-progress rows, and its
    /// lag (messages SENT to its topics since it was registered that it has
    /// not processed).
    async fn consumer_group_counts(&self) -> StoreResult<Vec<ConsumerGroupCounts>>;
}

/// [`Store::insert_prepared`] for each message in turn.
async fn insert_prepared_each<S: Store + ?Sized>(
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
async fn transition_each<S: Store + ?Sized>(
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

/// Opens the backend its URL's scheme names.
pub async fn connect(url: &DatabaseUrl) -> StoreResult<DynStore> {
    Ok(match url.backend() {
        Backend::MySql => Arc::new(mysql::MySqlStore::connect(url).await?),
        Backend::Sqlite => Arc::new(sqlite::SqliteStore::connect(url).await?),
    })
}

/// Creates the MySQL database named in `url` if it does not exist yet
/// (`trustmsg migrate` and `serve --auto-migrate`). SQLite files are created
/// on connect.
pub async fn create_database_if_missing(url: &DatabaseUrl) -> StoreResult<()> {
    use sqlx::migrate::MigrateDatabase;
    match url.backend() {
        Backend::MySql => {
            let driver = url.expose_for_driver();
            if !sqlx::MySql::database_exists(driver).await? {
                sqlx::MySql::create_database(driver).await?;
                tracing::info!(%url, "created database");
            }
        }
        Backend::Sqlite => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_errors_of_reaching_the_database_count_as_unreachable() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(StoreError::Db(sqlx::Error::Io(refused)).is_unreachable());
        assert!(StoreError::Db(sqlx::Error::PoolTimedOut).is_unreachable());
        assert!(StoreError::Unavailable("gone".into()).is_unreachable());
        // A statement the database refused, or a row it returned, says
        // nothing about the next statement: worth retrying one by one.
        assert!(!StoreError::Db(sqlx::Error::RowNotFound).is_unreachable());
        assert!(!StoreError::Corrupt("headers".into()).is_unreachable());
        assert!(!StoreError::Contention("decide").is_unreachable());
    }
}
