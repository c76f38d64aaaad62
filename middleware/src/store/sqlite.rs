//! SQLite backend: the embedded store for `trustmsg dev` and single-instance use.
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
use sqlx::{Row, SqlitePool};
use trustmsg_verify_api::{MessageStatus, SendStatus};

use super::mysql::clip_error;
use super::{
    Actor, AuditEntry, Inserted, Message, NewMessage, Producer, ProducerRecord, SentMark, Store,
    StoreError, StoreResult, Transition,
};

/// The database clock as INTEGER ms since the epoch. `julianday('now')` holds
/// whole milliseconds, so rounding (not truncating) the float product gives the
/// exact value; 'now' is fixed for the whole statement, so every time a single
/// statement writes is the same instant.
const NOW_MS: &str = "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)";

const MESSAGE_COLUMNS: &str = "id, biz_id, message_key, topic, record_key, payload, headers, \
    content_digest, status, send_status, tombstone, version, verify_attempts, send_attempts, \
    last_error, next_verify_at, next_send_at, kafka_partition, kafka_offset, created_at, \
    updated_at, decided_at, sent_at";

const PRODUCER_COLUMNS: &str = "biz_id, verify_url, verify_timeout_ms, first_verify_after_ms, \
    max_verify_attempts, token_hash, signing_secret, created_at, updated_at";

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
    /// Opens (creating if missing) the database at `url`: `sqlite://path.db`,
    /// `sqlite://path.db?mode=rwc` or `sqlite::memory:`.
    pub async fn connect(url: &str) -> StoreResult<Self> {
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

    /// Wraps an existing pool (tests).
    pub fn from_pool(pool: SqlitePool) -> Self {
        Self { pool }
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

fn time(row: &SqliteRow, col: &str) -> StoreResult<DateTime<Utc>> {
    let ms: i64 = row.try_get(col)?;
    DateTime::from_timestamp_millis(ms)
        .ok_or_else(|| StoreError::Corrupt(format!("{col} = {ms} is not a time")))
}

fn opt_time(row: &SqliteRow, col: &str) -> StoreResult<Option<DateTime<Utc>>> {
    let ms: Option<i64> = row.try_get(col)?;
    ms.map(|ms| {
        DateTime::from_timestamp_millis(ms)
            .ok_or_else(|| StoreError::Corrupt(format!("{col} = {ms} is not a time")))
    })
    .transpose()
}

fn unsigned<T: TryFrom<i64>>(row: &SqliteRow, col: &str) -> StoreResult<T> {
    let v: i64 = row.try_get(col)?;
    T::try_from(v).map_err(|_| StoreError::Corrupt(format!("{col} = {v} is out of range")))
}

fn message_from_row(row: &SqliteRow) -> StoreResult<Message> {
    let status: String = row.try_get("status")?;
    let send_status: Option<String> = row.try_get("send_status")?;
    let headers: String = row.try_get("headers")?;
    Ok(Message {
        id: unsigned(row, "id")?,
        biz_id: row.try_get("biz_id")?,
        message_key: row.try_get("message_key")?,
        topic: row.try_get("topic")?,
        key: row.try_get("record_key")?,
        payload: row.try_get("payload")?,
        headers: serde_json::from_str(&headers)
            .map_err(|e| StoreError::Corrupt(format!("headers: {e}")))?,
        content_digest: row.try_get("content_digest")?,
        status: MessageStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("status {status:?}")))?,
        send_status: send_status
            .map(|s| {
                SendStatus::parse(&s)
                    .ok_or_else(|| StoreError::Corrupt(format!("send_status {s:?}")))
            })
            .transpose()?,
        tombstone: row.try_get("tombstone")?,
        version: unsigned(row, "version")?,
        verify_attempts: unsigned(row, "verify_attempts")?,
        send_attempts: unsigned(row, "send_attempts")?,
        last_error: row.try_get("last_error")?,
        next_verify_at: opt_time(row, "next_verify_at")?,
        next_send_at: opt_time(row, "next_send_at")?,
        kafka_partition: row.try_get("kafka_partition")?,
        kafka_offset: row.try_get("kafka_offset")?,
        created_at: time(row, "created_at")?,
        updated_at: time(row, "updated_at")?,
        decided_at: opt_time(row, "decided_at")?,
        sent_at: opt_time(row, "sent_at")?,
    })
}

fn producer_from_row(row: &SqliteRow) -> StoreResult<Producer> {
    Ok(Producer {
        biz_id: row.try_get("biz_id")?,
        verify_url: row.try_get("verify_url")?,
        verify_timeout_ms: unsigned(row, "verify_timeout_ms")?,
        first_verify_after_ms: unsigned(row, "first_verify_after_ms")?,
        max_verify_attempts: unsigned(row, "max_verify_attempts")?,
        token_hash: row.try_get("token_hash")?,
        signing_secret: row.try_get("signing_secret")?,
        created_at: time(row, "created_at")?,
        updated_at: time(row, "updated_at")?,
    })
}

/// The first row of a RETURNING statement. The whole statement runs to completion
/// (`fetch_all`), so it never stays half-stepped holding the write lock.
fn first_message(rows: &[SqliteRow]) -> StoreResult<Option<Message>> {
    rows.first().map(message_from_row).transpose()
}

#[allow(clippy::too_many_arguments)]
async fn insert_audit(
    conn: &mut sqlx::SqliteConnection,
    message_id: u64,
    actor: &Actor,
    action: &str,
    from: Option<&str>,
    to: Option<&str>,
    from_send: Option<&str>,
    to_send: Option<&str>,
    reason: &str,
) -> StoreResult<()> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO audit_log (message_id, actor, action, from_status, to_status, \
         from_send_status, to_send_status, reason, created_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, {NOW_MS})"
    )))
    .bind(sql_int(message_id))
    .bind(actor.to_string())
    .bind(action)
    .bind(from)
    .bind(to)
    .bind(from_send)
    .bind(to_send)
    .bind(clip_error(reason))
    .execute(conn)
    .await?;
    Ok(())
}

#[async_trait]
impl Store for SqliteStore {
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
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn insert_prepared(&self, m: &NewMessage) -> StoreResult<Inserted> {
        let headers = serde_json::to_string(&m.headers).expect("string map serialises");
        // DO NOTHING only swallows the (biz_id, message_key) conflict; any other
        // constraint still fails the call.
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO messages (biz_id, message_key, topic, record_key, payload, headers, \
             content_digest, status, next_verify_at, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, 'PREPARED', {NOW_MS} + ?, {NOW_MS}, {NOW_MS}) \
             ON CONFLICT (biz_id, message_key) DO NOTHING RETURNING {MESSAGE_COLUMNS}"
        )))
        .bind(&m.biz_id)
        .bind(&m.message_key)
        .bind(&m.topic)
        .bind(&m.key)
        .bind(&m.payload)
        .bind(headers)
        .bind(m.digest())
        .bind(millis(m.first_verify_after))
        .fetch_all(&self.pool)
        .await?;
        if let Some(created) = first_message(&rows)? {
            return Ok(Inserted::Created(created));
        }
        let row = self
            .find_message(&m.biz_id, &m.message_key)
            .await?
            .ok_or_else(|| StoreError::Corrupt("duplicate key but no row".into()))?;
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
            return Ok(None);
        };
        insert_audit(
            &mut tx,
            row.id,
            actor,
            "rollback",
            None,
            Some("ROLLED_BACK"),
            None,
            None,
            reason,
        )
        .await?;
        tx.commit().await?;
        Ok(Some(row))
    }

    async fn find_message(&self, biz_id: &str, message_key: &str) -> StoreResult<Option<Message>> {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE biz_id = ? AND message_key = ?"
        )))
        .bind(biz_id)
        .bind(message_key)
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(message_from_row)
        .transpose()
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
        let (send_status, action) = match t.to {
            MessageStatus::Committed => (Some("PENDING"), "commit"),
            MessageStatus::RolledBack => (None, "rollback"),
            MessageStatus::VerifyFailed => (None, "verify_failed"),
            MessageStatus::Prepared => (None, "reverify"),
        };
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE messages SET status = ?1, send_status = ?2, version = version + 1, \
             verify_attempts = CASE WHEN ?1 = 'PREPARED' THEN 0 ELSE verify_attempts + ?3 END, \
             last_error = COALESCE(?4, last_error), \
             next_verify_at = CASE WHEN ?1 = 'PREPARED' THEN {NOW_MS} END, \
             next_send_at = CASE WHEN ?1 = 'COMMITTED' THEN {NOW_MS} + ?5 END, \
             decided_at = CASE WHEN ?1 IN ('COMMITTED', 'ROLLED_BACK', 'VERIFY_FAILED') \
                 THEN {NOW_MS} ELSE decided_at END, \
             updated_at = {NOW_MS} \
             WHERE id = ?6 AND status = ?7 AND version = ?8 RETURNING {MESSAGE_COLUMNS}"
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
        let Some(row) = first_message(&rows)? else {
            return Ok(None);
        };
        insert_audit(
            &mut tx,
            t.id,
            &t.actor,
            action,
            Some(t.from.as_str()),
            Some(t.to.as_str()),
            None,
            send_status,
            &t.reason,
        )
        .await?;
        tx.commit().await?;
        Ok(Some(row))
    }

    async fn audit_trail(&self, message_id: u64) -> StoreResult<Vec<AuditEntry>> {
        let rows = sqlx::query(
            "SELECT id, message_id, actor, action, from_status, to_status, from_send_status, \
             to_send_status, reason, created_at FROM audit_log WHERE message_id = ? ORDER BY id",
        )
        .bind(sql_int(message_id))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(AuditEntry {
                    id: unsigned(r, "id")?,
                    message_id: unsigned(r, "message_id")?,
                    actor: r.try_get("actor")?,
                    action: r.try_get("action")?,
                    from_status: r.try_get("from_status")?,
                    to_status: r.try_get("to_status")?,
                    from_send_status: r.try_get("from_send_status")?,
                    to_send_status: r.try_get("to_send_status")?,
                    reason: r.try_get("reason")?,
                    created_at: time(r, "created_at")?,
                })
            })
            .collect()
    }

    async fn claim_due_sends(&self, limit: u32, lease: Duration) -> StoreResult<Vec<Message>> {
        self.claim_due(
            "next_send_at",
            "status = 'COMMITTED' AND send_status = 'PENDING'",
            limit,
            lease,
        )
        .await
    }

    async fn mark_sent(&self, marks: &[SentMark]) -> StoreResult<u64> {
        if marks.is_empty() {
            return Ok(0);
        }
        // One transaction for the batch: one fsync, and the write lock is taken once.
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let mut matched = 0;
        for m in marks {
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
        let done = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE messages SET send_attempts = send_attempts + 1, last_error = ?, \
             next_send_at = {NOW_MS} + ?, version = version + 1, updated_at = {NOW_MS} \
             WHERE id = ? AND version = ? AND status = 'COMMITTED' AND send_status = 'PENDING'"
        )))
        .bind(clip_error(error))
        .bind(millis(delay))
        .bind(sql_int(id))
        .bind(sql_int(version))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn mark_send_failed(
        &self,
        id: u64,
        version: u64,
        error: &str,
        actor: &Actor,
    ) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE messages SET send_status = 'SEND_FAILED', send_attempts = send_attempts + 1, \
             last_error = ?, next_send_at = NULL, version = version + 1, updated_at = {NOW_MS} \
             WHERE id = ? AND version = ? AND status = 'COMMITTED' AND send_status = 'PENDING' \
             RETURNING {MESSAGE_COLUMNS}"
        )))
        .bind(clip_error(error))
        .bind(sql_int(id))
        .bind(sql_int(version))
        .fetch_all(&mut *tx)
        .await?;
        let Some(row) = first_message(&rows)? else {
            return Ok(None);
        };
        insert_audit(
            &mut tx,
            id,
            actor,
            "send_failed",
            Some("COMMITTED"),
            Some("COMMITTED"),
            Some("PENDING"),
            Some("SEND_FAILED"),
            error,
        )
        .await?;
        tx.commit().await?;
        Ok(Some(row))
    }

    async fn claim_due_verifies(&self, limit: u32, lease: Duration) -> StoreResult<Vec<Message>> {
        self.claim_due("next_verify_at", "status = 'PREPARED'", limit, lease)
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

    async fn release_verify(&self, id: u64, version: u64, delay: Duration) -> StoreResult<bool> {
        let done = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE messages SET next_verify_at = {NOW_MS} + ?, version = version + 1 \
             WHERE id = ? AND version = ? AND status = 'PREPARED'"
        )))
        .bind(millis(delay))
        .bind(sql_int(id))
        .bind(sql_int(version))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn upsert_producer(&self, p: &ProducerRecord) -> StoreResult<Producer> {
        // Like MySQL: an update keeps the token and the signing secret, which have
        // their own operations.
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO producers (biz_id, verify_url, verify_timeout_ms, first_verify_after_ms, \
             max_verify_attempts, token_hash, signing_secret, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, {NOW_MS}, {NOW_MS}) \
             ON CONFLICT (biz_id) DO UPDATE SET verify_url = excluded.verify_url, \
             verify_timeout_ms = excluded.verify_timeout_ms, \
             first_verify_after_ms = excluded.first_verify_after_ms, \
             max_verify_attempts = excluded.max_verify_attempts, updated_at = {NOW_MS} \
             RETURNING {PRODUCER_COLUMNS}"
        )))
        .bind(&p.biz_id)
        .bind(&p.verify_url)
        .bind(p.verify_timeout_ms)
        .bind(p.first_verify_after_ms)
        .bind(p.max_verify_attempts)
        .bind(&p.token_hash)
        .bind(&p.signing_secret)
        .fetch_one(&self.pool)
        .await?;
        producer_from_row(&row)
    }

    async fn find_producer(&self, biz_id: &str) -> StoreResult<Option<Producer>> {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {PRODUCER_COLUMNS} FROM producers WHERE biz_id = ?"
        )))
        .bind(biz_id)
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(producer_from_row)
        .transpose()
    }

    async fn delete_producer(&self, biz_id: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM producers WHERE biz_id = ?")
            .bind(biz_id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn set_producer_token(&self, biz_id: &str, token_hash: &[u8]) -> StoreResult<bool> {
        let done = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE producers SET token_hash = ?, updated_at = {NOW_MS} WHERE biz_id = ?"
        )))
        .bind(token_hash)
        .bind(biz_id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

impl SqliteStore {
    /// Selects the due ids and pushes their due column out by the lease in one
    /// statement: SQLite runs it under the database's single write lock, which is
    /// what SKIP LOCKED plus row locks give on MySQL.
    async fn claim_due(
        &self,
        due_column: &str,
        state: &str,
        limit: u32,
        lease: Duration,
    ) -> StoreResult<Vec<Message>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE messages SET {due_column} = {NOW_MS} + ?1, version = version + 1 \
             WHERE id IN (SELECT id FROM messages WHERE {due_column} <= {NOW_MS} AND {state} \
             ORDER BY {due_column} LIMIT ?2) \
             RETURNING {MESSAGE_COLUMNS}"
        )))
        .bind(millis(lease))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        let mut claimed = rows
            .iter()
            .map(message_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        // RETURNING comes in no defined order; MySQL returns id order.
        claimed.sort_by_key(|m| m.id);
        Ok(claimed)
    }
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
