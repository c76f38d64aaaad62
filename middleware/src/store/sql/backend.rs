//! The concerns every SQL backend implements alike, written once: each
//! macro here is the whole `impl` of one sub-trait, which a backend expands
//! for its store type (`$store`) and its sqlx database (`$db`). A backend
//! gives them, as its own items:
//!
//! - `self.pool`, its pool;
//! - `self.write_tx()`, a transaction that will write (`BEGIN IMMEDIATE` on
//!   SQLite, whose one writer is taken at the start, not at the first write);
//! - `$store::LOCK`, what a SELECT appends to lock the rows it reads for the
//!   transaction (` FOR UPDATE`; nothing on SQLite);
//! - `self.claim_due_rows((columns, table, due), limit, lease)`: the due rows
//!   of `table`, their `due` pushed out by the lease, read as `columns`;
//! - `self.operator_update(update, id, version, audit)`: an operator's
//!   guarded change of one message with its audit row (a backend whose
//!   UPDATE returns its row is expanded `returning` instead and shares
//!   [`crate::store::sql::operator_update`]);
//! - `$store::LEDGER_KEEP`, what a consumption's INSERT ends with so that an
//!   existing row is locked as a new one is (or skipped where the lock
//!   holds the database), and `$store::lost_a_deadlock(e)`, whether a
//!   failed statement lost a deadlock (and may be tried again);
//! - `self.claim_due(claim)`: the due sends or check-backs claimed
//!   ([`crate::store::sql::MessageClaim`]);
//! - `self.mark_sent_rows(marks)` and `self.release_verify_claims(claims,
//!   delay)`: the batched SENT marks and check-back releases, each the
//!   fastest form its database has (a backend without a batched release is
//!   expanded `each`: one guarded UPDATE a claim, in one transaction).
//!
//! What differs between the backends stays in their folders; what reads
//! the same in every dialect is here or in the shared statements of
//! [`crate::store::sql`].

/// [`crate::store::OutboxStore`]: failures of the producers' outbox rows
/// (with their alert) and operators' actions on them.
macro_rules! outbox_store {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::OutboxStore for $store {
            async fn record_outbox_failure(
                &self,
                f: &$crate::store::OutboxFailure,
            ) -> $crate::store::StoreResult<bool> {
                $crate::store::sql::record_outbox_failure(&self.pool, f).await
            }

            async fn record_outbox_action(
                &self,
                a: &$crate::store::OutboxAction,
            ) -> $crate::store::StoreResult<()> {
                $crate::store::sql::record_outbox_action(&self.pool, a).await
            }

            async fn outbox_actions(
                &self,
                biz_id: &str,
                source_row_id: u64,
            ) -> $crate::store::StoreResult<Vec<$crate::store::OutboxAction>> {
                $crate::store::sql::outbox_actions(&self.pool, biz_id, source_row_id).await
            }
        }
    };
}

/// [`crate::store::HousekeepingStore`]: the overdue watch, retention, the
/// move of long contents, the backlog and the flow per minute.
macro_rules! housekeeping_store {
    // A store that is not partitioned: retention deletes every finished
    // row past the window, and the upkeep says so.
    ($store:ty, $db:ty) => {
        $crate::store::sql::housekeeping_store!(@impl $store, $db);

        impl $store {
            /// Where retention's row purge stops: nowhere.
            fn purge_ceiling(&self) -> Option<u64> {
                None
            }

            /// Not partitioned: a round that says so.
            async fn partition_upkeep(
                &self,
                _plan: &$crate::store::PartitionPlan,
            ) -> $crate::store::StoreResult<$crate::store::PartitionRound> {
                Ok($crate::store::PartitionRound::default())
            }

            /// Not partitioned: none.
            async fn oldest_partition(
                &self,
            ) -> $crate::store::StoreResult<Option<$crate::store::OldestPartition>> {
                Ok(None)
            }
        }
    };
    // A store with time partitions (`sql::partitions`; its `held_below`).
    ($store:ty, $db:ty, partitioned) => {
        $crate::store::sql::housekeeping_store!(@impl $store, $db);

        impl $store {
            /// Where retention's row purge stops (`sql::partitions`).
            fn purge_ceiling(&self) -> Option<u64> {
                $crate::store::sql::held_below(&self.held_below)
            }

            /// One round of time partition upkeep (`sql::partitions`).
            async fn partition_upkeep(
                &self,
                plan: &$crate::store::PartitionPlan,
            ) -> $crate::store::StoreResult<$crate::store::PartitionRound> {
                $crate::store::sql::upkeep::<$db>(&self.pool, &self.held_below, plan).await
            }

            /// The oldest time partition still there (`sql::partitions`).
            async fn oldest_partition(
                &self,
            ) -> $crate::store::StoreResult<Option<$crate::store::OldestPartition>> {
                $crate::store::sql::oldest_partition::<$db>(&self.pool).await
            }
        }
    };
    (@impl $store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::HousekeepingStore for $store {
            async fn flag_overdue(
                &self,
                wait: $crate::store::Wait,
                older_than: std::time::Duration,
                limit: u32,
            ) -> $crate::store::StoreResult<Vec<$crate::store::Overdue>> {
                $crate::store::sql::flag_overdue(&self.pool, wait, older_than, limit).await
            }

            async fn purge_finished(
                &self,
                older_than: std::time::Duration,
                limit: u32,
            ) -> $crate::store::StoreResult<u64> {
                let mut tx = self.write_tx().await?;
                let below = self.purge_ceiling();
                let n =
                    $crate::store::sql::purge_finished::<$db>(&mut tx, older_than, limit, below)
                        .await?;
                tx.commit().await?;
                Ok(n)
            }

            async fn purge_settled_alerts(
                &self,
                older_than: std::time::Duration,
                limit: u32,
            ) -> $crate::store::StoreResult<u64> {
                let mut tx = self.write_tx().await?;
                let n = $crate::store::sql::purge_settled_alerts::<$db>(&mut tx, older_than, limit)
                    .await?;
                tx.commit().await?;
                Ok(n)
            }

            async fn finished_messages(
                &self,
                range: &$crate::store::FinishedRange,
            ) -> $crate::store::StoreResult<Vec<$crate::store::FinishedMessage>> {
                let mut conn = self.pool.acquire().await?;
                $crate::store::sql::finished_messages::<$db>(&mut conn, range).await
            }

            async fn delete_archived(
                &self,
                archived: &[$crate::store::FinishedMessage],
            ) -> $crate::store::StoreResult<u64> {
                let mut tx = self.write_tx().await?;
                let n =
                    $crate::store::sql::delete_archived::<$db>(&mut tx, <$store>::LOCK, archived)
                        .await?;
                tx.commit().await?;
                Ok(n)
            }

            async fn raise_archive_failed(
                &self,
                held: &$crate::store::Message,
                error: &str,
            ) -> $crate::store::StoreResult<bool> {
                let mut tx = self.write_tx().await?;
                let raised =
                    $crate::store::sql::raise_archive_failed::<$db>(&mut tx, held, error).await?;
                tx.commit().await?;
                Ok(raised.map(|r| r.announce()).is_some())
            }

            async fn keep_partitions(
                &self,
                plan: &$crate::store::PartitionPlan,
            ) -> $crate::store::StoreResult<$crate::store::PartitionRound> {
                self.partition_upkeep(plan).await
            }

            async fn mark_archived(
                &self,
                period: u64,
                through: u64,
            ) -> $crate::store::StoreResult<()> {
                $crate::store::sql::mark_archived::<$db>(&self.pool, period, through).await
            }

            async fn move_payloads(
                &self,
                limit: u32,
            ) -> $crate::store::StoreResult<$crate::store::PayloadMove> {
                let mut tx = self.write_tx().await?;
                let chunk =
                    $crate::store::sql::move_chunk::<$db>(&mut tx, <$store>::LOCK, limit).await?;
                tx.commit().await?;
                Ok(chunk)
            }

            async fn backlog(&self) -> $crate::store::StoreResult<$crate::store::Backlog> {
                $crate::store::sql::backlog(&self.pool).await
            }

            async fn storage(&self) -> $crate::store::StoreResult<$crate::store::Storage> {
                let mut storage = $crate::store::sql::storage(&self.pool).await?;
                storage.oldest_partition = self.oldest_partition().await?;
                Ok(storage)
            }

            async fn add_flow(
                &self,
                f: &$crate::store::FlowMinute,
            ) -> $crate::store::StoreResult<()> {
                $crate::store::sql::add_flow(&self.pool, f).await
            }

            async fn flow_since(
                &self,
                since: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::StoreResult<Vec<$crate::store::FlowMinute>> {
                $crate::store::sql::flow_since(&self.pool, since).await
            }

            async fn purge_flow(
                &self,
                before: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::StoreResult<u64> {
                $crate::store::sql::purge_flow(&self.pool, before).await
            }
        }
    };
}

/// [`crate::store::AlertStore`]: the alert outbox's claim and settling, the
/// list.
macro_rules! alert_store {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::AlertStore for $store {
            async fn claim_due_alerts(
                &self,
                limit: u32,
                lease: std::time::Duration,
            ) -> $crate::store::StoreResult<Vec<trustmsg_verify_api::admin::AlertView>> {
                let rows = self
                    .claim_due_rows(
                        (
                            $crate::store::sql::ALERT_COLUMNS,
                            "alerts",
                            "next_attempt_at",
                        ),
                        limit,
                        lease,
                    )
                    .await?;
                let mut alerts = rows
                    .iter()
                    .map($crate::store::sql::alert_from_row)
                    .collect::<$crate::store::StoreResult<Vec<_>>>()?;
                // RETURNING comes in no defined order.
                alerts.sort_by_key(|a| a.alert_id);
                Ok(alerts)
            }

            async fn mark_alert_delivered(&self, id: u64) -> $crate::store::StoreResult<bool> {
                $crate::store::sql::mark_alert_delivered(&self.pool, id).await
            }

            async fn retry_alert_later(
                &self,
                id: u64,
                error: &str,
                delay: std::time::Duration,
            ) -> $crate::store::StoreResult<bool> {
                $crate::store::sql::retry_alert_later(&self.pool, id, error, delay).await
            }

            async fn settle_alerts_without_webhook(
                &self,
                limit: u32,
            ) -> $crate::store::StoreResult<u64> {
                $crate::store::sql::settle_alerts_without_webhook(&self.pool, limit).await
            }

            async fn list_alerts(
                &self,
                filter: $crate::store::AlertFilter,
                limit: u32,
                before: Option<u64>,
            ) -> $crate::store::StoreResult<Vec<trustmsg_verify_api::admin::AlertView>> {
                $crate::store::sql::list_alerts(&self.pool, filter, limit, before).await
            }
        }
    };
}

/// [`crate::store::WaitingStore`]: commits of the Kafka way in waiting for
/// their prepare.
macro_rules! waiting_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::WaitingStore for $store {
            async fn park_commit(
                &self,
                w: &$crate::store::NewWaitingCommit,
            ) -> $crate::store::StoreResult<bool> {
                $crate::store::sql::park_commit(&self.pool, w).await
            }

            async fn claim_waiting_commits(
                &self,
                limit: u32,
                lease: std::time::Duration,
            ) -> $crate::store::StoreResult<Vec<$crate::store::WaitingCommit>> {
                let columns = format!(
                    "{}, {} AS now",
                    $crate::store::sql::WAITING_COLUMNS,
                    <$db as $crate::store::sql::Dialect>::NOW
                );
                let rows = self
                    .claim_due_rows((&columns, "submit_waiting", "next_try_at"), limit, lease)
                    .await?;
                let mut waiting = rows
                    .iter()
                    .map($crate::store::sql::waiting_from_row)
                    .collect::<$crate::store::StoreResult<Vec<_>>>()?;
                // RETURNING comes in no defined order.
                waiting.sort_by_key(|w| w.id);
                Ok(waiting)
            }

            async fn retry_waiting_commit(
                &self,
                id: u64,
                delay: std::time::Duration,
            ) -> $crate::store::StoreResult<bool> {
                $crate::store::sql::retry_waiting_commit(&self.pool, id, delay).await
            }

            async fn count_waiting_commits(&self) -> $crate::store::StoreResult<u64> {
                $crate::store::sql::count_waiting_commits(&self.pool).await
            }

            async fn unpark_commit(&self, id: u64) -> $crate::store::StoreResult<bool> {
                $crate::store::sql::unpark_commit(&self.pool, id).await
            }

            async fn list_waiting_commits(
                &self,
                limit: u32,
                after: u64,
            ) -> $crate::store::StoreResult<Vec<$crate::store::WaitingCommit>> {
                $crate::store::sql::list_waiting_commits(&self.pool, limit, after).await
            }
        }
    };
}

/// [`crate::store::OperatorStore`]: an operator's guarded change of one
/// message with its audit row, a blocked key's skip, the bulk requeues, the
/// list and the summary.
macro_rules! operator_store {
    ($store:ty, $db:ty $(, $returning:ident)?) => {
        #[async_trait::async_trait]
        impl $crate::store::OperatorStore for $store {
            async fn redeliver(
                &self,
                id: u64,
                version: u64,
                actor: &$crate::store::Actor,
                reason: &str,
            ) -> $crate::store::StoreResult<Option<$crate::store::Message>> {
                let audit = $crate::store::sql::AuditRow::redeliver(id, actor, reason);
                let now = <$db as $crate::store::sql::Dialect>::NOW;
                let update = $crate::store::sql::redeliver_update(now);
                $crate::store::sql::guarded_update!(self, $db, update, id, version, audit $(, $returning)?)
            }

            async fn skip_blocked(
                &self,
                m: &$crate::store::Message,
                actor: &$crate::store::Actor,
                reason: &str,
            ) -> $crate::store::StoreResult<Option<$crate::store::Message>> {
                let mut tx = self.write_tx().await?;
                let row = $crate::store::sql::skip::<$db>(&mut tx, m, actor, reason).await?;
                // A lost guard ends the transaction now, not when the
                // connection is next used: its locks (SQLite's write lock)
                // must not hold the key back meanwhile.
                if row.is_some() {
                    tx.commit().await?;
                } else {
                    tx.rollback().await?;
                }
                Ok(row)
            }

            async fn blocked_by(
                &self,
                m: &$crate::store::Message,
            ) -> $crate::store::StoreResult<Option<u64>> {
                $crate::store::sql::blocked_by(&self.pool, m).await
            }

            async fn send_now(
                &self,
                id: u64,
                version: u64,
                actor: &$crate::store::Actor,
                reason: &str,
            ) -> $crate::store::StoreResult<Option<$crate::store::Message>> {
                let audit = $crate::store::sql::AuditRow::send_now(id, actor, reason);
                let now = <$db as $crate::store::sql::Dialect>::NOW;
                let update = $crate::store::sql::send_now_update(now);
                $crate::store::sql::guarded_update!(self, $db, update, id, version, audit $(, $returning)?)
            }

            async fn requeue_chunk(
                &self,
                requeue: $crate::store::Requeue,
                filter: &$crate::store::MessageFilter,
                after_id: u64,
                limit: u32,
                actor: &$crate::store::Actor,
                reason: &str,
            ) -> $crate::store::StoreResult<$crate::store::RequeuedChunk> {
                let mut tx = self.write_tx().await?;
                let chunk = $crate::store::sql::requeue_chunk::<$db>(
                    &mut tx,
                    <$store>::LOCK,
                    requeue,
                    filter,
                    (after_id, limit),
                    actor,
                    reason,
                )
                .await?;
                tx.commit().await?;
                Ok(chunk)
            }

            async fn count_requeueable(
                &self,
                requeue: $crate::store::Requeue,
                filter: &$crate::store::MessageFilter,
            ) -> $crate::store::StoreResult<u64> {
                $crate::store::sql::count_requeueable(&self.pool, requeue, filter).await
            }

            async fn list_messages(
                &self,
                filter: &$crate::store::MessageFilter,
                limit: u32,
                before: Option<u64>,
            ) -> $crate::store::StoreResult<Vec<trustmsg_verify_api::MessageView>> {
                $crate::store::sql::list_messages(&self.pool, filter, limit, before).await
            }

            async fn summary(
                &self,
                recent: std::time::Duration,
            ) -> $crate::store::StoreResult<Vec<$crate::store::ProducerSummary>> {
                $crate::store::sql::summary(&self.pool, recent).await
            }
        }
    };
}

/// [`crate::store::SendStore`]: the send claim, the SENT marks, a send's
/// retry, release and failure.
macro_rules! send_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::SendStore for $store {
            async fn claim_due_sends(
                &self,
                limit: u32,
                room: $crate::store::PayloadRoom,
                lease: std::time::Duration,
            ) -> $crate::store::StoreResult<$crate::store::Claimed> {
                let lease = $crate::store::sql::Lease::Every(lease);
                let kind = $crate::store::sql::ClaimKind::Sends;
                let claim = $crate::store::sql::MessageClaim::new(kind, limit, room, lease);
                self.claim_due(claim).await
            }

            async fn mark_sent(
                &self,
                marks: &[$crate::store::SentMark],
            ) -> $crate::store::StoreResult<u64> {
                if marks.is_empty() {
                    return Ok(0);
                }
                self.mark_sent_rows(marks).await
            }

            async fn reschedule_send(
                &self,
                r: &$crate::store::Reschedule,
            ) -> $crate::store::StoreResult<bool> {
                let retry = $crate::store::sql::Retry::Send { counted: true };
                $crate::store::sql::retry_later(&self.pool, retry, r).await
            }

            async fn postpone_send(
                &self,
                r: &$crate::store::Reschedule,
            ) -> $crate::store::StoreResult<bool> {
                let retry = $crate::store::sql::Retry::Send { counted: false };
                $crate::store::sql::retry_later(&self.pool, retry, r).await
            }

            async fn release_sends(
                &self,
                claims: &[(u64, u64)],
            ) -> $crate::store::StoreResult<u64> {
                $crate::store::sql::release_sends(&self.pool, claims).await
            }

            async fn claim_owned_sends(
                &self,
                owner: &$crate::store::SendOwner,
                limit: u32,
                room: $crate::store::PayloadRoom,
                lease: std::time::Duration,
            ) -> $crate::store::StoreResult<$crate::store::Claimed> {
                let lease = $crate::store::sql::Lease::Every(lease);
                let kind = $crate::store::sql::ClaimKind::Sends;
                let claim = $crate::store::sql::MessageClaim::new(kind, limit, room, lease)
                    .owned_by(owner.clone());
                self.claim_due(claim).await
            }

            async fn lapsed_owners(
                &self,
                me: &$crate::store::SendOwner,
            ) -> $crate::store::StoreResult<Vec<$crate::store::SendOwner>> {
                $crate::store::sql::lapsed_owners(&self.pool, me).await
            }

            async fn release_owner(
                &self,
                owner: &$crate::store::SendOwner,
            ) -> $crate::store::StoreResult<u64> {
                $crate::store::sql::release_owner(&self.pool, owner).await
            }

            async fn held_claims(
                &self,
                owner: &$crate::store::SendOwner,
                ids: &[u64],
            ) -> $crate::store::StoreResult<Vec<(u64, u64)>> {
                let which = $crate::store::sql::HeldClaims::Of(ids);
                $crate::store::sql::held_claims(&self.pool, owner, which).await
            }

            async fn lapsed_claims(
                &self,
                owner: &$crate::store::SendOwner,
            ) -> $crate::store::StoreResult<Vec<(u64, u64)>> {
                let which = $crate::store::sql::HeldClaims::Lapsed;
                $crate::store::sql::held_claims(&self.pool, owner, which).await
            }

            async fn release_claims_of(
                &self,
                owner: &$crate::store::SendOwner,
                claims: &[(u64, u64)],
            ) -> $crate::store::StoreResult<u64> {
                $crate::store::sql::release_claims_of(&self.pool, owner, claims).await
            }

            async fn mark_send_failed(
                &self,
                id: u64,
                version: u64,
                error: &str,
                actor: &$crate::store::Actor,
            ) -> $crate::store::StoreResult<Option<$crate::store::Message>> {
                let tx = self.write_tx().await?;
                $crate::store::sql::mark_send_failed::<$db>(
                    tx,
                    <$store>::LOCK,
                    (id, version),
                    error,
                    actor,
                )
                .await
            }
        }
    };
}

/// [`crate::store::VerifyStore`]: the check-back claim, its retries and
/// releases, and the record of each call.
macro_rules! verify_store {
    ($store:ty $(, $db:ty, $each:ident)?) => {
        #[async_trait::async_trait]
        impl $crate::store::VerifyStore for $store {
            async fn claim_due_verifies(
                &self,
                limit: u32,
                lease: $crate::store::VerifyLease,
            ) -> $crate::store::StoreResult<$crate::store::Claimed> {
                let lease = $crate::store::sql::Lease::Verify(lease);
                let kind = $crate::store::sql::ClaimKind::Verifies;
                let room = $crate::store::PayloadRoom::UNBOUNDED;
                let claim = $crate::store::sql::MessageClaim::new(kind, limit, room, lease);
                self.claim_due(claim).await
            }

            async fn reschedule_verify(
                &self,
                r: &$crate::store::Reschedule,
            ) -> $crate::store::StoreResult<bool> {
                let retry = $crate::store::sql::Retry::Verify;
                $crate::store::sql::retry_later(&self.pool, retry, r).await
            }

            async fn release_verifies(
                &self,
                claims: &[(u64, u64)],
                delay: std::time::Duration,
            ) -> $crate::store::StoreResult<u64> {
                if claims.is_empty() {
                    return Ok(0);
                }
                $crate::store::sql::verify_release!(self, claims, delay $(, $db, $each)?)
            }

            async fn record_check_attempts(
                &self,
                calls: &[$crate::store::CheckAttempt],
            ) -> $crate::store::StoreResult<()> {
                $crate::store::sql::record_check_attempts(&self.pool, calls).await
            }

            async fn check_attempts(
                &self,
                message_id: u64,
            ) -> $crate::store::StoreResult<Vec<$crate::store::CheckAttemptEntry>> {
                $crate::store::sql::check_attempts(&self.pool, message_id).await
            }
        }
    };
}

/// [`crate::store::RegistryStore`]: producers and consumer groups.
macro_rules! registry_store {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::RegistryStore for $store {
            async fn list_producers(
                &self,
            ) -> $crate::store::StoreResult<Vec<$crate::store::Producer>> {
                $crate::store::sql::list_producers(&self.pool).await
            }

            async fn upsert_producer(
                &self,
                p: &$crate::store::ProducerRecord,
            ) -> $crate::store::StoreResult<$crate::store::Producer> {
                $crate::store::sql::upsert_producer(&self.pool, p).await
            }

            async fn find_producer(
                &self,
                biz_id: &str,
            ) -> $crate::store::StoreResult<Option<$crate::store::Producer>> {
                $crate::store::sql::find_producer(&self.pool, biz_id).await
            }

            async fn delete_producer(&self, biz_id: &str) -> $crate::store::StoreResult<bool> {
                $crate::store::sql::delete_producer(&self.pool, biz_id).await
            }

            async fn set_producer_token(
                &self,
                biz_id: &str,
                token_hash: &[u8],
            ) -> $crate::store::StoreResult<bool> {
                $crate::store::sql::set_producer_token(&self.pool, biz_id, token_hash).await
            }

            async fn upsert_consumer_group(
                &self,
                g: &$crate::store::ConsumerGroupRecord,
            ) -> $crate::store::StoreResult<$crate::store::ConsumerGroup> {
                $crate::store::sql::upsert_consumer_group(&self.pool, g).await
            }

            async fn find_consumer_group(
                &self,
                name: &str,
            ) -> $crate::store::StoreResult<Option<$crate::store::ConsumerGroup>> {
                $crate::store::sql::find_consumer_group(&self.pool, name).await
            }

            async fn list_consumer_groups(
                &self,
            ) -> $crate::store::StoreResult<Vec<$crate::store::ConsumerGroup>> {
                $crate::store::sql::list_consumer_groups(&self.pool).await
            }

            async fn delete_consumer_group(&self, name: &str) -> $crate::store::StoreResult<bool> {
                $crate::store::sql::delete_consumer_group(&self.pool, name).await
            }

            async fn set_consumer_group_token(
                &self,
                name: &str,
                token_hash: &[u8],
            ) -> $crate::store::StoreResult<bool> {
                $crate::store::sql::set_consumer_group_token(&self.pool, name, token_hash).await
            }
        }
    };
}

/// [`crate::store::LedgerStore`]: begin and finish each in a transaction
/// that holds the consumption's row (`LOCK`; SQLite's write lock), tried
/// again a few times when it loses a deadlock; the reads and the stuck
/// watch.
macro_rules! ledger_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::LedgerStore for $store {
            async fn begin_consumption(
                &self,
                group: &$crate::store::ConsumerGroup,
                message_id: u64,
            ) -> $crate::store::StoreResult<$crate::store::Began> {
                let attempt = || async {
                    let mut tx = self.write_tx().await?;
                    let began = $crate::store::sql::begin_consumption::<$db>(
                        &mut tx,
                        <$store>::LEDGER_KEEP,
                        <$store>::LOCK,
                        group,
                        message_id,
                    )
                    .await?;
                    tx.commit().await?;
                    Ok(began)
                };
                let lost = <$store>::lost_a_deadlock;
                $crate::store::sql::retrying_deadlocks("begin a consumption", lost, attempt).await
            }

            async fn finish_consumption(
                &self,
                group: &$crate::store::ConsumerGroup,
                message_id: u64,
                ok: bool,
                error: Option<&str>,
            ) -> $crate::store::StoreResult<$crate::store::Finished> {
                let attempt = || async {
                    let mut tx = self.write_tx().await?;
                    let (finished, raised) = $crate::store::sql::finish_consumption::<$db>(
                        &mut tx,
                        <$store>::LOCK,
                        group,
                        message_id,
                        ok,
                        error,
                    )
                    .await?;
                    tx.commit().await?;
                    raised.announce();
                    Ok(finished)
                };
                let lost = <$store>::lost_a_deadlock;
                $crate::store::sql::retrying_deadlocks("finish a consumption", lost, attempt).await
            }

            async fn consumptions_of(
                &self,
                message_id: u64,
            ) -> $crate::store::StoreResult<Vec<$crate::store::Consumption>> {
                $crate::store::sql::consumptions_of(&self.pool, message_id).await
            }

            async fn flag_stuck_consumptions(
                &self,
                limit: u32,
            ) -> $crate::store::StoreResult<Vec<$crate::store::StuckConsumption>> {
                $crate::store::sql::flag_stuck_consumptions(&self.pool, limit).await
            }

            async fn consumer_group_counts(
                &self,
            ) -> $crate::store::StoreResult<Vec<$crate::store::ConsumerGroupCounts>> {
                $crate::store::sql::consumer_group_counts(&self.pool).await
            }
        }
    };
}

/// Tries of a ledger transaction that lost a deadlock before it gives up.
const LEDGER_TRIES: usize = 3;

/// `attempt` (a whole transaction), tried again while it loses a deadlock
/// (`lost`), [`LEDGER_TRIES`] times at most: then `Contention(what)`.
pub(in crate::store) async fn retrying_deadlocks<T, F, Fut>(
    what: &'static str,
    lost: fn(&sqlx::Error) -> bool,
    mut attempt: F,
) -> crate::store::StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = crate::store::StoreResult<T>>,
{
    for _ in 0..LEDGER_TRIES {
        match attempt().await {
            Err(crate::store::StoreError::Db(e)) if lost(&e) => continue,
            done => return done,
        }
    }
    Err(crate::store::StoreError::Contention(what))
}

/// An operator's guarded change of one message ([`operator_store`]): the
/// backend's own `operator_update`, or, for a backend expanded with
/// `returning`, the shared one over a statement that returns its row
/// ([`crate::store::sql::operator_update`]).
macro_rules! guarded_update {
    ($this:ident, $db:ty, $update:ident, $id:ident, $version:ident, $audit:ident) => {
        $this.operator_update($update, $id, $version, $audit).await
    };
    ($this:ident, $db:ty, $update:ident, $id:ident, $version:ident, $audit:ident, returning) => {
        $crate::store::sql::operator_update::<$db>(
            $this.write_tx().await?,
            $update,
            ($id, $version),
            $audit,
        )
        .await
    };
}

/// Check-back claims given back ([`verify_store`]): the backend's own
/// batched `release_verify_claims`, or, for a backend expanded with `each`,
/// one guarded UPDATE each in one writing transaction.
macro_rules! verify_release {
    ($this:ident, $claims:ident, $delay:ident) => {
        $this.release_verify_claims($claims, $delay).await
    };
    ($this:ident, $claims:ident, $delay:ident, $db:ty, each) => {{
        let mut tx = $this.write_tx().await?;
        let matched =
            $crate::store::sql::release_verifies_each::<$db>(&mut tx, $claims, $delay).await?;
        tx.commit().await?;
        Ok(matched)
    }};
}

pub(in crate::store) use {
    alert_store, guarded_update, housekeeping_store, ledger_store, operator_store, outbox_store,
    registry_store, send_store, verify_release, verify_store, waiting_store,
};
