//! SQLite backend: the embedded store for development and single-instance use.
//!
//! Same guarantees as the MySQL backend (see the [`super`] module docs), met the
//! SQLite way:
//! - SQLite has one writer at a time, so there is no SKIP LOCKED: a claim is one
//!   `UPDATE … WHERE id IN (SELECT … LIMIT ?) RETURNING …` statement, which selects
//!   the due rows and pushes their due-time out under the write lock, so two
//!   claimers can never take the same row and a claimer never waits on a half-done
//!   claim.
//! - Multi-statement writes (a decision plus its audit row) run in `BEGIN
//!   IMMEDIATE` transactions: they take the write lock up front, so they queue
//!   behind `busy_timeout` instead of failing on a read-to-write upgrade.
//! - Times are INTEGER milliseconds since the Unix epoch, computed by SQLite from
//!   `julianday('now')` (see [`NOW_MS`]), so the database clock is the clock and
//!   precision is exactly one millisecond, as with MySQL's `DATETIME(3)`.
//! - Files run in WAL mode (readers never block the writer) with `synchronous =
//!   FULL`, because an acknowledged prepare or commit must survive a power cut.
//!   `sqlite::memory:` uses one connection held for the life of the pool, since an
//!   in-memory database lives and dies with its connection.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{Row, Sqlite, SqlitePool};
use trustmsg_verify_api::admin::{AlertKind, AlertView};
use trustmsg_verify_api::{MessageStatus, MessageView};

use super::prelude::{
    AlertStore, HousekeepingStore, LedgerStore, LifecycleStore, MessageStore, OperatorStore,
    RegistryStore, SendStore, VerifyStore, WaitingStore,
};
use super::sql::{
    self, clip_error, message_from_row, producer_from_row, transition_effects, AuditRow, ClaimKind,
    Dialect, Lease, SqlRow, ALERT_COLUMNS, GROUP_COLUMNS, MESSAGE_COLUMNS, PREPARE_COLUMNS,
    PRODUCER_COLUMNS, STORED_COLUMNS,
};
use super::{
    Actor, AlertFilter, AuditEntry, Backlog, Began, CheckAttempt, CheckAttemptEntry, Claimed,
    ConsumerGroup, ConsumerGroupCounts, ConsumerGroupRecord, Consumption, Finished, FlowMinute,
    Inserted, Message, MessageFilter, NewAlert, NewMessage, Overdue, PayloadMove, PayloadRoom,
    Producer, ProducerRecord, ProducerSummary, Requeue, RequeuedChunk, SentMark, StoreError,
    StoreResult, StuckConsumption, Transition, VerifyLease, Wait,
};

/// The database clock as INTEGER ms since the epoch. `julianday('now')` holds
/// whole milliseconds, so rounding (not truncating) the float product gives the
/// exact value; 'now' is fixed for the whole statement, so every time a single
/// statement writes is the same instant.
const NOW_MS: &str = "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)";

/// When a commit makes its message due, as SQL (`next_send_at` of the
/// commit's UPDATE; `lease` is the parameter holding its send lease in ms):
/// at once, which for this instance's forwarder is a claim of one send lease
/// (the fast path), or at the message's `deliver_at` if that is later (no
/// claim: the sweepers take it then). The one place this backend says when
/// a committed message is due.
fn commit_due(lease: &str) -> String {
    format!("CASE WHEN deliver_at > {NOW_MS} THEN deliver_at ELSE {NOW_MS} + {lease} END")
}

/// How long a writer waits for the write lock before the call fails (and is retried
/// by its caller as a transient error).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The SQLite store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

/// `sqlite::memory:`, `sqlite://:memory:` or `…?mode=memory`.
fn is_in_memory(url: &str) -> bool {
    let rest = url.trim_start_matches("sqlite:").trim_start_matches("//");
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    path == ":memory:" || query.split('&').any(|kv| kv == "mode=memory")
}

impl SqliteStore {
    /// Claims up to `limit` rows of `table` whose `due` time has come, oldest
    /// due first, pushing `due` out by `lease` (one UPDATE … RETURNING under
    /// SQLite's single write lock), returning `returning` of each, in no
    /// defined order. The alert outbox and waiting commits are claimed this way.
    async fn claim_due_rows(
        &self,
        returning: &str,
        table: &str,
        due: &str,
        limit: u32,
        lease: Duration,
    ) -> StoreResult<Vec<SqliteRow>> {
        Ok(sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE {table} SET {due} = {NOW_MS} + ?1 \
             WHERE id IN (SELECT id FROM {table} WHERE {due} <= {NOW_MS} \
             ORDER BY {due} LIMIT ?2) \
             RETURNING {returning}"
        )))
        .bind(millis(lease))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Opens (creating if missing) the database at `url`: `sqlite://path.db`,
    /// `sqlite://path.db?mode=rwc` or `sqlite::memory:`.
    pub async fn connect(url: &super::DatabaseUrl) -> StoreResult<Self> {
        let url = url.expose_for_driver();
        let opts = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        let pool = if is_in_memory(url) {
            // One connection, never closed for idleness or age: closing it would
            // drop the database.
            SqlitePoolOptions::new()
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                .acquire_timeout(BUSY_TIMEOUT)
                .connect_with(opts)
                .await?
        } else {
            SqlitePoolOptions::new()
                .max_connections(8)
                .acquire_timeout(BUSY_TIMEOUT)
                .connect_with(
                    opts.journal_mode(SqliteJournalMode::Wal)
                        .synchronous(SqliteSynchronous::Full),
                )
                .await?
        };
        Ok(Self { pool })
    }

    /// The underlying pool.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// SQLite integers are signed; an id or version beyond i64 cannot be stored, so it
/// cannot match anything either.
fn sql_int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(-1)
}

impl Dialect for Sqlite {
    const NOW: &'static str = NOW_MS;
    type Int = i64;

    fn int(v: u64) -> i64 {
        sql_int(v)
    }

    fn rows_affected(done: &sqlx::sqlite::SqliteQueryResult) -> u64 {
        done.rows_affected()
    }

    fn last_insert_id(done: &sqlx::sqlite::SqliteQueryResult) -> u64 {
        u64::try_from(done.last_insert_rowid()).unwrap_or(0)
    }

    const MINUS_SPAN: &'static str = " - ?";
    const GREATEST: &'static str = "MAX";
    const PLUS_SPAN: &'static str = " + ?";

    fn span(d: Duration) -> i64 {
        millis(d)
    }

    type Time = i64;

    fn time(t: DateTime<Utc>) -> i64 {
        t.timestamp_millis()
    }
}

impl SqlRow for SqliteRow {
    fn opt_text(&self, col: &str) -> StoreResult<Option<String>> {
        self.try_get(col).map_err(|e| sql::column_error(col, e))
    }

    fn opt_bytes(&self, col: &str) -> StoreResult<Option<Vec<u8>>> {
        self.try_get(col).map_err(|e| sql::column_error(col, e))
    }

    /// SQLite integers are signed.
    fn opt_u64(&self, col: &str) -> StoreResult<Option<u64>> {
        self.opt_i64(col)?
            .map(|v| {
                u64::try_from(v)
                    .map_err(|_| StoreError::Corrupt(format!("{col} = {v} is out of range")))
            })
            .transpose()
    }

    fn opt_i64(&self, col: &str) -> StoreResult<Option<i64>> {
        self.try_get(col).map_err(|e| sql::column_error(col, e))
    }

    /// Times are INTEGER milliseconds since the epoch.
    fn opt_time(&self, col: &str) -> StoreResult<Option<DateTime<Utc>>> {
        self.opt_i64(col)?
            .map(|ms| {
                DateTime::from_timestamp_millis(ms)
                    .ok_or_else(|| StoreError::Corrupt(format!("{col} = {ms} is not a time")))
            })
            .transpose()
    }
}

/// The first row of a RETURNING statement. The whole statement runs to completion
/// (`fetch_all`), so it never stays half-stepped holding the write lock.
fn first_message(rows: &[SqliteRow]) -> StoreResult<Option<Message>> {
    rows.first().map(message_from_row).transpose()
}

#[async_trait]
impl LifecycleStore for SqliteStore {
    async fn migrate(&self) -> StoreResult<()> {
        sqlx::migrate!("../migrations/sqlite")
            .run(&self.pool)
            .await?;
        Ok(())
    }

    async fn now(&self) -> StoreResult<DateTime<Utc>> {
        let ms: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT {NOW_MS}")))
            .fetch_one(&self.pool)
            .await?;
        DateTime::from_timestamp_millis(ms)
            .ok_or_else(|| StoreError::Corrupt(format!("database clock {ms} is not a time")))
    }

    async fn ping(&self) -> StoreResult<()> {
        sql::ping(&self.pool).await
    }
}

#[async_trait]
impl MessageStore for SqliteStore {
    async fn insert_prepared(&self, m: &NewMessage) -> StoreResult<Inserted> {
        let content = sql::Content::of(m);
        // DO NOTHING only swallows the (biz_id, message_key) conflict; any other
        // constraint still fails the call.
        let insert = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO messages ({PREPARE_COLUMNS}) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'PREPARED', {NOW_MS} + ?, {NOW_MS}, {NOW_MS}, \
             COALESCE(?, {NOW_MS} + ?), ?, ?) \
             ON CONFLICT (biz_id, message_key) DO NOTHING RETURNING {STORED_COLUMNS}"
        )));
        let (at, after) = sql::deliver_binds::<Sqlite>(m);
        let insert = sql::bind_prepare(insert, m, &content)
            .bind(millis(m.first_verify_after))
            .bind(at)
            .bind(after)
            .bind(sql::payload_bytes(m))
            .bind(content.apart());
        let created = if content.apart() {
            // The row and its content apart in one transaction.
            let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
            let rows = insert.fetch_all(&mut *tx).await?;
            let created = first_message(&rows)?;
            if let Some(row) = &created {
                sql::insert_apart::<Sqlite>(&mut tx, &[(row.id, &content)]).await?;
                tx.commit().await?;
            } else {
                tx.rollback().await?;
            }
            created.map(|row| sql::with_content(row, m))
        } else {
            first_message(&insert.fetch_all(&self.pool).await?)?
        };
        if let Some(created) = created {
            return Ok(Inserted::Created(created));
        }
        let row = self
            .find_message(&m.biz_id, &m.message_key)
            .await?
            .ok_or(StoreError::Vanished("the row a duplicate key names"))?;
        Ok(Inserted::Existing(row))
    }

    async fn insert_tombstone(
        &self,
        biz_id: &str,
        message_key: &str,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO messages (biz_id, message_key, payload, headers, status, tombstone, \
             created_at, updated_at, decided_at) \
             VALUES (?, ?, X'', '{{}}', 'ROLLED_BACK', 1, {NOW_MS}, {NOW_MS}, {NOW_MS}) \
             ON CONFLICT (biz_id, message_key) DO NOTHING RETURNING {MESSAGE_COLUMNS}"
        )))
        .bind(biz_id)
        .bind(message_key)
        .fetch_all(&mut *tx)
        .await?;
        let Some(row) = first_message(&rows)? else {
            // Ended now: BEGIN IMMEDIATE holds the write lock until then.
            tx.rollback().await?;
            return Ok(None);
        };
        sql::insert_audits(&mut *tx, &[AuditRow::tombstone(row.id, actor, reason)]).await?;
        tx.commit().await?;
        Ok(Some(row))
    }

    async fn find_message(&self, biz_id: &str, message_key: &str) -> StoreResult<Option<Message>> {
        sql::find_message(&self.pool, biz_id, message_key).await
    }

    async fn find_message_by_id(&self, id: u64) -> StoreResult<Option<Message>> {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?"
        )))
        .bind(sql_int(id))
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(message_from_row)
        .transpose()
    }

    async fn transition(&self, t: &Transition) -> StoreResult<Option<Message>> {
        let send_status = transition_effects(t.to).send_status;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE messages SET status = ?1, send_status = ?2, version = version + 1, \
             verify_attempts = CASE WHEN ?1 = 'PREPARED' THEN 0 ELSE verify_attempts + ?3 END, \
             last_error = COALESCE(?4, last_error), \
             next_verify_at = CASE WHEN ?1 = 'PREPARED' THEN {NOW_MS} END, \
             verify_overdue_alerted = CASE WHEN ?1 = 'PREPARED' THEN 0 ELSE verify_overdue_alerted END, \
             requeued_at = CASE WHEN ?1 = 'PREPARED' THEN {NOW_MS} ELSE requeued_at END, \
             next_send_at = CASE WHEN ?1 = 'COMMITTED' THEN {} END, \
             decided_at = CASE WHEN ?1 IN ('COMMITTED', 'ROLLED_BACK', 'VERIFY_FAILED') \
                 THEN {NOW_MS} ELSE decided_at END, \
             updated_at = {NOW_MS} \
             WHERE id = ?6 AND status = ?7 AND version = ?8 RETURNING {MESSAGE_COLUMNS}",
            commit_due("?5")
        )))
        .bind(t.to.as_str())
        .bind(send_status)
        .bind(i64::from(t.verify_attempt))
        .bind(t.error.as_deref().map(clip_error))
        .bind(millis(t.send_lease))
        .bind(sql_int(t.id))
        .bind(t.from.as_str())
        .bind(sql_int(t.version))
        .fetch_all(&mut *tx)
        .await?;
        let Some(mut row) = first_message(&rows)? else {
            return Ok(None);
        };
        sql::insert_audits(&mut *tx, AuditRow::transition(t).as_slice()).await?;
        let mut alerts: Vec<NewAlert> = (row.status == MessageStatus::VerifyFailed)
            .then(|| NewAlert::failed(AlertKind::VerifyFailed, &row))
            .into_iter()
            .collect();
        if row.order_key.is_some() {
            let upsert = format!(
                "INSERT INTO ordered_keys (order_key, last_seq, sent_through, updated_at) \
                 VALUES (?, 1, 0, {NOW_MS}) ON CONFLICT (order_key) \
                 DO UPDATE SET last_seq = last_seq + 1, updated_at = {NOW_MS}"
            );
            let ordered =
                sql::order_commits::<Sqlite>(&mut tx, &upsert, std::slice::from_mut(&mut row));
            alerts.extend(ordered.await?);
        }
        let raised = sql::raise_alerts::<Sqlite>(&mut tx, alerts).await?;
        tx.commit().await?;
        raised.announce();
        Ok(Some(row))
    }

    async fn audit_trail(&self, message_id: u64) -> StoreResult<Vec<AuditEntry>> {
        sql::audit_trail(&self.pool, message_id).await
    }
}

#[async_trait]
impl SendStore for SqliteStore {
    async fn claim_due_sends(
        &self,
        limit: u32,
        room: PayloadRoom,
        lease: Duration,
    ) -> StoreResult<Claimed> {
        self.claim_due(ClaimKind::Sends, limit, room, Lease::Every(lease))
            .await
    }

    async fn mark_sent(&self, marks: &[SentMark]) -> StoreResult<u64> {
        if marks.is_empty() {
            return Ok(0);
        }
        // One transaction for the batch: one fsync, and the write lock is taken once.
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let mut matched = sql::mark_sent_ordered::<Sqlite>(&mut tx, marks).await?;
        for m in marks.iter().filter(|m| m.order.is_none()) {
            matched += sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE messages SET send_status = 'SENT', next_send_at = NULL, \
                 sent_at = {NOW_MS}, updated_at = {NOW_MS}, version = version + 1, \
                 send_attempts = send_attempts + 1, kafka_partition = ?, kafka_offset = ? \
                 WHERE id = ? AND version = ? AND status = 'COMMITTED' AND send_status = 'PENDING'"
            )))
            .bind(m.partition)
            .bind(m.offset)
            .bind(sql_int(m.id))
            .bind(sql_int(m.version))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        tx.commit().await?;
        Ok(matched)
    }

    async fn reschedule_send(
        &self,
        id: u64,
        version: u64,
        error: &str,
        delay: Duration,
    ) -> StoreResult<bool> {
        self.retry_send_later(id, version, error, delay, 1).await
    }

    async fn postpone_send(
        &self,
        id: u64,
        version: u64,
        error: &str,
        delay: Duration,
    ) -> StoreResult<bool> {
        self.retry_send_later(id, version, error, delay, 0).await
    }

    async fn release_sends(&self, claims: &[(u64, u64)]) -> StoreResult<u64> {
        sql::release_sends(&self.pool, claims).await
    }

    async fn mark_send_failed(
        &self,
        id: u64,
        version: u64,
        error: &str,
        actor: &Actor,
    ) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let failed = sql::mark_send_failed::<Sqlite>(&mut tx, "", (id, version), error, actor);
        let Some((row, raised)) = failed.await? else {
            // Ended now: BEGIN IMMEDIATE holds the write lock until then.
            tx.rollback().await?;
            return Ok(None);
        };
        tx.commit().await?;
        raised.announce();
        Ok(Some(row))
    }
}

#[async_trait]
impl VerifyStore for SqliteStore {
    async fn claim_due_verifies(&self, limit: u32, lease: VerifyLease) -> StoreResult<Claimed> {
        self.claim_due(
            ClaimKind::Verifies,
            limit,
            PayloadRoom::UNBOUNDED,
            Lease::Verify(lease),
        )
        .await
    }

    async fn reschedule_verify(
        &self,
        id: u64,
        version: u64,
        error: &str,
        delay: Duration,
    ) -> StoreResult<bool> {
        let done = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE messages SET verify_attempts = verify_attempts + 1, last_error = ?, \
             next_verify_at = {NOW_MS} + ?, version = version + 1, updated_at = {NOW_MS} \
             WHERE id = ? AND version = ? AND status = 'PREPARED'"
        )))
        .bind(clip_error(error))
        .bind(millis(delay))
        .bind(sql_int(id))
        .bind(sql_int(version))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn release_verifies(&self, claims: &[(u64, u64)], delay: Duration) -> StoreResult<u64> {
        if claims.is_empty() {
            return Ok(0);
        }
        // One transaction for the batch: one fsync, and the write lock is taken once.
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let mut matched = 0;
        for (id, version) in claims {
            matched += sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE messages SET next_verify_at = {NOW_MS} + ?, version = version + 1 \
                 WHERE id = ? AND version = ? AND status = 'PREPARED'"
            )))
            .bind(millis(delay))
            .bind(sql_int(*id))
            .bind(sql_int(*version))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        tx.commit().await?;
        Ok(matched)
    }

    async fn record_check_attempts(&self, calls: &[CheckAttempt]) -> StoreResult<()> {
        sql::record_check_attempts(&self.pool, calls).await
    }

    async fn check_attempts(&self, message_id: u64) -> StoreResult<Vec<CheckAttemptEntry>> {
        sql::check_attempts(&self.pool, message_id).await
    }
}

#[async_trait]
impl OperatorStore for SqliteStore {
    async fn redeliver(
        &self,
        id: u64,
        version: u64,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        let audit = AuditRow::redeliver(id, actor, reason);
        self.operator_update(sql::redeliver_update(NOW_MS), id, version, audit)
            .await
    }

    async fn skip_blocked(
        &self,
        m: &Message,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let row = sql::skip::<Sqlite>(&mut tx, m, actor, reason).await?;
        // A lost guard ends the transaction now: BEGIN IMMEDIATE holds the
        // database's write lock until then.
        if row.is_some() {
            tx.commit().await?;
        } else {
            tx.rollback().await?;
        }
        Ok(row)
    }

    async fn blocked_by(&self, m: &Message) -> StoreResult<Option<u64>> {
        sql::blocked_by(&self.pool, m).await
    }

    async fn send_now(
        &self,
        id: u64,
        version: u64,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        let audit = AuditRow::send_now(id, actor, reason);
        self.operator_update(sql::send_now_update(NOW_MS), id, version, audit)
            .await
    }

    async fn requeue_chunk(
        &self,
        requeue: Requeue,
        filter: &MessageFilter,
        after_id: u64,
        limit: u32,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<RequeuedChunk> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let chunk = sql::requeue_chunk::<Sqlite>(
            &mut tx,
            "",
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
        requeue: Requeue,
        filter: &MessageFilter,
    ) -> StoreResult<u64> {
        sql::count_requeueable(&self.pool, requeue, filter).await
    }

    async fn list_messages(
        &self,
        filter: &MessageFilter,
        limit: u32,
        before: Option<u64>,
    ) -> StoreResult<Vec<MessageView>> {
        sql::list_messages(&self.pool, filter, limit, before).await
    }

    async fn summary(&self, recent: std::time::Duration) -> StoreResult<Vec<ProducerSummary>> {
        sql::summary(&self.pool, recent).await
    }
}

#[async_trait]
impl AlertStore for SqliteStore {
    /// One statement under the write lock, like the message claims: no
    /// two claimers can take the same alert.
    async fn claim_due_alerts(&self, limit: u32, lease: Duration) -> StoreResult<Vec<AlertView>> {
        let rows = self
            .claim_due_rows(ALERT_COLUMNS, "alerts", "next_attempt_at", limit, lease)
            .await?;
        let mut alerts = rows
            .iter()
            .map(sql::alert_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        // RETURNING comes in no defined order.
        alerts.sort_by_key(|a| a.alert_id);
        Ok(alerts)
    }

    async fn mark_alert_delivered(&self, id: u64) -> StoreResult<bool> {
        sql::mark_alert_delivered(&self.pool, id).await
    }

    async fn retry_alert_later(&self, id: u64, error: &str, delay: Duration) -> StoreResult<bool> {
        sql::retry_alert_later(&self.pool, id, error, delay).await
    }

    async fn settle_alerts_without_webhook(&self, limit: u32) -> StoreResult<u64> {
        sql::settle_alerts_without_webhook(&self.pool, limit).await
    }

    async fn list_alerts(
        &self,
        filter: AlertFilter,
        limit: u32,
        before: Option<u64>,
    ) -> StoreResult<Vec<AlertView>> {
        sql::list_alerts(&self.pool, filter, limit, before).await
    }
}

#[async_trait]
impl HousekeepingStore for SqliteStore {
    async fn flag_overdue(
        &self,
        wait: Wait,
        older_than: Duration,
        limit: u32,
    ) -> StoreResult<Vec<Overdue>> {
        sql::flag_overdue(&self.pool, wait, older_than, limit).await
    }

    async fn purge_finished(&self, older_than: Duration, limit: u32) -> StoreResult<u64> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let n = sql::purge_finished::<Sqlite>(&mut tx, older_than, limit).await?;
        tx.commit().await?;
        Ok(n)
    }

    async fn move_payloads(&self, limit: u32) -> StoreResult<PayloadMove> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let chunk = sql::move_chunk::<Sqlite>(&mut tx, "", limit).await?;
        tx.commit().await?;
        Ok(chunk)
    }

    async fn backlog(&self) -> StoreResult<Backlog> {
        sql::backlog(&self.pool).await
    }

    async fn add_flow(&self, f: &FlowMinute) -> StoreResult<()> {
        const UPSERT: sql::Upsert = sql::Upsert {
            clause: "ON CONFLICT (minute) DO UPDATE SET",
            proposed: proposed_flow_value,
        };
        sql::add_flow(&self.pool, &UPSERT, f).await
    }

    async fn flow_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<FlowMinute>> {
        sql::flow_since(&self.pool, since).await
    }

    async fn purge_flow(&self, before: DateTime<Utc>) -> StoreResult<u64> {
        sql::purge_flow(&self.pool, before).await
    }
}

#[async_trait]
impl WaitingStore for SqliteStore {
    async fn park_commit(&self, w: &super::NewWaitingCommit) -> StoreResult<bool> {
        sql::park_commit(&self.pool, "INSERT OR IGNORE", w).await
    }

    async fn claim_waiting_commits(
        &self,
        limit: u32,
        lease: Duration,
    ) -> StoreResult<Vec<super::WaitingCommit>> {
        let columns = format!("{}, {NOW_MS} AS now", sql::WAITING_COLUMNS);
        let rows = self
            .claim_due_rows(&columns, "submit_waiting", "next_try_at", limit, lease)
            .await?;
        let mut waiting = rows
            .iter()
            .map(sql::waiting_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        // RETURNING comes in no defined order.
        waiting.sort_by_key(|w| w.id);
        Ok(waiting)
    }

    async fn retry_waiting_commit(&self, id: u64, delay: Duration) -> StoreResult<bool> {
        sql::retry_waiting_commit(&self.pool, id, delay).await
    }

    async fn count_waiting_commits(&self) -> StoreResult<u64> {
        sql::count_waiting_commits(&self.pool).await
    }

    async fn unpark_commit(&self, id: u64) -> StoreResult<bool> {
        sql::unpark_commit(&self.pool, id).await
    }

    async fn list_waiting_commits(
        &self,
        limit: u32,
        after: u64,
    ) -> StoreResult<Vec<super::WaitingCommit>> {
        sql::list_waiting_commits(&self.pool, limit, after).await
    }
}

#[async_trait]
impl RegistryStore for SqliteStore {
    async fn list_producers(&self) -> StoreResult<Vec<Producer>> {
        sql::list_producers(&self.pool).await
    }

    async fn upsert_producer(&self, p: &ProducerRecord) -> StoreResult<Producer> {
        // Like MySQL: an update keeps the token and the signing secret, which have
        // their own operations.
        let upsert = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO producers ({PRODUCER_COLUMNS}) \
             VALUES (?, ?, ?, ?, ?, ?, ?, {NOW_MS}, {NOW_MS}, ?, ?) \
             ON CONFLICT (biz_id) DO UPDATE SET verify_url = excluded.verify_url, \
             ordered = excluded.ordered, \
             verify_timeout_ms = excluded.verify_timeout_ms, \
             first_verify_after_ms = excluded.first_verify_after_ms, \
             max_verify_attempts = excluded.max_verify_attempts, topics = excluded.topics, \
             updated_at = {NOW_MS} \
             RETURNING {PRODUCER_COLUMNS}"
        )));
        let row = sql::bind_producer(upsert, p).fetch_one(&self.pool).await?;
        producer_from_row(&row)
    }

    async fn find_producer(&self, biz_id: &str) -> StoreResult<Option<Producer>> {
        sql::find_producer(&self.pool, biz_id).await
    }

    async fn delete_producer(&self, biz_id: &str) -> StoreResult<bool> {
        sql::delete_producer(&self.pool, biz_id).await
    }

    async fn set_producer_token(&self, biz_id: &str, token_hash: &[u8]) -> StoreResult<bool> {
        sql::set_producer_token(&self.pool, biz_id, token_hash).await
    }

    async fn upsert_consumer_group(&self, g: &ConsumerGroupRecord) -> StoreResult<ConsumerGroup> {
        // Like MySQL: an update keeps the token and created_at.
        let upsert = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO consumer_groups ({GROUP_COLUMNS}) \
             VALUES (?, ?, ?, ?, ?, {NOW_MS}, {NOW_MS}) \
             ON CONFLICT (group_name) DO UPDATE SET topics = excluded.topics, \
             max_failures = excluded.max_failures, \
             in_progress_timeout_ms = excluded.in_progress_timeout_ms, \
             updated_at = {NOW_MS} \
             RETURNING {GROUP_COLUMNS}"
        )));
        let row = sql::bind_group(upsert, g).fetch_one(&self.pool).await?;
        sql::group_from_row(&row)
    }

    async fn find_consumer_group(&self, name: &str) -> StoreResult<Option<ConsumerGroup>> {
        sql::find_consumer_group(&self.pool, name).await
    }

    async fn list_consumer_groups(&self) -> StoreResult<Vec<ConsumerGroup>> {
        sql::list_consumer_groups(&self.pool).await
    }

    async fn delete_consumer_group(&self, name: &str) -> StoreResult<bool> {
        sql::delete_consumer_group(&self.pool, name).await
    }

    async fn set_consumer_group_token(&self, name: &str, token_hash: &[u8]) -> StoreResult<bool> {
        sql::set_consumer_group_token(&self.pool, name, token_hash).await
    }
}

#[async_trait]
impl LedgerStore for SqliteStore {
    async fn begin_consumption(
        &self,
        group: &ConsumerGroup,
        message_id: u64,
    ) -> StoreResult<Began> {
        // BEGIN IMMEDIATE holds the one write lock: the row needs no lock of its own.
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let began = sql::begin_consumption::<Sqlite>(
            &mut tx,
            "ON CONFLICT (group_name, message_id) DO NOTHING",
            "",
            group,
            message_id,
        )
        .await?;
        tx.commit().await?;
        Ok(began)
    }

    async fn finish_consumption(
        &self,
        group: &ConsumerGroup,
        message_id: u64,
        ok: bool,
        error: Option<&str>,
    ) -> StoreResult<Finished> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let (finished, raised) =
            sql::finish_consumption::<Sqlite>(&mut tx, "", group, message_id, ok, error).await?;
        tx.commit().await?;
        raised.announce();
        Ok(finished)
    }

    async fn consumptions_of(&self, message_id: u64) -> StoreResult<Vec<Consumption>> {
        sql::consumptions_of(&self.pool, message_id).await
    }

    async fn flag_stuck_consumptions(&self, limit: u32) -> StoreResult<Vec<StuckConsumption>> {
        sql::flag_stuck_consumptions(&self.pool, limit).await
    }

    async fn consumer_group_counts(&self) -> StoreResult<Vec<ConsumerGroupCounts>> {
        sql::consumer_group_counts(&self.pool).await
    }
}

impl SqliteStore {
    /// An operator's change of one message: `update` (binds `id`, `version`:
    /// its guard) and `audit`, in one transaction; the row as it is then.
    /// None when the guard matched nothing: the transaction ends at once,
    /// since `BEGIN IMMEDIATE` holds the database's write lock until then.
    async fn operator_update(
        &self,
        update: String,
        id: u64,
        version: u64,
        audit: AuditRow,
    ) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "{update} RETURNING {MESSAGE_COLUMNS}"
        )))
        .bind(sql_int(id))
        .bind(sql_int(version))
        .fetch_all(&mut *tx)
        .await?;
        let Some(row) = first_message(&rows)? else {
            tx.rollback().await?;
            return Ok(None);
        };
        sql::insert_audits(&mut *tx, &[audit]).await?;
        tx.commit().await?;
        Ok(Some(row))
    }

    /// Reschedules a pending send after `delay`, recording `error` and adding
    /// `counted` (0 or 1) to its attempts.
    async fn retry_send_later(
        &self,
        id: u64,
        version: u64,
        error: &str,
        delay: Duration,
        counted: i64,
    ) -> StoreResult<bool> {
        let done = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE messages SET send_attempts = send_attempts + ?, last_error = ?, \
             next_send_at = {NOW_MS} + ?, version = version + 1, updated_at = {NOW_MS} \
             WHERE id = ? AND version = ? AND status = 'COMMITTED' AND send_status = 'PENDING'"
        )))
        .bind(counted)
        .bind(clip_error(error))
        .bind(millis(delay))
        .bind(sql_int(id))
        .bind(sql_int(version))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Selects the due ids and pushes their due column out by the lease in one
    /// statement: SQLite runs it under the database's single write lock, which is
    /// what SKIP LOCKED plus row locks give on MySQL. A check-back lease is
    /// worked out in the same statement from the row's producer (SQLite locks
    /// no rows, so reading the registration there holds nobody up). Rows that
    /// cannot be read are then quarantined in a second transaction; if that
    /// fails they keep the claim's lease and the next claim after it tries again.
    async fn claim_due(
        &self,
        kind: ClaimKind,
        limit: u32,
        room: PayloadRoom,
        lease: Lease,
    ) -> StoreResult<Claimed> {
        let (due_column, state) = (kind.due_column(), kind.state());
        // A send claim whose rows might not all fit its room takes, of the
        // due rows in due order, those whose payloads' running total fits.
        let sized = kind == ClaimKind::Sends && !room.fits_any(limit);
        let due_rows = format!(
            "SELECT id, {due_column} AS due, payload_bytes FROM messages \
             WHERE {due_column} <= {NOW_MS} AND {state} ORDER BY {due_column}, id LIMIT ?"
        );
        let taken = if sized {
            format!(
                "SELECT id FROM (SELECT id, SUM(COALESCE(payload_bytes, ?)) \
                 OVER (ORDER BY due, id) AS upto FROM ({due_rows})) WHERE upto <= ?"
            )
        } else {
            due_rows
        };
        let sql = format!(
            "UPDATE messages SET {due_column} = {NOW_MS} + {span}, version = version + 1 \
             WHERE id IN (SELECT id FROM ({taken})) \
             RETURNING {columns}, {NOW_MS} AS claimed_at",
            span = lease_span_sql(lease),
            columns = kind.columns(),
        );
        let q = sqlx::query(sqlx::AssertSqlSafe(sql));
        let q = match lease {
            Lease::Every(d) => q.bind(millis(d)),
            Lease::Verify(v) => q
                .bind(millis(v.margin))
                .bind(millis(v.max_timeout))
                .bind(millis(v.max_timeout)),
        };
        let as_int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let rows = if sized {
            q.bind(as_int(room.unknown))
                .bind(i64::from(limit))
                .bind(as_int(room.bytes))
        } else {
            q.bind(i64::from(limit))
        }
        .fetch_all(&self.pool)
        .await?;
        // Short of the limit with due rows left: what is left did not fit.
        let out_of_room = sized
            && rows.len() < limit as usize
            && sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!(
                "SELECT EXISTS (SELECT 1 FROM messages WHERE {due_column} <= {NOW_MS} AND {state})"
            )))
            .fetch_one(&self.pool)
            .await?
                != 0;
        // 'now' is one instant for the whole statement.
        let claimed_at = rows.first().map(|r| r.time("claimed_at")).transpose()?;
        let sql::Decoded {
            mut messages,
            mut unreadable,
            apart,
        } = sql::decode_claimed(rows)?;
        // The rows are claimed (no other claimer takes them) and their
        // content never changes: it is read after the claim's UPDATE.
        unreadable.extend(sql::fill_apart(&self.pool, &mut messages, &apart).await?);
        // RETURNING comes in no defined order; MySQL returns id order.
        messages.sort_by_key(|m| m.id);
        unreadable.sort_by_key(|q| q.id);
        let quarantined = if unreadable.is_empty() {
            Vec::new()
        } else {
            match self.quarantine(kind, unreadable).await {
                Ok(done) => done,
                Err(e) => {
                    tracing::warn!(error = %e, "could not quarantine unreadable rows; they come back after the lease");
                    Vec::new()
                }
            }
        };
        Ok(Claimed {
            messages,
            quarantined,
            claimed_at,
            out_of_room,
        })
    }

    async fn quarantine(
        &self,
        kind: ClaimKind,
        rows: Vec<super::Quarantined>,
    ) -> StoreResult<Vec<super::Quarantined>> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let (done, raised) = sql::quarantine::<Sqlite>(&mut tx, kind, rows).await?;
        tx.commit().await?;
        raised.announce();
        Ok(done)
    }
}

/// A claim's span in ms as SQL over the claimed row, binding what
/// [`SqliteStore::claim_due`] binds: [`Lease::span`] in the statement itself,
/// so a check-back claim is as long as [`crate::store::VerifyLease::covering`]
/// says (the producer's timeout cut to the maximum, the maximum for a row
/// whose producer is not registered, plus the margin).
fn lease_span_sql(lease: Lease) -> &'static str {
    match lease {
        Lease::Every(_) => "?",
        Lease::Verify(_) => {
            "? + COALESCE((SELECT MIN(p.verify_timeout_ms, ?) FROM producers p \
             WHERE p.biz_id = messages.biz_id), ?)"
        }
    }
}

/// How an upsert of `flow_minutes` names the value proposed for column `c`.
fn proposed_flow_value(c: &str) -> String {
    format!("excluded.{c}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_memory_urls_are_recognised() {
        assert!(is_in_memory("sqlite::memory:"));
        assert!(is_in_memory("sqlite://:memory:"));
        assert!(is_in_memory("sqlite://x.db?mode=memory"));
        assert!(!is_in_memory("sqlite://x.db?mode=rwc"));
        assert!(!is_in_memory("sqlite:memory.db"));
    }
}
