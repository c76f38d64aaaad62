//! MySQL (≥ 8.0) / MariaDB (≥ 10.6) backend: the production store.
//!
//! Claims use `SELECT … FOR UPDATE SKIP LOCKED` so concurrent instances split
//! the due rows between them instead of queueing on each other's locks. All
//! times come from `UTC_TIMESTAMP(3)`, the database clock.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions, MySqlRow};
use sqlx::{Connection, MySql, MySqlPool, QueryBuilder, Row};
use trustmsg_verify_api::admin::{AlertKind, AlertView};
use trustmsg_verify_api::{MessageStatus, MessageView, SendStatus};

use super::db_clock::DbClock;
use super::prelude::{
    AlertStore, HousekeepingStore, LedgerStore, LifecycleStore, MessageStore, OperatorStore,
    RegistryStore, SendStore, VerifyStore, WaitingStore,
};
use super::sql::{
    self, clip_error, message_from_row, transition_effects, AuditRow, ClaimKind, Dialect, Lease,
    SqlRow, ALERT_COLUMNS, GROUP_COLUMNS, MESSAGE_COLUMNS, PREPARE_COLUMNS, PRODUCER_COLUMNS,
    STORED_COLUMNS,
};
use super::{
    Actor, AlertFilter, AuditEntry, Backlog, Began, CheckAttempt, CheckAttemptEntry, Claimed,
    ConsumerGroup, ConsumerGroupCounts, ConsumerGroupRecord, Consumption, Finished, FlowMinute,
    Inserted, Message, MessageFilter, NewAlert, NewMessage, Overdue, PayloadMove, PayloadRoom,
    Producer, ProducerRecord, ProducerSummary, Requeue, RequeuedChunk, SentMark, StoreError,
    StoreResult, StuckConsumption, Transition, VerifyLease, Wait,
};

/// The MySQL/MariaDB store.
#[derive(Debug, Clone)]
pub struct MySqlStore {
    pool: MySqlPool,
    /// The server takes `INSERT … RETURNING` (MariaDB ≥ 10.5; MySQL does
    /// not): a prepare then needs no read-back.
    returning: bool,
    /// The database clock for the producers' decision batches.
    clock: DbClock,
}

impl MySqlStore {
    /// Claims up to `limit` rows of `table` whose `due` time has come, oldest
    /// due first, pushing `due` out by `lease` so no other instance takes
    /// them meanwhile (rows another instance is claiming are skipped, not
    /// waited for): `SELECT <select> … FOR UPDATE SKIP LOCKED`, then one
    /// UPDATE by id, in one transaction. The alert outbox and waiting
    /// commits are claimed this way.
    async fn claim_due_rows(
        &self,
        select: &str,
        table: &str,
        due: &str,
        limit: u32,
        lease: Duration,
    ) -> StoreResult<Vec<MySqlRow>> {
        // An idle instance asks every round, and such rows are rare: a plain
        // read finds whether anything is due before a transaction (and its
        // locks) is opened for the claim.
        let any: Option<u64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT id FROM {table} WHERE {due} <= UTC_TIMESTAMP(3) LIMIT 1"
        )))
        .fetch_optional(&self.pool)
        .await?;
        if any.is_none() {
            return Ok(Vec::new());
        }
        let mut tx = self.pool.begin().await?;
        let rows: Vec<MySqlRow> = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {select} WHERE {due} <= UTC_TIMESTAMP(3) \
             ORDER BY {due} LIMIT ? FOR UPDATE SKIP LOCKED"
        )))
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
        if rows.is_empty() {
            tx.commit().await?;
            return Ok(rows);
        }
        let mut q = QueryBuilder::<MySql>::new(format!(
            "UPDATE {table} SET {due} = UTC_TIMESTAMP(3) + INTERVAL "
        ));
        q.push_bind(micros(lease))
            .push(" MICROSECOND WHERE id IN (");
        let mut sep = q.separated(", ");
        for row in &rows {
            sep.push_bind(row.unsigned::<u64>("id")?);
        }
        q.push(")");
        q.build().execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(rows)
    }
    /// Connects a pool to `url` (`mysql://user:pass@host:port/db`).
    pub async fn connect(url: &super::DatabaseUrl) -> StoreResult<Self> {
        let opts: MySqlConnectOptions = url.expose_for_driver().parse()?;
        let pool = MySqlPoolOptions::new()
            .max_connections(32)
            .acquire_timeout(Duration::from_secs(10))
            // READ COMMITTED: claims scan due rows with FOR UPDATE SKIP LOCKED;
            // under REPEATABLE READ that scan also takes gap locks, which block
            // concurrent prepares' INSERTs and deadlock with them. No statement
            // here needs a repeatable snapshot: every write is a guarded UPDATE.
            .after_connect(|conn, _| {
                Box::pin(async move {
                    sqlx::query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                        .execute(conn)
                        .await?;
                    Ok(())
                })
            })
            // A connection a worker abandoned mid-statement may never answer
            // again; right after one was, close what comes back instead of
            // testing it with a ping that would wait behind the lost statement.
            .after_release(|conn, _| {
                // A statement with large payloads grows the connection's
                // buffers to its size, and they stay that size: up to 32
                // connections would each keep the largest batch they ever
                // carried. Back to 8 KiB (a no-op for a small statement).
                conn.shrink_buffers();
                Box::pin(async { Ok(super::deadline::reuse_released()) })
            })
            .connect_with(opts)
            .await?;
        let version: String = sqlx::query_scalar("SELECT CAST(VERSION() AS CHAR)")
            .fetch_one(&pool)
            .await?;
        Ok(Self {
            pool,
            returning: takes_insert_returning(&version),
            clock: DbClock::default(),
        })
    }

    /// The same store without `INSERT … RETURNING`, as on MySQL (for tests
    /// that hold both paths to the same outcomes on one server).
    pub fn without_insert_returning(self) -> Self {
        Self {
            returning: false,
            ..self
        }
    }

    /// The fast path of a prepare on a server with `INSERT … RETURNING`: one
    /// statement creates every row of the batch and returns them (autocommit,
    /// so all rows or none; in a transaction with the INSERT of their
    /// contents when some are apart). None when it does not apply: no
    /// RETURNING, a key twice in the batch, or a key that exists already (a
    /// producer's retry), which the caller then sorts out with a read first.
    async fn insert_all_returning(
        &self,
        batch: &[NewMessage],
        keys: &[(&str, &str)],
    ) -> StoreResult<Option<Vec<Inserted>>> {
        let distinct: HashSet<&(&str, &str)> = keys.iter().collect();
        if !self.returning || distinct.len() != keys.len() {
            return Ok(None);
        }
        let contents: Vec<sql::Content<'_>> = batch.iter().map(sql::Content::of).collect();
        let creates: Vec<(&NewMessage, &sql::Content<'_>)> = batch.iter().zip(&contents).collect();
        let mut q = insert_prepared_rows(&creates);
        q.push(format!(" RETURNING {STORED_COLUMNS}"));
        let mut tx = if contents.iter().any(sql::Content::apart) {
            Some(self.pool.begin().await?)
        } else {
            None
        };
        let inserted = match &mut tx {
            Some(tx) => q.build().fetch_all(&mut **tx).await,
            None => q.build().fetch_all(&self.pool).await,
        };
        let rows = match inserted {
            Ok(rows) => rows,
            Err(e) if is_unique_violation(&e) || is_lock_conflict(&e) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut by_key = rows_by_key(&rows)?;
        if let Some(mut tx) = tx {
            created_apart(&mut tx, &mut by_key, &creates).await?;
            tx.commit().await?;
        }
        keys.iter()
            .map(|(b, k)| {
                by_key
                    .remove(&(b.to_string(), k.to_string()))
                    .map(Inserted::Created)
                    .ok_or(StoreError::Vanished("a row INSERT … RETURNING wrote"))
            })
            .collect::<StoreResult<Vec<_>>>()
            .map(Some)
    }

    /// The underlying pool.
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }
}

/// Whether a server of this `VERSION()` takes `INSERT … RETURNING`: MariaDB
/// from 10.5 on (`10.11.19-MariaDB-…`); MySQL never.
fn takes_insert_returning(version: &str) -> bool {
    if !version.contains("MariaDB") {
        return false;
    }
    let mut parts = version
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (10, 5)
}

/// What a prepare writes to `headroom` (migration 0015): 40 bytes, which a
/// decision ([`transition_update`]) cuts to 16 and the SENT mark
/// ([`mark_sent_statement`]) to none. Each of those changes fills in more
/// than it empties (a commit: `send_status`, `next_send_at`, `decided_at`,
/// 16 bytes net; with an ordered message's seq, 24; the SENT mark:
/// `sent_at`, the partition and offset, 9), so with the room given back the
/// record never grows, and InnoDB rewrites it in its own place instead of
/// moving it and reorganising its page (3–7 KB of redo per change).
const HEADROOM: &str = "REPEAT(X'00', 40)";

/// `headroom` after a decision (see [`HEADROOM`]): at most 16 bytes, and
/// none where there was none (a row from before migration 0015).
const HEADROOM_DECIDED: &str = "LEFT(headroom, 16)";

/// `INSERT INTO messages … VALUES (…), (…)` for `creates`, each with where
/// its content goes, without a terminator.
fn insert_prepared_rows(creates: &[(&NewMessage, &sql::Content<'_>)]) -> QueryBuilder<MySql> {
    let mut q = QueryBuilder::<MySql>::new(format!(
        "INSERT INTO messages ({PREPARE_COLUMNS}, headroom) "
    ));
    q.push_values(creates, |mut b, (m, content)| {
        b.push_bind(m.biz_id.as_str())
            .push_bind(m.message_key.as_str())
            .push_bind(m.topic.as_str())
            .push_bind(m.key.as_deref())
            .push_bind(content.row_payload())
            .push_bind(content.row_headers())
            .push_bind(m.digest())
            .push_bind(m.order_key.as_deref())
            .push_bind(m.traceparent.as_deref())
            .push_bind(m.tracestate.as_deref())
            .push("'PREPARED'")
            .push("UTC_TIMESTAMP(3) + INTERVAL ")
            .push_bind_unseparated(micros(m.first_verify_after))
            .push_unseparated(" MICROSECOND")
            .push("UTC_TIMESTAMP(3)")
            .push("UTC_TIMESTAMP(3)");
        let (at, after) = sql::deliver_binds::<MySql>(m);
        b.push("COALESCE(")
            .push_bind_unseparated(at)
            .push_unseparated(", UTC_TIMESTAMP(3) + INTERVAL ")
            .push_bind_unseparated(after)
            .push_unseparated(" MICROSECOND)")
            .push_bind(sql::payload_bytes(m))
            .push_bind(content.apart())
            .push(HEADROOM);
    });
    q
}

/// Rows a prepare created, read as they are stored ([`STORED_COLUMNS`]),
/// by (biz_id, message_key).
fn rows_by_key(rows: &[MySqlRow]) -> StoreResult<HashMap<(String, String), Message>> {
    let mut by_key = HashMap::with_capacity(rows.len());
    for row in rows {
        let m = message_from_row(row)?;
        by_key.insert((m.biz_id.clone(), m.message_key.clone()), m);
    }
    Ok(by_key)
}

/// On the transaction that created the rows `by_key` from `creates`:
/// writes the contents that are apart, and puts each such content into its
/// row as read (which holds none of it).
async fn created_apart(
    tx: &mut sqlx::MySqlConnection,
    by_key: &mut HashMap<(String, String), Message>,
    creates: &[(&NewMessage, &sql::Content<'_>)],
) -> StoreResult<()> {
    let mut apart = Vec::new();
    for (m, content) in creates.iter().filter(|(_, c)| c.apart()) {
        let key = (m.biz_id.clone(), m.message_key.clone());
        let row = by_key
            .remove(&key)
            .ok_or(StoreError::Vanished("a row a batched prepare wrote"))?;
        apart.push((row.id, *content));
        by_key.insert(key, sql::with_content(row, m));
    }
    sql::insert_apart::<MySql>(tx, &apart).await
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

impl Dialect for MySql {
    const NOW: &'static str = "UTC_TIMESTAMP(3)";
    type Int = u64;

    fn int(v: u64) -> u64 {
        v
    }

    fn rows_affected(done: &sqlx::mysql::MySqlQueryResult) -> u64 {
        done.rows_affected()
    }

    fn last_insert_id(done: &sqlx::mysql::MySqlQueryResult) -> u64 {
        done.last_insert_id()
    }

    const MINUS_SPAN: &'static str = " - INTERVAL ? MICROSECOND";
    const GREATEST: &'static str = "GREATEST";
    const PLUS_SPAN: &'static str = " + INTERVAL ? MICROSECOND";

    fn span(d: Duration) -> i64 {
        micros(d)
    }

    type Time = DateTime<Utc>;

    fn time(t: DateTime<Utc>) -> DateTime<Utc> {
        t
    }
}

impl SqlRow for MySqlRow {
    /// Text columns use a binary collation (keys compare byte for byte), which
    /// the MySQL protocol reports as binary: read them as bytes, check the UTF-8.
    fn opt_text(&self, col: &str) -> StoreResult<Option<String>> {
        self.opt_bytes(col)?
            .map(|b| {
                String::from_utf8(b).map_err(|_| StoreError::Corrupt(format!("{col} is not UTF-8")))
            })
            .transpose()
    }

    fn opt_bytes(&self, col: &str) -> StoreResult<Option<Vec<u8>>> {
        self.try_get(col).map_err(|e| sql::column_error(col, e))
    }

    fn opt_u64(&self, col: &str) -> StoreResult<Option<u64>> {
        self.try_get(col).map_err(|e| sql::column_error(col, e))
    }

    fn opt_i64(&self, col: &str) -> StoreResult<Option<i64>> {
        self.try_get(col).map_err(|e| sql::column_error(col, e))
    }

    fn opt_time(&self, col: &str) -> StoreResult<Option<DateTime<Utc>>> {
        self.try_get(col).map_err(|e| sql::column_error(col, e))
    }
}

async fn select_messages_by_ids<'e, E>(exec: E, ids: &[u64]) -> StoreResult<Vec<Message>>
where
    E: sqlx::Executor<'e, Database = MySql>,
{
    select_rows_by_ids(exec, MESSAGE_COLUMNS, ids)
        .await?
        .iter()
        .map(message_from_row)
        .collect()
}

/// The undecoded rows of `ids` (`columns` of each), in id order.
async fn select_rows_by_ids<'e, E>(
    exec: E,
    columns: &str,
    ids: &[u64],
) -> StoreResult<Vec<MySqlRow>>
where
    E: sqlx::Executor<'e, Database = MySql>,
{
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut q = QueryBuilder::<MySql>::new(format!("SELECT {columns} FROM messages WHERE id IN ("));
    let mut sep = q.separated(", ");
    for id in ids {
        sep.push_bind(*id);
    }
    q.push(") ORDER BY id");
    Ok(q.build().fetch_all(exec).await?)
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// `UPDATE messages SET …` for a transition like `t` (the caller adds the
/// guard). The times are the database clock at the statement, or `at` (a
/// database clock reading the caller took) when given.
fn transition_update(t: &Transition, at: Option<DateTime<Utc>>) -> QueryBuilder<MySql> {
    let push_now = |q: &mut QueryBuilder<MySql>| match at {
        Some(now) => {
            q.push_bind(now);
        }
        None => {
            q.push("UTC_TIMESTAMP(3)");
        }
    };
    let send_status = transition_effects(t.to).send_status;
    let to = t.to.as_str();
    let mut q = QueryBuilder::<MySql>::new("UPDATE messages SET status = ");
    q.push_bind(to)
        .push(", send_status = ")
        .push_bind(send_status)
        .push(", version = version + 1, verify_attempts = IF(")
        .push_bind(to)
        .push(" = 'PREPARED', 0, verify_attempts + ")
        .push_bind(u32::from(t.verify_attempt))
        .push("), last_error = COALESCE(")
        .push_bind(t.error.as_deref().map(clip_error).map(str::to_string))
        .push(", last_error), next_verify_at = IF(")
        .push_bind(to)
        .push(" = 'PREPARED', ");
    push_now(&mut q);
    // A re-verify puts the message back in check-back's queue: its overdue
    // alert is due again, counted from now.
    q.push(", NULL), verify_overdue_alerted = IF(")
        .push_bind(to)
        .push(" = 'PREPARED', FALSE, verify_overdue_alerted), requeued_at = IF(")
        .push_bind(to)
        .push(" = 'PREPARED', ");
    push_now(&mut q);
    q.push(", requeued_at), next_send_at = IF(")
        .push_bind(to)
        .push(" = 'COMMITTED', ");
    push_commit_due(&mut q, at, t.send_lease);
    q.push(", NULL), decided_at = IF(")
        .push_bind(to)
        .push(" IN ('COMMITTED', 'ROLLED_BACK', 'VERIFY_FAILED'), ");
    push_now(&mut q);
    q.push(", decided_at), updated_at = ");
    push_now(&mut q);
    q.push(format!(", headroom = {HEADROOM_DECIDED}"));
    q
}

/// When a commit makes its message due, as SQL (`next_send_at` of the
/// commit's UPDATE; `at` is the clock the caller read, else the
/// statement's): at once, which for this instance's forwarder is a claim of
/// one send lease (the fast path), or at the message's `deliver_at` if that
/// is later (no claim: the sweepers take it then). This and [`commit_due`],
/// its mirror for a row at hand, are the one place this backend says when a
/// committed message is due.
fn push_commit_due(q: &mut QueryBuilder<MySql>, at: Option<DateTime<Utc>>, lease: Duration) {
    match at {
        Some(now) => {
            q.push("IF(deliver_at > ")
                .push_bind(now)
                .push(", deliver_at, ")
                .push_bind(lease_end(now, lease))
                .push(")");
        }
        None => {
            q.push("IF(deliver_at > UTC_TIMESTAMP(3), deliver_at, UTC_TIMESTAMP(3) + INTERVAL ")
                .push_bind(micros(lease))
                .push(" MICROSECOND)");
        }
    }
}

/// [`push_commit_due`] for a row whose `deliver_at` is known, at the clock `now`.
fn commit_due(
    now: DateTime<Utc>,
    deliver_at: Option<DateTime<Utc>>,
    lease: Duration,
) -> DateTime<Utc> {
    match deliver_at {
        Some(at) if at > now => at,
        _ => lease_end(now, lease),
    }
}

/// What [`transition_update`] with the clock `now` makes of `seen`, the row
/// as it was at the transition's guard.
fn transitioned(seen: &Message, t: &Transition, now: DateTime<Utc>) -> Message {
    let mut m = seen.clone();
    m.status = t.to;
    m.send_status = transition_effects(t.to)
        .send_status
        .map(|_| SendStatus::Pending);
    m.version += 1;
    m.verify_attempts = if t.to == MessageStatus::Prepared {
        0
    } else {
        m.verify_attempts + u32::from(t.verify_attempt)
    };
    if let Some(e) = &t.error {
        m.last_error = Some(clip_error(e).to_string());
    }
    m.next_verify_at = (t.to == MessageStatus::Prepared).then_some(now);
    m.next_send_at =
        (t.to == MessageStatus::Committed).then(|| commit_due(now, m.deliver_at, t.send_lease));
    if matches!(
        t.to,
        MessageStatus::Committed | MessageStatus::RolledBack | MessageStatus::VerifyFailed
    ) {
        m.decided_at = Some(now);
    }
    m.updated_at = now;
    m
}

/// The rows holding these keys, grouped per biz_id so each group is a range
/// on the unique (biz_id, message_key) index.
async fn select_messages_by_keys<'e, E>(exec: E, keys: &[(&str, &str)]) -> StoreResult<Vec<Message>>
where
    E: sqlx::Executor<'e, Database = MySql>,
{
    select_by_keys(exec, MESSAGE_COLUMNS, keys).await
}

/// [`select_messages_by_keys`] reading `columns` ([`MESSAGE_COLUMNS`] or
/// [`STORED_COLUMNS`]).
async fn select_by_keys<'e, E>(
    exec: E,
    columns: &str,
    keys: &[(&str, &str)],
) -> StoreResult<Vec<Message>>
where
    E: sqlx::Executor<'e, Database = MySql>,
{
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut by_biz: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (b, k) in keys {
        by_biz.entry(b).or_default().push(k);
    }
    let mut q = QueryBuilder::<MySql>::new(format!("SELECT {columns} FROM messages WHERE "));
    for (i, (biz, ks)) in by_biz.iter().enumerate() {
        if i > 0 {
            q.push(" OR ");
        }
        q.push("(biz_id = ")
            .push_bind(*biz)
            .push(" AND message_key IN (");
        let mut sep = q.separated(", ");
        for k in ks {
            sep.push_bind(*k);
        }
        q.push("))");
    }
    q.build()
        .fetch_all(exec)
        .await?
        .iter()
        .map(message_from_row)
        .collect()
}

/// A lost lock race is not an error for a guarded write: the guard simply did not win.
fn is_lock_conflict(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if matches!(db.code().as_deref(), Some("40001") | Some("HY000"))
        && (db.message().contains("Deadlock") || db.message().contains("Lock wait timeout")))
}

#[async_trait]
impl LifecycleStore for MySqlStore {
    async fn migrate(&self) -> StoreResult<()> {
        // sqlx takes `GET_LOCK(…, -1)` to keep two migrators apart, and
        // ignores its answer; MariaDB answers a negative timeout with NULL
        // at once, without the lock, so two instances starting with --auto-migrate
        // both applied migration 1 and one failed (duplicate entry). This
        // lock waits, on the connection the migrations run on.
        let mut conn = self.pool.acquire().await?;
        let locked: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK('trustmsg_migrate', 300)")
            .fetch_one(&mut *conn)
            .await?;
        if locked != Some(1) {
            return Err(StoreError::Unavailable(
                "another migration held the lock for 5 minutes".into(),
            ));
        }
        let done = sqlx::migrate!("../migrations/mysql")
            .run_direct(None, &mut *conn, false)
            .await;
        let _ = sqlx::query("SELECT RELEASE_LOCK('trustmsg_migrate')")
            .execute(&mut *conn)
            .await;
        done?;
        Ok(())
    }

    async fn now(&self) -> StoreResult<DateTime<Utc>> {
        Ok(sqlx::query_scalar("SELECT UTC_TIMESTAMP(3)")
            .fetch_one(&self.pool)
            .await?)
    }

    async fn ping(&self) -> StoreResult<()> {
        sql::ping(&self.pool).await
    }
}

#[async_trait]
impl MessageStore for MySqlStore {
    async fn insert_prepared(&self, m: &NewMessage) -> StoreResult<Inserted> {
        let content = sql::Content::of(m);
        // With RETURNING the new row comes back with the INSERT; without, it
        // is read back by its id.
        let returning = if self.returning {
            format!(" RETURNING {STORED_COLUMNS}")
        } else {
            String::new()
        };
        let insert = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO messages ({PREPARE_COLUMNS}, headroom) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, \
             'PREPARED', UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(3), \
             UTC_TIMESTAMP(3), COALESCE(?, UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND), ?, ?, \
             {HEADROOM}){returning}"
        )));
        let (at, after) = sql::deliver_binds::<MySql>(m);
        let insert = sql::bind_prepare(insert, m, &content)
            .bind(micros(m.first_verify_after))
            .bind(at)
            .bind(after)
            .bind(sql::payload_bytes(m))
            .bind(content.apart());
        // A content apart is written with its row in one transaction; a
        // row with its own content is one autocommit statement.
        let mut tx = if content.apart() {
            Some(self.pool.begin().await?)
        } else {
            None
        };
        // Ok(row): RETURNING gave the new row; Err(done): read it back.
        let res = match (&mut tx, self.returning) {
            (Some(tx), true) => insert.fetch_one(&mut **tx).await.map(Ok),
            (Some(tx), false) => insert.execute(&mut **tx).await.map(Err),
            (None, true) => insert.fetch_one(&self.pool).await.map(Ok),
            (None, false) => insert.execute(&self.pool).await.map(Err),
        };
        let created = match res {
            Ok(created) => created,
            Err(sqlx::Error::Database(db)) if db.is_unique_violation() => {
                drop(tx);
                let row = self
                    .find_message(&m.biz_id, &m.message_key)
                    .await?
                    .ok_or(StoreError::Vanished("the row a duplicate key names"))?;
                return Ok(Inserted::Existing(row));
            }
            Err(e) => return Err(e.into()),
        };
        let Some(mut tx) = tx else {
            let row = match created {
                Ok(row) => message_from_row(&row)?,
                Err(done) => self
                    .find_message_by_id(done.last_insert_id())
                    .await?
                    .ok_or(StoreError::Vanished("a row just inserted"))?,
            };
            return Ok(Inserted::Created(row));
        };
        let row = match created {
            Ok(row) => message_from_row(&row)?,
            Err(done) => {
                let id = [done.last_insert_id()];
                let rows = select_rows_by_ids(&mut *tx, STORED_COLUMNS, &id).await?;
                let row = rows
                    .first()
                    .ok_or(StoreError::Vanished("a row just inserted"))?;
                message_from_row(row)?
            }
        };
        sql::insert_apart::<MySql>(&mut tx, &[(row.id, &content)]).await?;
        tx.commit().await?;
        Ok(Inserted::Created(sql::with_content(row, m)))
    }

    async fn insert_tombstone(
        &self,
        biz_id: &str,
        message_key: &str,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin().await?;
        let res = sqlx::query(
            "INSERT INTO messages (biz_id, message_key, payload, headers, status, tombstone, \
             created_at, updated_at, decided_at) \
             VALUES (?, ?, '', '{}', 'ROLLED_BACK', TRUE, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))",
        )
        .bind(biz_id)
        .bind(message_key)
        .execute(&mut *tx)
        .await;
        let id = match res {
            Ok(done) => done.last_insert_id(),
            Err(sqlx::Error::Database(db)) if db.is_unique_violation() => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        sql::insert_audits(&mut *tx, &[AuditRow::tombstone(id, actor, reason)]).await?;
        let row = select_messages_by_ids(&mut *tx, &[id]).await?.pop();
        tx.commit().await?;
        Ok(row)
    }

    async fn find_message(&self, biz_id: &str, message_key: &str) -> StoreResult<Option<Message>> {
        sql::find_message(&self.pool, biz_id, message_key).await
    }

    async fn find_message_by_id(&self, id: u64) -> StoreResult<Option<Message>> {
        Ok(select_messages_by_ids(&self.pool, &[id]).await?.pop())
    }

    async fn transition(&self, t: &Transition) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin().await?;
        let mut q = transition_update(t, None);
        q.push(" WHERE id = ")
            .push_bind(t.id)
            .push(" AND status = ")
            .push_bind(t.from.as_str())
            .push(" AND version = ")
            .push_bind(t.version);
        match q.build().execute(&mut *tx).await {
            Ok(done) if done.rows_affected() == 1 => {}
            Ok(_) => return Ok(None),
            Err(e) if is_lock_conflict(&e) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        sql::insert_audits(&mut *tx, AuditRow::transition(t).as_slice()).await?;
        let mut row = select_messages_by_ids(&mut *tx, &[t.id]).await?.pop();
        let mut alerts = verify_failed_alerts([&row]);
        if let Some(m) = row.as_mut() {
            alerts.extend(order_commits(&mut tx, std::slice::from_mut(m)).await?);
        }
        let raised = sql::raise_alerts::<MySql>(&mut tx, alerts).await?;
        tx.commit().await?;
        raised.announce();
        Ok(row)
    }

    async fn insert_prepared_batch(&self, batch: &[NewMessage]) -> StoreResult<Vec<Inserted>> {
        if batch.len() == 1 {
            return Ok(vec![self.insert_prepared(&batch[0]).await?]);
        }
        let keys: Vec<(&str, &str)> = batch
            .iter()
            .map(|m| (m.biz_id.as_str(), m.message_key.as_str()))
            .collect();
        if let Some(created) = self.insert_all_returning(batch, &keys).await? {
            return Ok(created);
        }
        let mut tx = self.pool.begin().await?;
        let existing = select_messages_by_keys(&mut *tx, &keys).await?;
        let mut seen: HashSet<(&str, &str)> = existing
            .iter()
            .map(|m| (m.biz_id.as_str(), m.message_key.as_str()))
            .collect();
        // The first occurrence of each new key is the one this batch creates.
        let creates: Vec<&NewMessage> = batch
            .iter()
            .filter(|m| seen.insert((m.biz_id.as_str(), m.message_key.as_str())))
            .collect();
        let contents: Vec<sql::Content<'_>> = creates.iter().map(|m| sql::Content::of(m)).collect();
        let creates: Vec<(&NewMessage, &sql::Content<'_>)> =
            creates.into_iter().zip(&contents).collect();
        if !creates.is_empty() {
            let mut q = insert_prepared_rows(&creates);
            match q.build().execute(&mut *tx).await {
                Ok(_) => {}
                // Another instance inserted one of the keys since our read, or
                // a lock conflict: let the one-by-one path sort each out.
                Err(e) if is_lock_conflict(&e) || is_unique_violation(&e) => {
                    drop(tx);
                    return super::insert_prepared_each(self, batch).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
        let created_keys: Vec<(&str, &str)> = creates
            .iter()
            .map(|(m, _)| (m.biz_id.as_str(), m.message_key.as_str()))
            .collect();
        // As stored: the contents apart are not written yet.
        let created = select_by_keys(&mut *tx, STORED_COLUMNS, &created_keys).await?;
        let mut by_key: HashMap<(String, String), Message> = created
            .into_iter()
            .map(|m| ((m.biz_id.clone(), m.message_key.clone()), m))
            .collect();
        created_apart(&mut tx, &mut by_key, &creates).await?;
        tx.commit().await?;
        let created: Vec<Message> = by_key.into_values().collect();

        let mut rows: HashMap<(&str, &str), (&Message, bool)> = HashMap::new();
        for m in &existing {
            rows.insert((m.biz_id.as_str(), m.message_key.as_str()), (m, false));
        }
        for m in &created {
            rows.insert((m.biz_id.as_str(), m.message_key.as_str()), (m, true));
        }
        let mut out = Vec::with_capacity(batch.len());
        for key in &keys {
            let entry = rows.get_mut(key).ok_or(StoreError::Vanished(
                "a row a batched prepare wrote or found",
            ))?;
            let (row, fresh) = *entry;
            out.push(if fresh {
                entry.1 = false;
                Inserted::Created(row.clone())
            } else {
                Inserted::Existing(row.clone())
            });
        }
        Ok(out)
    }

    async fn find_messages(&self, keys: &[(&str, &str)]) -> StoreResult<Vec<Message>> {
        select_messages_by_keys(&self.pool, keys).await
    }

    async fn transition_batch(&self, ts: &[Transition]) -> StoreResult<Vec<Option<Message>>> {
        self.transition_together(ts, None).await
    }

    async fn transition_batch_seen(
        &self,
        ts: &[Transition],
        seen: &[&Message],
    ) -> StoreResult<Vec<Option<Message>>> {
        if seen.len() == ts.len() && decide_alone(ts, seen) {
            return self.decide_together(ts, seen).await;
        }
        // The audit INSERT's RETURNING reads the clock the UPDATE then binds;
        // without RETURNING (MySQL) the rows are read back as usual.
        let seen = (self.returning && seen.len() == ts.len()).then_some(seen);
        self.transition_together(ts, seen).await
    }

    async fn audit_trail(&self, message_id: u64) -> StoreResult<Vec<AuditEntry>> {
        sql::audit_trail(&self.pool, message_id).await
    }
}

#[async_trait]
impl SendStore for MySqlStore {
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
        // Ordered messages' marks move their keys on, in a transaction of
        // their own; the others take the one statement below.
        if marks.iter().any(|m| m.order.is_some()) {
            let (ordered, plain): (Vec<SentMark>, Vec<SentMark>) =
                marks.iter().partition(|m| m.order.is_some());
            let mut tx = self.pool.begin().await?;
            let matched = if ordered.len() < ORDERED_MARKS_TOGETHER {
                sql::mark_sent_ordered::<MySql>(&mut tx, &ordered).await?
            } else {
                mark_sent_ordered_together(&mut tx, &ordered).await?
            };
            tx.commit().await?;
            return Ok(matched + self.mark_sent(&plain).await?);
        }
        if marks.is_empty() {
            return Ok(0);
        }
        Ok(mark_sent_statement(marks)
            .build()
            .execute(&self.pool)
            .await?
            .rows_affected())
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
        let mut tx = self.pool.begin().await?;
        let failed =
            sql::mark_send_failed::<MySql>(&mut tx, " FOR UPDATE", (id, version), error, actor);
        let Some((row, raised)) = failed.await? else {
            tx.rollback().await?;
            return Ok(None);
        };
        tx.commit().await?;
        raised.announce();
        Ok(Some(row))
    }
}

#[async_trait]
impl VerifyStore for MySqlStore {
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
        let done = sqlx::query(
            "UPDATE messages SET verify_attempts = verify_attempts + 1, last_error = ?, \
             next_verify_at = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, version = version + 1, \
             updated_at = UTC_TIMESTAMP(3) WHERE id = ? AND version = ? AND status = 'PREPARED'",
        )
        .bind(clip_error(error))
        .bind(micros(delay))
        .bind(id)
        .bind(version)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn release_verifies(&self, claims: &[(u64, u64)], delay: Duration) -> StoreResult<u64> {
        if claims.is_empty() {
            return Ok(0);
        }
        let mut q = QueryBuilder::<MySql>::new(
            "UPDATE messages SET next_verify_at = UTC_TIMESTAMP(3) + INTERVAL ",
        );
        q.push_bind(micros(delay)).push(
            " MICROSECOND, version = version + 1 WHERE status = 'PREPARED' AND (id, version) IN (",
        );
        let mut sep = q.separated(", ");
        for (id, version) in claims {
            sep.push("(")
                .push_bind_unseparated(*id)
                .push_unseparated(", ")
                .push_bind_unseparated(*version)
                .push_unseparated(")");
        }
        q.push(")");
        Ok(q.build().execute(&self.pool).await?.rows_affected())
    }

    async fn record_check_attempts(&self, calls: &[CheckAttempt]) -> StoreResult<()> {
        sql::record_check_attempts(&self.pool, calls).await
    }

    async fn check_attempts(&self, message_id: u64) -> StoreResult<Vec<CheckAttemptEntry>> {
        sql::check_attempts(&self.pool, message_id).await
    }
}

#[async_trait]
impl OperatorStore for MySqlStore {
    async fn redeliver(
        &self,
        id: u64,
        version: u64,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        let audit = AuditRow::redeliver(id, actor, reason);
        self.operator_update(sql::redeliver_update(MySql::NOW), id, version, audit)
            .await
    }

    async fn skip_blocked(
        &self,
        m: &Message,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin().await?;
        let row = sql::skip::<MySql>(&mut tx, m, actor, reason).await?;
        // A lost guard ends the transaction now, not when the connection is
        // next used: its locks must not hold the key back meanwhile.
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
        self.operator_update(sql::send_now_update(MySql::NOW), id, version, audit)
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
        let mut tx = self.pool.begin().await?;
        let chunk = sql::requeue_chunk::<MySql>(
            &mut tx,
            " FOR UPDATE",
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
impl AlertStore for MySqlStore {
    async fn claim_due_alerts(&self, limit: u32, lease: Duration) -> StoreResult<Vec<AlertView>> {
        let rows = self
            .claim_due_rows(
                &format!("{ALERT_COLUMNS} FROM alerts"),
                "alerts",
                "next_attempt_at",
                limit,
                lease,
            )
            .await?;
        rows.iter().map(sql::alert_from_row).collect()
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
impl HousekeepingStore for MySqlStore {
    async fn flag_overdue(
        &self,
        wait: Wait,
        older_than: Duration,
        limit: u32,
    ) -> StoreResult<Vec<Overdue>> {
        sql::flag_overdue(&self.pool, wait, older_than, limit).await
    }

    async fn purge_finished(&self, older_than: Duration, limit: u32) -> StoreResult<u64> {
        let mut tx = self.pool.begin().await?;
        let n = sql::purge_finished::<MySql>(&mut tx, older_than, limit).await?;
        tx.commit().await?;
        Ok(n)
    }

    async fn move_payloads(&self, limit: u32) -> StoreResult<PayloadMove> {
        let mut tx = self.pool.begin().await?;
        let chunk = sql::move_chunk::<MySql>(&mut tx, " FOR UPDATE", limit).await?;
        tx.commit().await?;
        Ok(chunk)
    }

    async fn backlog(&self) -> StoreResult<Backlog> {
        sql::backlog(&self.pool).await
    }

    async fn add_flow(&self, f: &FlowMinute) -> StoreResult<()> {
        const UPSERT: sql::Upsert = sql::Upsert {
            clause: "ON DUPLICATE KEY UPDATE",
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
impl WaitingStore for MySqlStore {
    async fn park_commit(&self, w: &super::NewWaitingCommit) -> StoreResult<bool> {
        sql::park_commit(&self.pool, "INSERT IGNORE", w).await
    }

    async fn claim_waiting_commits(
        &self,
        limit: u32,
        lease: Duration,
    ) -> StoreResult<Vec<super::WaitingCommit>> {
        let rows = self
            .claim_due_rows(
                &format!(
                    "{}, UTC_TIMESTAMP(3) AS now FROM submit_waiting",
                    sql::WAITING_COLUMNS
                ),
                "submit_waiting",
                "next_try_at",
                limit,
                lease,
            )
            .await?;
        rows.iter().map(sql::waiting_from_row).collect()
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
impl RegistryStore for MySqlStore {
    async fn list_producers(&self) -> StoreResult<Vec<Producer>> {
        sql::list_producers(&self.pool).await
    }

    async fn upsert_producer(&self, p: &ProducerRecord) -> StoreResult<Producer> {
        // An update keeps the token and the signing secret, which have their
        // own operations.
        let upsert = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO producers ({PRODUCER_COLUMNS}) \
             VALUES (?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), ?, ?) \
             ON DUPLICATE KEY UPDATE verify_url = VALUES(verify_url), ordered = VALUES(ordered), \
             verify_timeout_ms = VALUES(verify_timeout_ms), \
             first_verify_after_ms = VALUES(first_verify_after_ms), \
             max_verify_attempts = VALUES(max_verify_attempts), topics = VALUES(topics), \
             updated_at = UTC_TIMESTAMP(3)"
        )));
        sql::bind_producer(upsert, p).execute(&self.pool).await?;
        self.find_producer(&p.biz_id)
            .await?
            .ok_or(StoreError::Vanished("a producer just upserted"))
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
        // An update keeps the token (rotated on its own) and created_at.
        let upsert = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO consumer_groups ({GROUP_COLUMNS}) \
             VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3)) \
             ON DUPLICATE KEY UPDATE topics = VALUES(topics), \
             max_failures = VALUES(max_failures), \
             in_progress_timeout_ms = VALUES(in_progress_timeout_ms), \
             updated_at = UTC_TIMESTAMP(3)"
        )));
        sql::bind_group(upsert, g).execute(&self.pool).await?;
        self.find_consumer_group(&g.name)
            .await?
            .ok_or(StoreError::Vanished("a consumer group just upserted"))
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
impl LedgerStore for MySqlStore {
    async fn begin_consumption(
        &self,
        group: &ConsumerGroup,
        message_id: u64,
    ) -> StoreResult<Began> {
        // The upsert X-locks an existing row as the INSERT locks a new one.
        const KEEP: &str = "ON DUPLICATE KEY UPDATE attempts = attempts";
        for _ in 0..LEDGER_TRIES {
            let mut tx = self.pool.begin().await?;
            match sql::begin_consumption::<MySql>(&mut tx, KEEP, " FOR UPDATE", group, message_id)
                .await
            {
                Ok(began) => {
                    tx.commit().await?;
                    return Ok(began);
                }
                Err(StoreError::Db(e)) if is_lock_conflict(&e) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::Contention("begin a consumption"))
    }

    async fn finish_consumption(
        &self,
        group: &ConsumerGroup,
        message_id: u64,
        ok: bool,
        error: Option<&str>,
    ) -> StoreResult<Finished> {
        for _ in 0..LEDGER_TRIES {
            let mut tx = self.pool.begin().await?;
            let finished = sql::finish_consumption::<MySql>(
                &mut tx,
                " FOR UPDATE",
                group,
                message_id,
                ok,
                error,
            );
            match finished.await {
                Ok((finished, raised)) => {
                    tx.commit().await?;
                    raised.announce();
                    return Ok(finished);
                }
                Err(StoreError::Db(e)) if is_lock_conflict(&e) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::Contention("finish a consumption"))
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

/// Tries of a ledger transaction that lost a deadlock before it gives up.
const LEDGER_TRIES: usize = 3;

impl MySqlStore {
    /// An operator's change of one message: `update` (binds `id`, `version`:
    /// its guard) and `audit`, in one transaction; the row as it is then.
    /// None when the guard matched nothing: the transaction ends at once,
    /// not when its connection is next used, so the row's lock cannot make a
    /// sweeper's SKIP LOCKED pass it by meanwhile.
    async fn operator_update(
        &self,
        update: String,
        id: u64,
        version: u64,
        audit: AuditRow,
    ) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(sqlx::AssertSqlSafe(update))
            .bind(id)
            .bind(version)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(None);
        }
        sql::insert_audits(&mut *tx, &[audit]).await?;
        let row = select_messages_by_ids(&mut *tx, &[id]).await?.pop();
        tx.commit().await?;
        Ok(row)
    }

    /// Reschedules a pending send after `delay`, recording `error` and adding
    /// `counted` (0 or 1) to its attempts.
    async fn retry_send_later(
        &self,
        id: u64,
        version: u64,
        error: &str,
        delay: Duration,
        counted: u32,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE messages SET send_attempts = send_attempts + ?, last_error = ?, \
             next_send_at = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, version = version + 1, \
             updated_at = UTC_TIMESTAMP(3) \
             WHERE id = ? AND version = ? AND status = 'COMMITTED' AND send_status = 'PENDING'",
        )
        .bind(counted)
        .bind(clip_error(error))
        .bind(micros(delay))
        .bind(id)
        .bind(version)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// [`MessageStore::transition_batch`] in one transaction when the batch is
    /// uniform (one by one otherwise, or when a guard lost its race). With
    /// `seen` (the rows as read at the guards), the audit rows go first and
    /// their `RETURNING created_at` is the clock the UPDATE binds, so the
    /// results are computed from `seen` instead of read back: one statement
    /// fewer.
    async fn transition_together(
        &self,
        ts: &[Transition],
        seen: Option<&[&Message]>,
    ) -> StoreResult<Vec<Option<Message>>> {
        // A lone transition with its row at hand still goes this way: the
        // audit INSERT's RETURNING stands in for the read-back, a round trip
        // fewer than `transition` (a quiet service decides one at a time).
        let lone_unseen = ts.len() < 2 && seen.is_none();
        if lone_unseen || !one_update(ts) {
            return super::transition_each(self, ts).await;
        }
        let audits: Vec<AuditRow> = ts.iter().filter_map(AuditRow::transition).collect();
        let mut tx = self.pool.begin().await?;
        // The clock the UPDATE binds, with the rows it applies to.
        let applied = match seen {
            // Producers' own decisions (of ordered messages) write no audit
            // row to read the clock from.
            Some(seen) if audits.is_empty() => Some((seen, self.decision_time(seen).await?)),
            Some(seen) => {
                let mut q = sql::audit_insert::<MySql>(&audits);
                q.push(" RETURNING created_at");
                let rows = q.build().fetch_all(&mut *tx).await?;
                let first = rows.first().ok_or(StoreError::Vanished(
                    "the audit rows of a decision batch returned nothing",
                ))?;
                Some((seen, first.try_get::<DateTime<Utc>, _>("created_at")?))
            }
            None => None,
        };
        let mut q = transition_update(&ts[0], applied.map(|(_, now)| now));
        push_guards(&mut q, ts);
        match q.build().execute(&mut *tx).await {
            Ok(done) if done.rows_affected() == ts.len() as u64 => {}
            // Some guard lost a race: which one is unknown from the count, so
            // undo and let each transition find out for itself.
            Ok(_) => {
                tx.rollback().await?;
                return super::transition_each(self, ts).await;
            }
            Err(e) if is_lock_conflict(&e) => {
                drop(tx);
                return super::transition_each(self, ts).await;
            }
            Err(e) => return Err(e.into()),
        }
        let mut results: Vec<Option<Message>> = match applied {
            Some((seen, now)) => seen
                .iter()
                .zip(ts)
                .map(|(m, t)| Some(transitioned(m, t, now)))
                .collect(),
            None => {
                sql::insert_audits(&mut *tx, &audits).await?;
                let ids: Vec<u64> = ts.iter().map(|t| t.id).collect();
                let rows = select_messages_by_ids(&mut *tx, &ids).await?;
                let by_id: HashMap<u64, Message> = rows.into_iter().map(|m| (m.id, m)).collect();
                ts.iter().map(|t| by_id.get(&t.id).cloned()).collect()
            }
        };
        let mut alerts = verify_failed_alerts(&results);
        // In order per key: the batch's ordered rows take their seqs
        // together (nothing runs for a batch without one).
        let ordered = sql::order_commit_batch::<MySql>(
            &mut tx,
            " ON DUPLICATE KEY UPDATE last_seq = last_seq + VALUES(last_seq), \
             updated_at = UTC_TIMESTAMP(3)",
            &mut results,
        )
        .await;
        match ordered {
            Ok(raised) => alerts.extend(raised),
            // A deadlock on a key row with another batch: undo, and let
            // each commit take its key on its own.
            Err(StoreError::Db(e)) if is_lock_conflict(&e) => {
                drop(tx);
                return super::transition_each(self, ts).await;
            }
            Err(e) => return Err(e),
        }
        let raised = sql::raise_alerts::<MySql>(&mut tx, alerts).await?;
        tx.commit().await?;
        raised.announce();
        Ok(results)
    }

    /// Producers' own decisions over the API of unordered messages, their
    /// rows at hand (`seen`; see [`decide_alone`]): one autocommit UPDATE
    /// and nothing else. Such a decision writes no audit row (the message
    /// row records it), takes no key's seq and raises no alert, so nothing
    /// else has to commit with it; the UPDATE binds the time [`DbClock`]
    /// tells (never earlier than what the rows hold), and the results are
    /// computed from `seen` rather than read back. When a guard lost its
    /// race, the rows this UPDATE changed are read back (each carries the
    /// version after `seen`'s, the new status and this batch's time); the
    /// others come back None, for the caller to decide one by one.
    async fn decide_together(
        &self,
        ts: &[Transition],
        seen: &[&Message],
    ) -> StoreResult<Vec<Option<Message>>> {
        let now = self.decision_time(seen).await?;
        let mut q = transition_update(&ts[0], Some(now));
        push_guards(&mut q, ts);
        let changed = match q.build().execute(&self.pool).await {
            Ok(done) => done.rows_affected(),
            // The statement was undone as a whole.
            Err(e) if is_lock_conflict(&e) => 0,
            Err(e) => return Err(e.into()),
        };
        let mine: HashSet<u64> = if changed == ts.len() as u64 {
            ts.iter().map(|t| t.id).collect()
        } else if changed == 0 {
            HashSet::new()
        } else {
            let ids: Vec<u64> = ts.iter().map(|t| t.id).collect();
            let now_rows: HashMap<u64, Message> = select_messages_by_ids(&self.pool, &ids)
                .await?
                .into_iter()
                .map(|m| (m.id, m))
                .collect();
            ts.iter()
                .filter(|t| {
                    now_rows.get(&t.id).is_some_and(|m| {
                        m.version == t.version + 1 && m.status == t.to && m.updated_at == now
                    })
                })
                .map(|t| t.id)
                .collect()
        };
        Ok(ts
            .iter()
            .zip(seen)
            .map(|(t, m)| mine.contains(&t.id).then(|| transitioned(m, t, now)))
            .collect())
    }

    /// The time a batch of producers' own decisions binds, whose rows are
    /// `seen`: the database clock as [`DbClock`] tells it, never earlier
    /// than what the rows hold.
    async fn decision_time(&self, seen: &[&Message]) -> StoreResult<DateTime<Utc>> {
        let read = async { self.now().await };
        Ok(seen
            .iter()
            .map(|m| m.updated_at)
            .fold(self.clock.now(read).await?, DateTime::max))
    }

    /// SELECT the due rows with SKIP LOCKED (and the database clock), push
    /// their due column out by the lease and bump versions, then quarantine
    /// the rows that cannot be read: all in one transaction, so the row locks
    /// keep other claimers off until the lease (or the quarantine) is written.
    /// A check-back lease depends on the row's producer: the registrations
    /// are read with a plain SELECT (READ COMMITTED: no lock, never waits), and
    /// the rows of one lease end are pushed out by one UPDATE. The claimed
    /// messages are the selected rows with the UPDATE's two changes applied
    /// here, so nothing is read twice.
    async fn claim_due(
        &self,
        kind: ClaimKind,
        limit: u32,
        room: PayloadRoom,
        lease: Lease,
    ) -> StoreResult<Claimed> {
        let due = kind.due_column();
        // A send claim whose rows might not all fit its room reads their
        // lengths first, then the payloads of the rows that fit.
        let sized = kind == ClaimKind::Sends && !room.fits_any(limit);
        let columns = if sized {
            sql::sized_columns()
        } else {
            kind.columns()
        };
        let mut tx = self.pool.begin().await?;
        // Decoded as they arrive, each raw row dropped at once: a claim of
        // large payloads holds them once, not as raw rows and messages both.
        let mut decoded = sql::ClaimedRows::new(sized);
        let mut claimed_at = None;
        {
            let mut rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {columns}, UTC_TIMESTAMP(3) AS claimed_at FROM messages \
                 WHERE {due} <= UTC_TIMESTAMP(3) AND {state} \
                 ORDER BY {due} LIMIT ? FOR UPDATE SKIP LOCKED",
                state = kind.state(),
            )))
            .bind(limit)
            .fetch(&mut *tx);
            while let Some(row) = rows.try_next().await? {
                if claimed_at.is_none() {
                    claimed_at = Some(row.try_get::<DateTime<Utc>, _>("claimed_at")?);
                }
                decoded.push(&row)?;
            }
        }
        // The rows past the room stay due: their locks go with the commit.
        let out_of_room = decoded.cut(room);
        let sql::Decoded {
            mut messages,
            mut unreadable,
            apart,
        } = decoded.rows;
        // The content of the rows taken, read now that they are locked: the
        // payloads in their rows for a claim that read the lengths first,
        // and the contents apart.
        // (Of the rows the room kept: the others stay due, unread.)
        let taken: HashSet<u64> = messages.iter().map(|m| m.id).collect();
        let apart: Vec<u64> = apart.into_iter().filter(|id| taken.contains(id)).collect();
        if sized {
            let inline: Vec<u64> = taken
                .difference(&apart.iter().copied().collect())
                .copied()
                .collect();
            sql::fill_payloads(&mut *tx, &mut messages, &inline).await?;
        }
        unreadable.extend(sql::fill_apart(&mut *tx, &mut messages, &apart).await?);
        let Some(claimed_at) =
            claimed_at.filter(|_| !(messages.is_empty() && unreadable.is_empty()))
        else {
            tx.commit().await?;
            return Ok(Claimed {
                out_of_room,
                ..Claimed::default()
            });
        };
        let timeouts = match lease {
            Lease::Verify(_) => producer_timeouts(&mut tx, &messages).await?,
            Lease::Every(_) => HashMap::new(),
        };
        let mut by_end: BTreeMap<DateTime<Utc>, Vec<u64>> = BTreeMap::new();
        for m in &mut messages {
            let until = lease_end(claimed_at, lease.span(timeouts.get(&m.biz_id).copied()));
            m.version += 1;
            match kind {
                ClaimKind::Sends => m.next_send_at = Some(until),
                ClaimKind::Verifies => m.next_verify_at = Some(until),
            }
            by_end.entry(until).or_default().push(m.id);
        }
        // Unreadable rows are claimed too (then quarantined below), for as
        // long as any row may be.
        if !unreadable.is_empty() {
            let longest = lease_end(claimed_at, lease.span(None));
            by_end
                .entry(longest)
                .or_default()
                .extend(unreadable.iter().map(|q| q.id));
        }
        for (until, ids) in &by_end {
            let mut q = QueryBuilder::<MySql>::new(format!("UPDATE messages SET {due} = "));
            q.push_bind(*until)
                .push(", version = version + 1 WHERE id IN (");
            let mut sep = q.separated(", ");
            for id in ids {
                sep.push_bind(*id);
            }
            q.push(")");
            q.build().execute(&mut *tx).await?;
        }
        let (quarantined, raised) = if unreadable.is_empty() {
            Default::default()
        } else {
            sql::quarantine::<MySql>(&mut tx, kind, unreadable).await?
        };
        tx.commit().await?;
        raised.announce();
        Ok(Claimed {
            messages,
            quarantined,
            claimed_at: Some(claimed_at),
            out_of_room,
        })
    }
}

/// Whether `ts` can go as one UPDATE: at least one, all to the same state
/// with the same lease, attempt count and error, each row once.
fn one_update(ts: &[Transition]) -> bool {
    let uniform = ts.windows(2).all(|w| {
        (w[0].to, w[0].send_lease, w[0].verify_attempt, &w[0].error)
            == (w[1].to, w[1].send_lease, w[1].verify_attempt, &w[1].error)
    });
    let distinct: HashSet<u64> = ts.iter().map(|t| t.id).collect();
    !ts.is_empty() && uniform && distinct.len() == ts.len()
}

/// Whether `ts`, with their rows `seen`, are decisions that need nothing
/// but their UPDATE ([`MySqlStore::decide_together`]): one UPDATE's worth of
/// producers' own decisions ([`sql::producer_decides`]), none of them the
/// commit of an ordered message (which takes its key's seq in the same
/// transaction).
fn decide_alone(ts: &[Transition], seen: &[&Message]) -> bool {
    one_update(ts)
        && ts.iter().zip(seen).all(|(t, m)| {
            sql::producer_decides(t) && !(t.to == MessageStatus::Committed && m.order_key.is_some())
        })
}

/// The guard of a batched [`transition_update`]: each row still at the
/// state and version its transition was made from.
fn push_guards(q: &mut QueryBuilder<MySql>, ts: &[Transition]) {
    // The ids alone first: MariaDB 10.11 scans the whole table for an
    // UPDATE whose only condition is a row IN of a single tuple, and may
    // range over another index for several; `id IN` keeps it on the key.
    q.push(" WHERE id IN (");
    let mut sep = q.separated(", ");
    for t in ts {
        sep.push_bind(t.id);
    }
    q.push(") AND (id, status, version) IN (");
    let mut sep = q.separated(", ");
    for t in ts {
        sep.push("(")
            .push_bind_unseparated(t.id)
            .push_unseparated(", ")
            .push_bind_unseparated(t.from.as_str())
            .push_unseparated(", ")
            .push_bind_unseparated(t.version)
            .push_unseparated(")");
    }
    q.push(")");
}

/// The check-back timeout of each registered producer of `messages`, read
/// with a plain SELECT: a claim never locks a producer row, so it neither
/// waits for nor skips rows because of a registration someone is changing.
/// A registration that cannot be read counts as none (the claim then covers
/// the longest call there may be).
async fn producer_timeouts(
    conn: &mut sqlx::MySqlConnection,
    messages: &[Message],
) -> StoreResult<HashMap<String, u32>> {
    let biz_ids: HashSet<&str> = messages.iter().map(|m| m.biz_id.as_str()).collect();
    if biz_ids.is_empty() {
        return Ok(HashMap::new());
    }
    let mut q = QueryBuilder::<MySql>::new(
        "SELECT biz_id, verify_timeout_ms FROM producers WHERE biz_id IN (",
    );
    let mut sep = q.separated(", ");
    for biz_id in biz_ids {
        sep.push_bind(biz_id);
    }
    q.push(")");
    let rows = q.build().fetch_all(conn).await?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            Some((
                r.text("biz_id").ok()?,
                r.unsigned("verify_timeout_ms").ok()?,
            ))
        })
        .collect())
}

/// From this many ordered SENT marks on, a batch moves its keys on with a
/// few statements for all of them ([`mark_sent_ordered_together`]) instead
/// of four per mark.
const ORDERED_MARKS_TOGETHER: usize = 3;

/// The guarded SENT UPDATE of `marks`, one statement for the lot.
fn mark_sent_statement(marks: &[SentMark]) -> QueryBuilder<MySql> {
    // One statement for the whole batch: the marks become a derived table
    // joined on (id, version), the claim's guard, so each row takes the
    // partition and offset of its own claim's mark (a batch may also hold
    // a stale owner's mark for the same id, which joins nothing). A join
    // costs one primary-key lookup per mark, where a CASE per column
    // compared every row with every mark.
    let mut q = QueryBuilder::<MySql>::new("UPDATE messages m JOIN (");
    for (i, mark) in marks.iter().enumerate() {
        q.push(if i == 0 {
            "SELECT "
        } else {
            " UNION ALL SELECT "
        })
        .push_bind(mark.id)
        .push(if i == 0 { " AS id, " } else { ", " })
        .push_bind(mark.version)
        .push(if i == 0 { " AS version, " } else { ", " })
        .push_bind(mark.partition)
        .push(if i == 0 {
            " AS kafka_partition, "
        } else {
            ", "
        })
        .push_bind(mark.offset)
        .push(if i == 0 { " AS kafka_offset" } else { "" });
    }
    q.push(
        ") s ON m.id = s.id AND m.version = s.version \
         SET m.send_status = 'SENT', m.next_send_at = NULL, m.sent_at = UTC_TIMESTAMP(3), \
         m.updated_at = UTC_TIMESTAMP(3), m.send_attempts = m.send_attempts + 1, \
         m.kafka_partition = s.kafka_partition, m.kafka_offset = s.kafka_offset, \
         m.version = m.version + 1, m.headroom = NULL \
         WHERE m.status = 'COMMITTED' AND m.send_status = 'PENDING'",
    );
    q
}

/// The SENT marks of ordered messages, on `tx`, with five statements
/// whatever their number (see `sql/ordering.rs` for what each mark does):
/// the marks' keys locked in key order; the marks; every key whose head
/// is among the marked and now SENT moved on; those heads' `ordered_seqs`
/// rows deleted; each moved key's next message, if it waits, made due.
async fn mark_sent_ordered_together(
    tx: &mut sqlx::MySqlConnection,
    marks: &[SentMark],
) -> StoreResult<u64> {
    let keys: std::collections::BTreeSet<[u8; 32]> = marks
        .iter()
        .filter_map(|m| m.order.map(|p| p.key))
        .collect();
    let push_keys = |q: &mut QueryBuilder<MySql>| {
        let mut sep = q.separated(", ");
        for key in &keys {
            sep.push_bind(key.to_vec());
        }
    };
    let mut q =
        QueryBuilder::<MySql>::new("SELECT order_key FROM ordered_keys WHERE order_key IN (");
    push_keys(&mut q);
    q.push(") ORDER BY order_key FOR UPDATE");
    q.build().fetch_all(&mut *tx).await?;
    let matched = mark_sent_statement(marks)
        .build()
        .execute(&mut *tx)
        .await?
        .rows_affected();
    let mut q = QueryBuilder::<MySql>::new(
        "UPDATE ordered_keys k JOIN messages m ON m.order_key = k.order_key \
         AND m.order_seq = k.sent_through + 1 \
         SET k.sent_through = m.order_seq, k.updated_at = UTC_TIMESTAMP(3) \
         WHERE m.send_status = 'SENT' AND m.id IN (",
    );
    let mut sep = q.separated(", ");
    for mark in marks {
        sep.push_bind(mark.id);
    }
    q.push(") AND k.order_key IN (");
    push_keys(&mut q);
    q.push(")");
    q.build().execute(&mut *tx).await?;
    let mut q = QueryBuilder::<MySql>::new(
        "DELETE s FROM ordered_seqs s JOIN ordered_keys k \
         ON s.order_key = k.order_key AND s.seq = k.sent_through WHERE k.order_key IN (",
    );
    push_keys(&mut q);
    q.push(")");
    q.build().execute(&mut *tx).await?;
    let mut q = QueryBuilder::<MySql>::new(format!(
        "UPDATE messages m JOIN ordered_seqs s ON s.message_id = m.id \
         JOIN ordered_keys k ON s.order_key = k.order_key AND s.seq = k.sent_through + 1 \
         SET m.{due}, m.version = m.version + 1 \
         WHERE m.status = 'COMMITTED' AND m.send_status = 'PENDING' \
         AND m.next_send_at IS NULL AND k.order_key IN (",
        due = sql::promoted_due::<MySql>(),
    ));
    push_keys(&mut q);
    q.push(")");
    q.build().execute(&mut *tx).await?;
    Ok(matched)
}

/// The commit half of in order per key (see `sql/ordering.rs`): seqs for
/// the ordered rows among `rows`, which have just become COMMITTED, in the
/// commit's transaction.
async fn order_commits(
    conn: &mut sqlx::MySqlConnection,
    rows: &mut [Message],
) -> StoreResult<Vec<NewAlert>> {
    if !rows.iter().any(|m| m.order_key.is_some()) {
        return Ok(Vec::new());
    }
    sql::order_commits::<MySql>(
        conn,
        "INSERT INTO ordered_keys (order_key, last_seq, sent_through, updated_at) \
         VALUES (?, 1, 0, UTC_TIMESTAMP(3)) \
         ON DUPLICATE KEY UPDATE last_seq = last_seq + 1, updated_at = UTC_TIMESTAMP(3)",
        rows,
    )
    .await
}

/// The alerts of the rows among `rows` that a transition has just made
/// VERIFY_FAILED.
fn verify_failed_alerts<'a>(rows: impl IntoIterator<Item = &'a Option<Message>>) -> Vec<NewAlert> {
    rows.into_iter()
        .flatten()
        .filter(|m| m.status == MessageStatus::VerifyFailed)
        .map(|m| NewAlert::failed(AlertKind::VerifyFailed, m))
        .collect()
}

/// When a claim taken at `claimed_at` (the database clock) runs out, to the
/// millisecond `DATETIME(3)` stores, so the claimed message and its row agree.
/// A lease past the calendar ends at its last millisecond.
fn lease_end(claimed_at: DateTime<Utc>, lease: Duration) -> DateTime<Utc> {
    // DATETIME's last value, 9999-12-31 23:59:59.999.
    let last = chrono::NaiveDate::from_ymd_opt(9999, 12, 31)
        .and_then(|d| d.and_hms_milli_opt(23, 59, 59, 999))
        .expect("a valid date")
        .and_utc();
    i64::try_from(lease.as_millis())
        .ok()
        .and_then(chrono::TimeDelta::try_milliseconds)
        .and_then(|d| claimed_at.checked_add_signed(d))
        .map_or(last, |t| t.min(last))
}

/// How an upsert of `flow_minutes` names the value proposed for column `c`.
fn proposed_flow_value(c: &str) -> String {
    format!("VALUES({c})")
}

#[cfg(test)]
mod tests {
    use super::takes_insert_returning;

    #[test]
    fn insert_returning_is_used_on_mariadb_from_10_5_only() {
        assert!(takes_insert_returning("10.11.19-MariaDB-0+deb12u1"));
        assert!(takes_insert_returning("11.4.2-MariaDB"));
        assert!(takes_insert_returning("10.5.0-MariaDB-log"));
        assert!(!takes_insert_returning("10.4.34-MariaDB"));
        assert!(!takes_insert_returning("8.0.36"));
        assert!(!takes_insert_returning("8.4.0-0ubuntu0.24.04.1"));
    }
}
