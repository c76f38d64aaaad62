//! The [`Store`] trait, as one sub-trait per concern, so that a backend is
//! written (and read) concern by concern, one file per sub-trait: its
//! lifecycle, messages, sends, check-backs, operator views and repairs,
//! alerts, housekeeping, waiting commits, registry, consumption ledger and
//! the producers' outbox tables.
//!
//! [`Store`] is all of them together, implemented for every type that
//! implements all eleven, so `Arc<dyn Store>` ([`DynStore`]) is what the rest
//! of the service holds. Calls on a `dyn Store` or a generic `S: Store` need
//! no import; calls on a concrete backend (a `MySqlStore`) need its
//! sub-traits in scope: `use crate::store::prelude::*`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use trustmsg_verify_api::admin::AlertView;
use trustmsg_verify_api::MessageView;

use super::{
    Actor, AlertFilter, AuditEntry, Backlog, Began, CheckAttempt, CheckAttemptEntry, Claimed,
    ConsumerGroup, ConsumerGroupCounts, ConsumerGroupRecord, Consumption, Finished,
    FinishedMessage, FinishedRange, FlowMinute, Inserted, Message, MessageFilter, NewCommitted,
    NewMessage, NewWaitingCommit, OutboxAction, OutboxFailure, Overdue, PartitionPlan,
    PartitionRound, PayloadMove, PayloadRoom, Producer, ProducerRecord, ProducerSummary, Requeue,
    RequeuedChunk, Reschedule, SendOwner, SentMark, Storage, StoreResult, StuckConsumption,
    Tombstone, Transition, VerifyLease, Wait, WaitingCommit,
};

/// Lifecycle and topology: the schema, the database clock, health, and how
/// many databases a store spreads messages over (with the hints a batcher
/// groups writes by).
#[async_trait]
pub trait LifecycleStore: Send + Sync + 'static {
    /// Applies pending migrations.
    async fn migrate(&self) -> StoreResult<()>;
    /// Runs the steps of the pending migrations that may run while an
    /// instance of the previous release serves, and no more (`trustmsg
    /// migrate --prepare`): migration 0020's copy into time partitions on
    /// MySQL, its keys, constraints and index on PostgreSQL. `migrate`
    /// then finishes quickly.
    async fn prepare_upgrade(&self) -> StoreResult<()> {
        Ok(())
    }
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
}

/// Messages and their transitions: the prepare (one or a batch), the
/// rollback tombstone, reading a message, the guarded state changes (one or
/// a batch) and the audit trail they leave.
#[async_trait]
pub trait MessageStore: Send + Sync + 'static {
    /// Inserts a PREPARED row, or returns the row already holding (biz_id, message_key).
    async fn insert_prepared(&self, m: &NewMessage) -> StoreResult<Inserted>;
    /// Inserts a ROLLED_BACK tombstone for a rollback of an unknown message, with
    /// its audit row. None when a row for the key appeared meanwhile.
    async fn insert_tombstone(&self, t: &Tombstone<'_>) -> StoreResult<Option<Message>>;
    async fn find_message(&self, biz_id: &str, message_key: &str) -> StoreResult<Option<Message>>;
    async fn find_message_by_id(&self, id: u64) -> StoreResult<Option<Message>>;
    /// Applies a guarded transition with its audit row; None when the guard
    /// matched nothing (someone else changed the row first).
    async fn transition(&self, t: &Transition) -> StoreResult<Option<Message>>;

    /// [`MessageStore::insert_prepared`] for many messages at once, one result per
    /// input in order. A backend may write them in one transaction (one
    /// durable commit for the lot); the default writes them one by one.
    /// Within one batch the first of several identical keys is the one created.
    async fn insert_prepared_batch(&self, batch: &[NewMessage]) -> StoreResult<Vec<Inserted>> {
        insert_prepared_each(self, batch).await
    }

    /// Creates every message of `batch` COMMITTED at once, as its producer's
    /// own transaction decided it (a relayed outbox row), instead of a
    /// prepare and a commit: with its audit row, its key's seq (ordered)
    /// and any alert, all or nothing. Each is due as a commit makes it:
    /// claimed for this instance's forwarder for `send_lease` (the fast
    /// path), or at its delivery time. None when a key of the batch exists
    /// already (a row relayed again), occurs twice, or this backend cannot
    /// do it in one step: nothing was written, and the caller prepares and
    /// commits instead, which sorts out what exists. The default is None.
    async fn insert_committed_batch(
        &self,
        batch: &[NewCommitted],
        send_lease: Duration,
    ) -> StoreResult<Option<Vec<Message>>> {
        let _ = (batch, send_lease);
        Ok(None)
    }

    /// The rows holding these (biz_id, message_key) pairs, in any order.
    async fn find_messages(&self, keys: &[(&str, &str)]) -> StoreResult<Vec<Message>> {
        let mut out = Vec::with_capacity(keys.len());
        for (b, k) in keys {
            out.extend(self.find_message(b, k).await?);
        }
        Ok(out)
    }

    /// [`MessageStore::transition`] for many rows, one result per input in order. A
    /// backend may apply them in one transaction; when it cannot tell which
    /// guards matched it must fall back to one by one. The default is one by one.
    async fn transition_batch(&self, ts: &[Transition]) -> StoreResult<Vec<Option<Message>>> {
        transition_each(self, ts).await
    }

    /// [`MessageStore::transition_batch`] for rows the caller has just read: `seen[i]`
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
}

/// Sending: the forwarder's claims of committed messages, their SENT marks,
/// retries, postponements and releases, and giving a send up.
#[async_trait]
pub trait SendStore: Send + Sync + 'static {
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
    async fn reschedule_send(&self, r: &Reschedule) -> StoreResult<bool>;
    /// Schedules the next send after `delay` and records why, without counting
    /// an attempt: Kafka gave no answer (unreachable, or the send timed out and
    /// may be stored), and waiting out an outage must not use up the attempt
    /// limit. Guarded like [`SendStore::reschedule_send`].
    async fn postpone_send(&self, r: &Reschedule) -> StoreResult<bool>;
    /// Gives back send claims a commit took for this instance's forwarder
    /// when the fast path could not take them (its channel full, the
    /// forwarder stopping): each row, named by its claim's `(id, version)`,
    /// is due at once for any sweeper instead of after the lease. Returns
    /// how many matched; a stale claim (the row changed meanwhile) matches
    /// nothing. The version stays: nobody was sending under the claim.
    async fn release_sends(&self, claims: &[(u64, u64)]) -> StoreResult<u64>;
    /// [`SendStore::claim_due_sends`] for an exactly-once forwarder named
    /// `owner`: it takes only rows whose last claim was nobody's or its
    /// own, and writes its name on them (`claimed_by`). A row another
    /// owner claimed waits until that owner's claims are given back
    /// ([`SendStore::release_owner`]), which its fencer does first.
    async fn claim_owned_sends(
        &self,
        owner: &SendOwner,
        limit: u32,
        room: PayloadRoom,
        lease: Duration,
    ) -> StoreResult<Claimed>;
    /// The owners, other than `me`, of send claims that ran out (due rows
    /// still named by their claim's owner): each is to be fenced and
    /// released before its rows are taken.
    async fn lapsed_owners(&self, me: &SendOwner) -> StoreResult<Vec<SendOwner>>;
    /// Gives back every send claim `owner` holds: due at once, nobody's,
    /// their versions bumped. Only once `owner` can no longer send (its
    /// Kafka producer fenced). Returns how many.
    async fn release_owner(&self, owner: &SendOwner) -> StoreResult<u64>;
    /// The `(id, version)` of each of `ids` whose send claim `owner` still
    /// holds (committed, PENDING): what its SENT mark must name now, when
    /// the owner claimed it again after the mark was made.
    async fn held_claims(&self, owner: &SendOwner, ids: &[u64]) -> StoreResult<Vec<(u64, u64)>>;
    /// The `(id, version)` of each send claim `owner` holds that ran out:
    /// what its fencer gives back ([`SendStore::release_claims_of`]).
    async fn lapsed_claims(&self, owner: &SendOwner) -> StoreResult<Vec<(u64, u64)>>;
    /// Gives back those of `claims` that `owner` still holds under the same
    /// version: due at once, nobody's, versions bumped. Only once `owner`
    /// can no longer send under them (its Kafka producer fenced). A claim
    /// it took again since (after opening its producer anew) is its own.
    /// Returns how many.
    async fn release_claims_of(&self, owner: &SendOwner, claims: &[(u64, u64)])
        -> StoreResult<u64>;
    /// Gives up sending: SEND_FAILED with the error and an audit row.
    async fn mark_send_failed(
        &self,
        id: u64,
        version: u64,
        error: &str,
        actor: &Actor,
    ) -> StoreResult<Option<Message>>;
}

/// Check-back: the verifier's claims of undecided messages, their retries
/// and releases, and the record of each check-back call.
#[async_trait]
pub trait VerifyStore: Send + Sync + 'static {
    /// Claims up to `limit` PREPARED rows whose check-back is due, like
    /// [`SendStore::claim_due_sends`], each for as long as `lease` covers its
    /// producer's call ([`VerifyLease::covering`], by the registration as
    /// this claim reads it). The registrations are read without locking
    /// them: a claim never waits for, or skips rows because of, a producer
    /// row someone else holds.
    async fn claim_due_verifies(&self, limit: u32, lease: VerifyLease) -> StoreResult<Claimed>;
    /// Records a check-back attempt that decided nothing and schedules the next.
    async fn reschedule_verify(&self, r: &Reschedule) -> StoreResult<bool>;

    /// Gives check-back claims back without counting an attempt: each row,
    /// named by its claim's `(id, version)`, is due again after `delay` (its
    /// producer was at its concurrency limit). Returns how many matched; a
    /// stale claim (the row changed meanwhile) matches nothing.
    async fn release_verifies(&self, claims: &[(u64, u64)], delay: Duration) -> StoreResult<u64>;
    /// Records check-back calls (of any messages, one statement for the
    /// lot), keeping the newest [`CHECK_ATTEMPTS_KEPT`](super::CHECK_ATTEMPTS_KEPT) of each message.
    async fn record_check_attempts(&self, calls: &[CheckAttempt]) -> StoreResult<()>;
    /// A message's recorded check-back calls, oldest first.
    async fn check_attempts(&self, message_id: u64) -> StoreResult<Vec<CheckAttemptEntry>>;
}

/// What an operator sees and repairs: the message list and the per-producer
/// summary; redeliver, skip a blocked key's head, send now, and the bulk
/// requeues.
#[async_trait]
pub trait OperatorStore: Send + Sync + 'static {
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
    /// VERIFY_FAILED) are locked, changed as [`OperatorStore::redeliver`] or a
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
    /// How many rows [`OperatorStore::requeue_chunk`] would change for `filter` now
    /// (a bulk action's dry run).
    async fn count_requeueable(&self, requeue: Requeue, filter: &MessageFilter)
        -> StoreResult<u64>;
}

/// The alert outbox: claiming due alerts for the webhook, settling them,
/// and the operators' list. (Alerts are raised by the state changes
/// themselves, in their own transactions.)
#[async_trait]
pub trait AlertStore: Send + Sync + 'static {
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
    /// `before` when given (keyset pagination, like [`OperatorStore::list_messages`]).
    async fn list_alerts(
        &self,
        filter: AlertFilter,
        limit: u32,
        before: Option<u64>,
    ) -> StoreResult<Vec<AlertView>>;
}

/// What the periodic workers keep: the overdue watch, retention, the move
/// of old rows' long contents, the backlog and the flow per minute.
#[async_trait]
pub trait HousekeepingStore: Send + Sync + 'static {
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
    /// Retention: deletes up to `limit` messages that are SENT or
    /// ROLLED_BACK and unchanged for longer than `older_than`, with their
    /// audit, check-attempt and consumption-ledger rows and their content
    /// kept apart (`message_payloads`), in one short transaction; returns how
    /// many rows it deleted. Never touches PREPARED, VERIFY_FAILED,
    /// PENDING or SEND_FAILED rows. In the same transaction, up to `limit`
    /// settled alerts (delivered or no_webhook) unchanged for longer than
    /// `older_than` go too (never a pending one); the count includes them.
    /// On a partitioned store (MySQL/MariaDB, PostgreSQL), only messages of
    /// the partitions [`HousekeepingStore::keep_partitions`] last found held
    /// past retention are deleted this way; the rest go with their
    /// partition.
    async fn purge_finished(&self, older_than: Duration, limit: u32) -> StoreResult<u64>;
    /// The settled-alert half of [`HousekeepingStore::purge_finished`]
    /// alone, for retention with an archive (whose messages go through
    /// [`HousekeepingStore::delete_archived`]): up to `limit` settled alerts
    /// unchanged for longer than `older_than`; returns how many.
    async fn purge_settled_alerts(&self, older_than: Duration, limit: u32) -> StoreResult<u64>;
    /// The archive's read (`crate::archive`): the finished messages (SENT,
    /// or ROLLED_BACK) with ids in `range.ids` unchanged for longer than
    /// `range.older_than`, lowest id first, at most `range.limit` and within
    /// its byte budget, each with its audit trail, check-back calls and
    /// consumption-ledger rows. Reads only; what it returns goes to
    /// [`HousekeepingStore::delete_archived`] once the archive holds it.
    async fn finished_messages(&self, range: &FinishedRange) -> StoreResult<Vec<FinishedMessage>>;
    /// Deletes the `archived` messages (as
    /// [`HousekeepingStore::finished_messages`] read them, and the archive
    /// now holds them) with their audit, check-attempt, ledger and content
    /// rows, in one short transaction: each only if it is still finished,
    /// at the version it was read at, with the same ledger rows (locked
    /// while compared). Returns how many messages it deleted; one that
    /// changed stays for a later round to archive again.
    async fn delete_archived(&self, archived: &[FinishedMessage]) -> StoreResult<u64>;
    /// Raises the `archive_failed` alert about `held`, the first message of
    /// a batch retention keeps because the archive could not take it, in
    /// its own transaction, unless one was raised about that message
    /// before (so instances that hold the same batch, or one restarted,
    /// raise it once). True when this call raised it.
    async fn raise_archive_failed(&self, held: &Message, error: &str) -> StoreResult<bool>;
    /// One round of time partition upkeep (`store/sql/partitions.rs`): by
    /// one instance at a time, the partitions made ahead, the ids moved to
    /// the next period when the current one has lasted `plan.period`, the
    /// partitions past `plan.retention` whose messages are all finished
    /// dropped, and their keys deleted. A store that is not partitioned
    /// (SQLite) answers a round that says so.
    async fn keep_partitions(&self, plan: &PartitionPlan) -> StoreResult<PartitionRound>;
    /// Records that the messages of partition `period` with ids below
    /// `through` are in the archive ([`PartitionRound::to_archive`]); the
    /// partition is dropped once they all are. Never moves back.
    async fn mark_archived(&self, period: u64, through: u64) -> StoreResult<()>;
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
    /// The large tables' rows (the engine's estimate) and bytes (data and
    /// indexes), each summed over its partitions when it is partitioned,
    /// and when the oldest stored message (the lowest id) was prepared.
    /// Read from the database's catalog, not by counting rows: cheap
    /// enough for a gauge, though MySQL's `information_schema` may take a
    /// while on a server with many tables, so it is read on its own slow
    /// interval (`--table-size-interval`).
    async fn storage(&self) -> StoreResult<Storage>;

    /// Adds one instance's counts to the minute's row of `flow_minutes` in
    /// one statement (created at zero if missing), so the row holds the sum
    /// over every instance. A backlog sample, when given, replaces the
    /// minute's if it was taken later; a None leaves it as it is.
    async fn add_flow(&self, f: &FlowMinute) -> StoreResult<()>;
    /// The minutes from `since` on that have a row, oldest first.
    async fn flow_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<FlowMinute>>;
    /// Deletes the minutes before `before`; returns how many.
    async fn purge_flow(&self, before: DateTime<Utc>) -> StoreResult<u64>;
}

/// Commits submitted through Kafka before their prepare was seen (the Kafka
/// way in): parked, retried, settled and listed.
#[async_trait]
pub trait WaitingStore: Send + Sync + 'static {
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
}

/// The registry: producers and consumer groups, with their tokens.
#[async_trait]
pub trait RegistryStore: Send + Sync + 'static {
    /// Every registration, by biz_id.
    async fn list_producers(&self) -> StoreResult<Vec<Producer>>;

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
}

/// The consumption ledger: consumer groups' begin and finish of a message
/// under its row lock, the stuck watch and the groups' counts.
#[async_trait]
pub trait LedgerStore: Send + Sync + 'static {
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

/// The local message table way ([`crate::outbox`]): what trustmsg keeps
/// about the producers' own outbox tables (their rows stay in the
/// producers' databases).
#[async_trait]
pub trait OutboxStore: Send + Sync + 'static {
    /// Records that the relay marks a source row failed, with its
    /// `outbox_failed` alert, in one transaction, once per (biz_id, row,
    /// attempt): true when it was new (the alert was raised now), false
    /// when it was recorded before (a relay that failed the row again
    /// after a crash raises no second alert).
    async fn record_outbox_failure(&self, f: &OutboxFailure) -> StoreResult<bool>;
    /// Audits an operator's retry or give-up of a source row.
    async fn record_outbox_action(&self, a: &OutboxAction) -> StoreResult<()>;
    /// The audited actions on one source row, oldest first.
    async fn outbox_actions(
        &self,
        biz_id: &str,
        source_row_id: u64,
    ) -> StoreResult<Vec<OutboxAction>>;
}

/// The storage operations, every concern together; see the module docs of
/// [`crate::store`] for what every backend guarantees.
pub trait Store:
    LifecycleStore
    + MessageStore
    + SendStore
    + VerifyStore
    + OperatorStore
    + AlertStore
    + HousekeepingStore
    + WaitingStore
    + RegistryStore
    + LedgerStore
    + OutboxStore
{
}

impl<T> Store for T where
    T: LifecycleStore
        + MessageStore
        + SendStore
        + VerifyStore
        + OperatorStore
        + AlertStore
        + HousekeepingStore
        + WaitingStore
        + RegistryStore
        + LedgerStore
        + OutboxStore
        + ?Sized
{
}

/// Shared handle to the configured backend.
pub type DynStore = Arc<dyn Store>;

/// [`MessageStore::insert_prepared`] for each message in turn.
pub(super) async fn insert_prepared_each<S: MessageStore + ?Sized>(
    store: &S,
    batch: &[NewMessage],
) -> StoreResult<Vec<Inserted>> {
    let mut out = Vec::with_capacity(batch.len());
    for m in batch {
        out.push(store.insert_prepared(m).await?);
    }
    Ok(out)
}

/// [`MessageStore::transition`] for each transition in turn.
pub(super) async fn transition_each<S: MessageStore + ?Sized>(
    store: &S,
    ts: &[Transition],
) -> StoreResult<Vec<Option<Message>>> {
    let mut out = Vec::with_capacity(ts.len());
    for t in ts {
        out.push(store.transition(t).await?);
    }
    Ok(out)
}
