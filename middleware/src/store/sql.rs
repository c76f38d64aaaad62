//! The core both SQL backends share, so that what a row holds, what a
//! transition sets and what the audit log records are each written once.
//!
//! Everything here is dialect-free: the column lists, the effects of each
//! transition, the audit row of each kind of change, error clipping, row
//! decoding, and the statements whose SQL is the same on MySQL and SQLite.
//! Where the dialects differ, a backend says so through two small traits:
//! [`SqlRow`] (how a column is read: MySQL text columns are binary and read as
//! bytes checked as UTF-8, times are `DATETIME(3)` and counters unsigned;
//! SQLite times are INTEGER milliseconds and every integer is an i64) and
//! [`Dialect`] (the clock expression, how an id is bound, how many rows a
//! write matched). Everything else that is a dialect (SQL text, locking,
//! due-time arithmetic) stays in the backend's own file.

use chrono::{DateTime, Utc};
use sqlx::{Database, Encode, Executor, IntoArguments, QueryBuilder, Type};
use trustmsg_verify_api::{MessageStatus, SendStatus};

use super::{
    Actor, AuditEntry, Backlog, CheckAttempt, CheckAttemptEntry, Message, MessageFilter,
    NewMessage, Overdue, Producer, ProducerRecord, ProducerSummary, Quarantined, StoreError,
    StoreResult, Transition, Wait, CHECK_ATTEMPTS_KEPT,
};
use trustmsg_verify_api::MessageView;

/// The columns [`message_from_row`] reads, in table order.
pub(super) const MESSAGE_COLUMNS: &str = "id, biz_id, message_key, topic, record_key, payload, \
    headers, content_digest, status, send_status, tombstone, version, verify_attempts, \
    send_attempts, last_error, next_verify_at, next_send_at, kafka_partition, kafka_offset, \
    created_at, updated_at, decided_at, sent_at";

/// The columns a prepare writes; [`bind_prepare`] binds the first seven.
pub(super) const PREPARE_COLUMNS: &str = "biz_id, message_key, topic, record_key, payload, \
    headers, content_digest, status, next_verify_at, created_at, updated_at";

/// The columns [`producer_from_row`] reads, in table order; [`bind_producer`]
/// binds all but the two times.
pub(super) const PRODUCER_COLUMNS: &str = "biz_id, verify_url, verify_timeout_ms, \
    first_verify_after_ms, max_verify_attempts, token_hash, signing_secret, created_at, updated_at";

/// The columns an [`AuditRow`] writes (the last, `created_at`, is the clock).
const AUDIT_COLUMNS: &str = "message_id, actor, action, from_status, to_status, \
    from_send_status, to_send_status, reason, created_at";

/// A value both backends can bind.
pub(super) trait Bind<D: Database>: for<'q> Encode<'q, D> + Type<D> + Send {}

impl<D: Database, T: for<'q> Encode<'q, D> + Type<D> + Send> Bind<D> for T {}

/// What a shared statement needs to know about its backend's dialect.
pub(super) trait Dialect: Database<Row: SqlRow, Arguments: IntoArguments<Self>> {
    /// The database clock as an SQL expression of the type times are stored as.
    const NOW: &'static str;
    /// How an id or version is bound.
    type Int: Bind<Self>;
    /// `v` as this dialect binds it.
    fn int(v: u64) -> Self::Int;
    /// How many rows a write matched.
    fn rows_affected(done: &Self::QueryResult) -> u64;
    /// Appended to [`Dialect::NOW`]: the time one bound span ago.
    const MINUS_SPAN: &'static str;
    /// `d` as [`Dialect::MINUS_SPAN`] binds it.
    fn span(d: std::time::Duration) -> i64;
    /// How a time is bound, compared with stored times.
    type Time: Bind<Self>;
    /// `t` as this dialect binds it.
    fn time(t: DateTime<Utc>) -> Self::Time;
}

/// A statement with its arguments, as [`sqlx::query`] makes it.
pub(super) type Query<'q, D> = sqlx::query::Query<'q, D, <D as Database>::Arguments>;

/// How one backend reads a column: each backend implements the five nullable
/// reads, the rest is written once on top of them. A NULL where the schema
/// forbids one, or a value out of its type's range, is [`StoreError::Corrupt`].
pub(super) trait SqlRow {
    /// A nullable text column, checked as UTF-8.
    fn opt_text(&self, col: &str) -> StoreResult<Option<String>>;
    /// A nullable binary column.
    fn opt_bytes(&self, col: &str) -> StoreResult<Option<Vec<u8>>>;
    /// A nullable unsigned integer column (ids, versions, counters).
    fn opt_u64(&self, col: &str) -> StoreResult<Option<u64>>;
    /// A nullable signed integer column.
    fn opt_i64(&self, col: &str) -> StoreResult<Option<i64>>;
    /// A nullable time column (UTC, millisecond precision).
    fn opt_time(&self, col: &str) -> StoreResult<Option<DateTime<Utc>>>;

    /// A boolean column that is never NULL (both dialects store 0 or 1).
    fn flag(&self, col: &str) -> StoreResult<bool> {
        Ok(not_null(col, self.opt_i64(col)?)? != 0)
    }

    /// A text column that is never NULL.
    fn text(&self, col: &str) -> StoreResult<String> {
        not_null(col, self.opt_text(col)?)
    }

    /// A binary column that is never NULL.
    fn bytes(&self, col: &str) -> StoreResult<Vec<u8>> {
        not_null(col, self.opt_bytes(col)?)
    }

    /// An unsigned integer column that is never NULL, as `T`.
    fn unsigned<T: TryFrom<u64>>(&self, col: &str) -> StoreResult<T> {
        let v = not_null(col, self.opt_u64(col)?)?;
        T::try_from(v).map_err(|_| StoreError::Corrupt(format!("{col} = {v} is out of range")))
    }

    /// A nullable 32-bit signed integer column.
    fn opt_i32(&self, col: &str) -> StoreResult<Option<i32>> {
        self.opt_i64(col)?
            .map(|v| {
                i32::try_from(v)
                    .map_err(|_| StoreError::Corrupt(format!("{col} = {v} is out of range")))
            })
            .transpose()
    }

    /// A time column that is never NULL.
    fn time(&self, col: &str) -> StoreResult<DateTime<Utc>> {
        not_null(col, self.opt_time(col)?)
    }
}

/// A failed column read. A value its type cannot hold (a date out of range, a
/// number too big) is this row's fault, [`StoreError::Corrupt`], like any
/// other unreadable value; anything else (no such column) is the database's
/// or the code's, and fails the whole statement.
pub(super) fn column_error(col: &str, e: sqlx::Error) -> StoreError {
    match e {
        sqlx::Error::ColumnDecode { source, .. } => StoreError::Corrupt(format!("{col}: {source}")),
        e => StoreError::Db(e),
    }
}

fn not_null<T>(col: &str, v: Option<T>) -> StoreResult<T> {
    v.ok_or_else(|| StoreError::Corrupt(format!("{col} is NULL")))
}

/// Decodes a row selected with [`MESSAGE_COLUMNS`].
pub(super) fn message_from_row(row: &impl SqlRow) -> StoreResult<Message> {
    let status = row.text("status")?;
    let headers = row.text("headers")?;
    Ok(Message {
        id: row.unsigned("id")?,
        biz_id: row.text("biz_id")?,
        message_key: row.text("message_key")?,
        topic: row.opt_text("topic")?,
        key: row.opt_text("record_key")?,
        payload: row.bytes("payload")?,
        headers: serde_json::from_str(&headers)
            .map_err(|e| StoreError::Corrupt(format!("headers: {e}")))?,
        content_digest: row.opt_bytes("content_digest")?,
        status: MessageStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("status {status:?}")))?,
        send_status: row
            .opt_text("send_status")?
            .map(|s| {
                SendStatus::parse(&s)
                    .ok_or_else(|| StoreError::Corrupt(format!("send_status {s:?}")))
            })
            .transpose()?,
        tombstone: row.flag("tombstone")?,
        version: row.unsigned("version")?,
        verify_attempts: row.unsigned("verify_attempts")?,
        send_attempts: row.unsigned("send_attempts")?,
        last_error: row.opt_text("last_error")?,
        next_verify_at: row.opt_time("next_verify_at")?,
        next_send_at: row.opt_time("next_send_at")?,
        kafka_partition: row.opt_i32("kafka_partition")?,
        kafka_offset: row.opt_i64("kafka_offset")?,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
        decided_at: row.opt_time("decided_at")?,
        sent_at: row.opt_time("sent_at")?,
    })
}

/// Which due rows a claim takes; it says what a quarantine of one of them
/// writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ClaimKind {
    /// COMMITTED + PENDING rows, due by `next_send_at` (the forwarder).
    Sends,
    /// PREPARED rows, due by `next_verify_at` (the verifier).
    Verifies,
}

impl ClaimKind {
    /// The column that makes a row due.
    pub(super) fn due_column(self) -> &'static str {
        match self {
            Self::Sends => "next_send_at",
            Self::Verifies => "next_verify_at",
        }
    }

    /// The state a row must be in to be taken, as SQL.
    pub(super) fn state(self) -> &'static str {
        match self {
            Self::Sends => "status = 'COMMITTED' AND send_status = 'PENDING'",
            Self::Verifies => "status = 'PREPARED'",
        }
    }
}

/// What `last_error` of a quarantined row starts with.
pub(super) const QUARANTINED: &str = "quarantined: ";

/// Decodes claimed rows one by one. A row that is [`StoreError::Corrupt`] is
/// returned apart, with what can still be read of it (its id must be
/// readable: without it the row cannot even be set aside, and the claim
/// fails); any other error fails the claim.
pub(super) fn decode_claimed<R: SqlRow>(
    rows: &[R],
) -> StoreResult<(Vec<Message>, Vec<Quarantined>)> {
    let mut good = Vec::with_capacity(rows.len());
    let mut bad = Vec::new();
    for row in rows {
        match message_from_row(row) {
            Ok(m) => good.push(m),
            Err(e @ StoreError::Corrupt(_)) => bad.push(Quarantined {
                id: row.unsigned("id")?,
                biz_id: lossy_text(row, "biz_id"),
                message_key: lossy_text(row, "message_key"),
                reason: clip_error(&format!("{QUARANTINED}{e}")).to_string(),
            }),
            Err(e) => return Err(e),
        }
    }
    Ok((good, bad))
}

/// A text column of a row that is unreadable anyway: whatever can be shown.
fn lossy_text(row: &impl SqlRow, col: &str) -> String {
    match row.opt_bytes(col) {
        Ok(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
        _ => row.opt_text(col).ok().flatten().unwrap_or_default(),
    }
}

/// Sets aside claimed rows the claim could not read: their due column
/// becomes NULL (so no scan takes them again), `last_error` the reason,
/// `version` is bumped, and an audit row records it. Each UPDATE is guarded
/// by the claim's state, so a row that changed meanwhile is left alone.
/// Returns the rows quarantined by this call.
pub(super) async fn quarantine<D>(
    conn: &mut D::Connection,
    kind: ClaimKind,
    rows: Vec<Quarantined>,
) -> StoreResult<Vec<Quarantined>>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    String: Bind<D>,
    &'static str: Bind<D>,
    Option<&'static str>: Bind<D>,
{
    let mut done = Vec::with_capacity(rows.len());
    for q in rows {
        let matched = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE messages SET {due} = NULL, last_error = ?, version = version + 1,              updated_at = {now} WHERE id = ? AND {state}",
            due = kind.due_column(),
            now = D::NOW,
            state = kind.state(),
        )))
        .bind(q.reason.clone())
        .bind(D::int(q.id))
        .execute(&mut *conn)
        .await?;
        if D::rows_affected(&matched) == 1 {
            done.push(q);
        }
    }
    let audits: Vec<AuditRow> = done
        .iter()
        .map(|q| AuditRow::quarantine(q.id, kind, &q.reason))
        .collect();
    insert_audits(&mut *conn, &audits).await?;
    Ok(done)
}

/// [`super::Store::flag_overdue`]: reads the candidates, then flags each with
/// an UPDATE guarded by the flag and the state, so of several instances
/// scanning at once exactly one flags (and alerts) each message. A
/// quarantined row (its due column NULL) has had its alert already.
pub(super) async fn flag_overdue<D>(
    pool: &sqlx::Pool<D>,
    wait: Wait,
    older_than: std::time::Duration,
    limit: u32,
) -> StoreResult<Vec<Overdue>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    i64: Bind<D>,
{
    let (kind, since, attempts) = match wait {
        Wait::Send => (ClaimKind::Sends, "decided_at", "send_attempts"),
        Wait::Decision => (ClaimKind::Verifies, "created_at", "verify_attempts"),
    };
    let state = kind.state();
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT id, biz_id, message_key, {attempts} AS attempts, {since} AS since, last_error \
         FROM messages WHERE {state} AND {due} IS NOT NULL AND overdue_alerted = 0 \
         AND {since} < {now}{minus} ORDER BY id LIMIT ?",
        due = kind.due_column(),
        now = D::NOW,
        minus = D::MINUS_SPAN,
    )))
    .bind(D::span(older_than))
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    let mut flagged = Vec::new();
    for row in &rows {
        let id = row.unsigned("id")?;
        let done = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE messages SET overdue_alerted = 1 \
             WHERE id = ? AND overdue_alerted = 0 AND {state}"
        )))
        .bind(D::int(id))
        .execute(pool)
        .await?;
        if D::rows_affected(&done) == 1 {
            // Read leniently: an alert about a row that is partly unreadable
            // still names it.
            flagged.push(Overdue {
                id,
                biz_id: lossy_text(row, "biz_id"),
                message_key: lossy_text(row, "message_key"),
                attempts: row.unsigned("attempts").unwrap_or(0),
                since: row.opt_time("since").ok().flatten(),
                last_error: row.opt_text("last_error").ok().flatten(),
            });
        }
    }
    Ok(flagged)
}

/// [`super::Store::list_messages`]: the filter's conditions, a keyset bound
/// and `ORDER BY id DESC`, reading an empty payload and its length instead
/// of the payload itself.
pub(super) async fn list_messages<D>(
    pool: &sqlx::Pool<D>,
    f: &MessageFilter,
    limit: u32,
    before: Option<u64>,
) -> StoreResult<Vec<MessageView>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    String: Bind<D>,
    &'static str: Bind<D>,
    i64: Bind<D>,
{
    let columns = MESSAGE_COLUMNS.replace("payload,", "X'' AS payload,");
    let mut q = QueryBuilder::<D>::new(format!(
        "SELECT {columns}, LENGTH(payload) AS payload_size FROM messages WHERE 1 = 1"
    ));
    if let Some(s) = f.status {
        q.push(" AND status = ").push_bind(s.as_str());
    }
    if let Some(s) = f.send_status {
        q.push(" AND send_status = ").push_bind(s.as_str());
    }
    if let Some(b) = &f.biz_id {
        q.push(" AND biz_id = ").push_bind(b.clone());
    }
    if let Some(t) = &f.topic {
        q.push(" AND topic = ").push_bind(t.clone());
    }
    if let Some(t) = f.created_after {
        q.push(" AND created_at >= ").push_bind(D::time(t));
    }
    if let Some(t) = f.created_before {
        q.push(" AND created_at < ").push_bind(D::time(t));
    }
    if let Some(id) = before {
        q.push(" AND id < ").push_bind(D::int(id));
    }
    q.push(" ORDER BY id DESC LIMIT ")
        .push_bind(i64::from(limit));
    q.build()
        .fetch_all(pool)
        .await?
        .iter()
        .map(|row| {
            let mut view = message_from_row(row)?.view();
            let size = row.opt_i64("payload_size")?.unwrap_or(0);
            view.payload_size = u64::try_from(size).unwrap_or(0);
            Ok(view)
        })
        .collect()
}

/// [`super::Store::summary`]: one grouped scan.
pub(super) async fn summary<D>(pool: &sqlx::Pool<D>) -> StoreResult<Vec<ProducerSummary>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    let rows = sqlx::query(
        "SELECT biz_id, status, send_status, COUNT(*) AS n, MIN(created_at) AS oldest_created, \
         MIN(decided_at) AS oldest_decided FROM messages GROUP BY biz_id, status, send_status",
    )
    .fetch_all(pool)
    .await?;
    let older = |a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>| match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let mut by_biz: std::collections::BTreeMap<String, ProducerSummary> = Default::default();
    for row in &rows {
        let biz_id = row.text("biz_id")?;
        let status = row.text("status")?;
        let send = row.opt_text("send_status")?;
        let n = u64::try_from(row.opt_i64("n")?.unwrap_or(0)).unwrap_or(0);
        let s = by_biz
            .entry(biz_id.clone())
            .or_insert_with(|| ProducerSummary {
                biz_id,
                ..Default::default()
            });
        *s.by_status.entry(status.clone()).or_default() += n;
        if let Some(send) = &send {
            *s.by_send_status.entry(send.clone()).or_default() += n;
        }
        if status == "PREPARED" {
            s.oldest_prepared_at = older(s.oldest_prepared_at, row.opt_time("oldest_created")?);
        }
        if status == "COMMITTED" && send.as_deref() == Some("PENDING") {
            s.oldest_pending_send_at =
                older(s.oldest_pending_send_at, row.opt_time("oldest_decided")?);
        }
    }
    Ok(by_biz.into_values().collect())
}

/// [`super::Store::record_check_attempts`]: one multi-row INSERT, and for
/// the calls past the bound one DELETE of their messages' oldest.
pub(super) async fn record_check_attempts<D>(
    pool: &sqlx::Pool<D>,
    calls: &[CheckAttempt],
) -> StoreResult<()>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    i64: Bind<D>,
    Option<i64>: Bind<D>,
    &'static str: Bind<D>,
    Option<String>: Bind<D>,
{
    if calls.is_empty() {
        return Ok(());
    }
    let mut q = QueryBuilder::<D>::new(
        "INSERT INTO check_attempts (message_id, attempt, at, duration_ms, http_status, outcome, error) ",
    );
    q.push_values(calls, |mut b, a| {
        b.push_bind(D::int(a.message_id))
            .push_bind(i64::from(a.attempt))
            .push(D::NOW)
            .push_bind(i64::from(a.duration_ms))
            .push_bind(a.http_status.map(i64::from))
            .push_bind(a.outcome)
            .push_bind(a.error.as_deref().map(|e| clip_to(e, 500).to_string()));
    });
    q.build().execute(pool).await?;
    let old: Vec<&CheckAttempt> = calls
        .iter()
        .filter(|a| a.attempt > CHECK_ATTEMPTS_KEPT)
        .collect();
    if !old.is_empty() {
        let mut q = QueryBuilder::<D>::new("DELETE FROM check_attempts WHERE ");
        let mut sep = q.separated(" OR ");
        for a in old {
            sep.push("(message_id = ")
                .push_bind_unseparated(D::int(a.message_id))
                .push_unseparated(" AND attempt <= ")
                .push_bind_unseparated(i64::from(a.attempt - CHECK_ATTEMPTS_KEPT))
                .push_unseparated(")");
        }
        q.build().execute(pool).await?;
    }
    Ok(())
}

/// [`super::Store::check_attempts`].
pub(super) async fn check_attempts<D>(
    pool: &sqlx::Pool<D>,
    message_id: u64,
) -> StoreResult<Vec<CheckAttemptEntry>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    sqlx::query(
        "SELECT attempt, at, duration_ms, http_status, outcome, error FROM check_attempts \
         WHERE message_id = ? ORDER BY id",
    )
    .bind(D::int(message_id))
    .fetch_all(pool)
    .await?
    .iter()
    .map(|row| {
        Ok(CheckAttemptEntry {
            attempt: row.unsigned("attempt")?,
            at: row.time("at")?,
            duration_ms: row.unsigned("duration_ms")?,
            http_status: row
                .opt_i64("http_status")?
                .and_then(|s| u16::try_from(s).ok()),
            outcome: row.text("outcome")?,
            error: row.opt_text("error")?,
        })
    })
    .collect()
}

/// What retention may delete, as SQL: finished rows only.
const FINISHED: &str =
    "((status = 'COMMITTED' AND send_status = 'SENT') OR status = 'ROLLED_BACK')";

/// [`super::Store::purge_finished`], given a transaction on the backend.
pub(super) async fn purge_finished<D>(
    conn: &mut D::Connection,
    older_than: std::time::Duration,
    limit: u32,
) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
{
    let ids: Vec<u64> = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT id FROM messages WHERE {FINISHED} AND updated_at < {}{} ORDER BY id LIMIT ?",
        D::NOW,
        D::MINUS_SPAN
    )))
    .bind(D::span(older_than))
    .bind(i64::from(limit))
    .fetch_all(&mut *conn)
    .await?
    .iter()
    .map(|row| row.unsigned("id"))
    .collect::<StoreResult<_>>()?;
    if ids.is_empty() {
        return Ok(0);
    }
    let list = ids
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    for table in ["audit_log", "check_attempts"] {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM {table} WHERE message_id IN ({list})"
        )))
        .execute(&mut *conn)
        .await?;
    }
    let done = sqlx::query(sqlx::AssertSqlSafe(format!(
        "DELETE FROM messages WHERE id IN ({list}) AND {FINISHED}"
    )))
    .execute(&mut *conn)
    .await?;
    Ok(D::rows_affected(&done))
}

/// [`super::Store::backlog`].
pub(super) async fn backlog<D>(pool: &sqlx::Pool<D>) -> StoreResult<Backlog>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT status, send_status, COUNT(*) AS n, MIN(created_at) AS oldest_created, \
         MIN(decided_at) AS oldest_decided, {} AS now FROM messages \
         WHERE status IN ('PREPARED', 'VERIFY_FAILED') \
         OR (status = 'COMMITTED' AND send_status IN ('PENDING', 'SEND_FAILED')) \
         GROUP BY status, send_status",
        D::NOW
    )))
    .fetch_all(pool)
    .await?;
    let mut b = Backlog::default();
    for row in &rows {
        let status = row.text("status")?;
        let send = row.opt_text("send_status")?;
        let n = u64::try_from(row.opt_i64("n")?.unwrap_or(0)).unwrap_or(0);
        if status == "PREPARED" {
            b.oldest_prepared_at = row.opt_time("oldest_created")?;
        }
        if send.as_deref() == Some("PENDING") {
            b.oldest_pending_send_at = row.opt_time("oldest_decided")?;
        }
        b.counts.push((status, send, n));
    }
    b.at = match rows.first() {
        Some(row) => row.time("now")?,
        None => {
            let row = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {} AS now", D::NOW)))
                .fetch_one(pool)
                .await?;
            row.time("now")?
        }
    };
    Ok(b)
}

/// [`super::Store::list_producers`].
pub(super) async fn list_producers<D>(pool: &sqlx::Pool<D>) -> StoreResult<Vec<Producer>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {PRODUCER_COLUMNS} FROM producers ORDER BY biz_id"
    )))
    .fetch_all(pool)
    .await?
    .iter()
    .map(producer_from_row)
    .collect()
}

/// Decodes a row selected with [`PRODUCER_COLUMNS`].
pub(super) fn producer_from_row(row: &impl SqlRow) -> StoreResult<Producer> {
    Ok(Producer {
        biz_id: row.text("biz_id")?,
        verify_url: row.text("verify_url")?,
        verify_timeout_ms: row.unsigned("verify_timeout_ms")?,
        first_verify_after_ms: row.unsigned("first_verify_after_ms")?,
        max_verify_attempts: row.unsigned("max_verify_attempts")?,
        token_hash: row.bytes("token_hash")?,
        signing_secret: row.text("signing_secret")?,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
    })
}

fn audit_entry_from_row(row: &impl SqlRow) -> StoreResult<AuditEntry> {
    Ok(AuditEntry {
        id: row.unsigned("id")?,
        message_id: row.unsigned("message_id")?,
        actor: row.text("actor")?,
        action: row.text("action")?,
        from_status: row.opt_text("from_status")?,
        to_status: row.opt_text("to_status")?,
        from_send_status: row.opt_text("from_send_status")?,
        to_send_status: row.opt_text("to_send_status")?,
        reason: row.text("reason")?,
        created_at: row.time("created_at")?,
    })
}

/// What a transition to a status sets besides the status itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Effects {
    /// The send status the row gets: a commit starts the send, every other
    /// transition leaves the row with none.
    pub(super) send_status: Option<&'static str>,
    /// The audit action that names the transition.
    pub(super) action: &'static str,
}

/// The effects of a transition to `to`. Re-verify (to PREPARED) is what the
/// operator work will use; nothing calls it in this version yet.
pub(super) fn transition_effects(to: MessageStatus) -> Effects {
    let (send_status, action) = match to {
        MessageStatus::Committed => (Some(SendStatus::Pending.as_str()), "commit"),
        MessageStatus::RolledBack => (None, "rollback"),
        MessageStatus::VerifyFailed => (None, "verify_failed"),
        MessageStatus::Prepared => (None, "reverify"),
    };
    Effects {
        send_status,
        action,
    }
}

/// Kept under the column size, on a character boundary.
pub(super) fn clip_error(e: &str) -> &str {
    clip_to(e, 2000)
}

/// At most `max` bytes of `e`, cut on a character boundary.
fn clip_to(e: &str, max: usize) -> &str {
    if e.len() <= max {
        return e;
    }
    let mut end = max;
    while !e.is_char_boundary(end) {
        end -= 1;
    }
    &e[..end]
}

/// One `audit_log` row. Each kind of change has its constructor, so both
/// backends record the same event the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct AuditRow {
    message_id: u64,
    actor: String,
    action: &'static str,
    from_status: Option<&'static str>,
    to_status: Option<&'static str>,
    from_send_status: Option<&'static str>,
    to_send_status: Option<&'static str>,
    /// Clipped to the column size.
    reason: String,
}

impl AuditRow {
    /// A guarded status change (a decision, VERIFY_FAILED, re-verify).
    pub(super) fn transition(t: &Transition) -> Self {
        let effects = transition_effects(t.to);
        Self {
            message_id: t.id,
            actor: t.actor.to_string(),
            action: effects.action,
            from_status: Some(t.from.as_str()),
            to_status: Some(t.to.as_str()),
            from_send_status: None,
            to_send_status: effects.send_status,
            reason: clip_error(&t.reason).to_string(),
        }
    }

    /// The rollback of an unknown message, which created a tombstone: there
    /// was no state before it.
    pub(super) fn tombstone(message_id: u64, actor: &Actor, reason: &str) -> Self {
        Self {
            message_id,
            actor: actor.to_string(),
            action: transition_effects(MessageStatus::RolledBack).action,
            from_status: None,
            to_status: Some(MessageStatus::RolledBack.as_str()),
            from_send_status: None,
            to_send_status: None,
            reason: clip_error(reason).to_string(),
        }
    }

    /// A claimed row set aside because it could not be read: the state stays,
    /// the claimer (forwarder or verifier) is the actor, the reason says why.
    pub(super) fn quarantine(message_id: u64, kind: ClaimKind, reason: &str) -> Self {
        let (actor, status, send_status) = match kind {
            ClaimKind::Sends => (
                Actor::Forwarder,
                MessageStatus::Committed,
                Some(SendStatus::Pending.as_str()),
            ),
            ClaimKind::Verifies => (Actor::Verifier, MessageStatus::Prepared, None),
        };
        Self {
            message_id,
            actor: actor.to_string(),
            action: "quarantine",
            from_status: Some(status.as_str()),
            to_status: Some(status.as_str()),
            from_send_status: send_status,
            to_send_status: send_status,
            reason: clip_error(reason).to_string(),
        }
    }

    /// An operator's redeliver (COMMITTED stays, SEND_FAILED → PENDING).
    pub(super) fn redeliver(message_id: u64, actor: &Actor, reason: &str) -> Self {
        let committed = Some(MessageStatus::Committed.as_str());
        Self {
            message_id,
            actor: actor.to_string(),
            action: "redeliver",
            from_status: committed,
            to_status: committed,
            from_send_status: Some(SendStatus::SendFailed.as_str()),
            to_send_status: Some(SendStatus::Pending.as_str()),
            reason: clip_error(reason).to_string(),
        }
    }

    /// A send given up (COMMITTED stays, PENDING → SEND_FAILED); the error is the reason.
    pub(super) fn send_failed(message_id: u64, actor: &Actor, error: &str) -> Self {
        let committed = Some(MessageStatus::Committed.as_str());
        Self {
            message_id,
            actor: actor.to_string(),
            action: "send_failed",
            from_status: committed,
            to_status: committed,
            from_send_status: Some(SendStatus::Pending.as_str()),
            to_send_status: Some(SendStatus::SendFailed.as_str()),
            reason: clip_error(error).to_string(),
        }
    }
}

/// Binds what a prepare stores, in [`PREPARE_COLUMNS`] order up to
/// `content_digest`; the status and the times are the backend's SQL.
pub(super) fn bind_prepare<'q, D>(q: Query<'q, D>, m: &NewMessage) -> Query<'q, D>
where
    D: Dialect,
    for<'a> &'a str: Bind<D>,
    for<'a> &'a [u8]: Bind<D>,
    String: Bind<D>,
    Option<String>: Bind<D>,
    Vec<u8>: Bind<D>,
{
    q.bind(m.biz_id.as_str())
        .bind(m.message_key.as_str())
        .bind(m.topic.as_str())
        .bind(m.key.clone())
        .bind(m.payload.as_slice())
        .bind(serde_json::to_string(&m.headers).expect("string map serialises"))
        .bind(m.digest())
}

/// Binds a registration in [`PRODUCER_COLUMNS`] order up to `signing_secret`.
pub(super) fn bind_producer<'q, D>(q: Query<'q, D>, p: &ProducerRecord) -> Query<'q, D>
where
    D: Dialect,
    for<'a> &'a str: Bind<D>,
    for<'a> &'a [u8]: Bind<D>,
    u32: Bind<D>,
{
    q.bind(p.biz_id.as_str())
        .bind(p.verify_url.as_str())
        .bind(p.verify_timeout_ms)
        .bind(p.first_verify_after_ms)
        .bind(p.max_verify_attempts)
        .bind(p.token_hash.as_slice())
        .bind(p.signing_secret.as_str())
}

/// Writes `rows` in one statement, stamped with the database clock.
pub(super) async fn insert_audits<'c, D, E>(exec: E, rows: &[AuditRow]) -> StoreResult<()>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
    String: Bind<D>,
    &'static str: Bind<D>,
    Option<&'static str>: Bind<D>,
{
    if rows.is_empty() {
        return Ok(());
    }
    audit_insert::<D>(rows).build().execute(exec).await?;
    Ok(())
}

/// The multi-row INSERT of `rows` (not empty), each stamped with the clock.
pub(super) fn audit_insert<D>(rows: &[AuditRow]) -> QueryBuilder<D>
where
    D: Dialect,
    String: Bind<D>,
    &'static str: Bind<D>,
    Option<&'static str>: Bind<D>,
{
    let mut q = QueryBuilder::<D>::new(format!("INSERT INTO audit_log ({AUDIT_COLUMNS}) "));
    q.push_values(rows, |mut b, r| {
        b.push_bind(D::int(r.message_id))
            .push_bind(r.actor.clone())
            .push_bind(r.action)
            .push_bind(r.from_status)
            .push_bind(r.to_status)
            .push_bind(r.from_send_status)
            .push_bind(r.to_send_status)
            .push_bind(r.reason.clone())
            .push(D::NOW);
    });
    q
}

/// The cheapest statement that proves the database answers.
pub(super) async fn ping<'c, D, E>(exec: E) -> StoreResult<()>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
{
    sqlx::query("SELECT 1").execute(exec).await?;
    Ok(())
}

/// A message's audit rows, oldest first.
pub(super) async fn audit_trail<'c, D, E>(exec: E, message_id: u64) -> StoreResult<Vec<AuditEntry>>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
{
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT id, {AUDIT_COLUMNS} FROM audit_log WHERE message_id = ? ORDER BY id"
    )))
    .bind(D::int(message_id))
    .fetch_all(exec)
    .await?
    .iter()
    .map(audit_entry_from_row)
    .collect()
}

/// The message holding (biz_id, message_key).
pub(super) async fn find_message<'c, D, E>(
    exec: E,
    biz_id: &str,
    message_key: &str,
) -> StoreResult<Option<Message>>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
    for<'a> &'a str: Bind<D>,
{
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages WHERE biz_id = ? AND message_key = ?"
    )))
    .bind(biz_id)
    .bind(message_key)
    .fetch_optional(exec)
    .await?
    .as_ref()
    .map(message_from_row)
    .transpose()
}

/// The registration of `biz_id`.
pub(super) async fn find_producer<'c, D, E>(exec: E, biz_id: &str) -> StoreResult<Option<Producer>>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
    for<'a> &'a str: Bind<D>,
{
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {PRODUCER_COLUMNS} FROM producers WHERE biz_id = ?"
    )))
    .bind(biz_id)
    .fetch_optional(exec)
    .await?
    .as_ref()
    .map(producer_from_row)
    .transpose()
}

/// Deletes the registration of `biz_id`; false when there was none.
pub(super) async fn delete_producer<'c, D, E>(exec: E, biz_id: &str) -> StoreResult<bool>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
    for<'a> &'a str: Bind<D>,
{
    let done = sqlx::query("DELETE FROM producers WHERE biz_id = ?")
        .bind(biz_id)
        .execute(exec)
        .await?;
    Ok(D::rows_affected(&done) == 1)
}

/// Replaces the token hash of `biz_id`; false when there is no such producer.
pub(super) async fn set_producer_token<'c, D, E>(
    exec: E,
    biz_id: &str,
    token_hash: &[u8],
) -> StoreResult<bool>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
    for<'a> &'a str: Bind<D>,
    for<'a> &'a [u8]: Bind<D>,
{
    let done = sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE producers SET token_hash = ?, updated_at = {} WHERE biz_id = ?",
        D::NOW
    )))
    .bind(token_hash)
    .bind(biz_id)
    .execute(exec)
    .await?;
    Ok(D::rows_affected(&done) == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_its_type_cannot_hold_is_the_rows_fault_and_a_missing_column_is_not() {
        let bad_value = sqlx::Error::ColumnDecode {
            index: "\"created_at\"".into(),
            source: "year 0 is out of range".into(),
        };
        assert!(matches!(
            column_error("created_at", bad_value),
            StoreError::Corrupt(why) if why == "created_at: year 0 is out of range"
        ));
        let missing = sqlx::Error::ColumnNotFound("created_at".into());
        assert!(matches!(
            column_error("created_at", missing),
            StoreError::Db(_)
        ));
    }

    #[test]
    fn clip_error_keeps_short_errors_and_cuts_long_ones_on_a_character_boundary() {
        assert_eq!(clip_error("short"), "short");
        let long = "é".repeat(1500); // 3000 bytes, 2 per character
        let clipped = clip_error(&long);
        assert_eq!(clipped.len(), 2000);
        assert!(long.starts_with(clipped));
        let odd = format!("x{long}"); // byte 2000 falls inside a character
        assert_eq!(clip_error(&odd).len(), 1999);
    }
}
