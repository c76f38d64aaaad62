//! The statements whose SQL is the same on MySQL and SQLite, one function
//! each, named for its effect; a backend's `Store` method calls them with
//! its pool or transaction.

use chrono::{DateTime, Utc};
use sqlx::{Executor, QueryBuilder};
use trustmsg_verify_api::MessageView;

use super::alerts::raise_alerts;
use super::claim::ClaimKind;
use super::effects::clip_to;
use super::row::{lossy_text, message_from_row, producer_from_row, SqlRow};
use super::row::{MESSAGE_COLUMNS, PRODUCER_COLUMNS, STATE_COLUMNS};
use super::{Bind, Dialect};
use crate::store::{
    Backlog, CheckAttempt, CheckAttemptEntry, Message, MessageFilter, NewAlert, Overdue, Producer,
    ProducerSummary, StoreResult, Wait, CHECK_ATTEMPTS_KEPT,
};

/// [`crate::store::Store::flag_overdue`]: reads the candidates, then flags each with
/// an UPDATE guarded by the flag and the state, so of several instances
/// scanning at once exactly one flags (and alerts) each message. Each kind
/// of wait has its own flag (a message alerted `verify_overdue` can still be
/// alerted `send_overdue`), which an operator's redeliver or re-verify
/// clears. The flag and the message's alert are written in one transaction,
/// and the alert is announced after it commits. A quarantined row (its due
/// column NULL) has had its alert already.
pub(in crate::store) async fn flag_overdue<D>(
    pool: &sqlx::Pool<D>,
    wait: Wait,
    older_than: std::time::Duration,
    limit: u32,
) -> StoreResult<Vec<Overdue>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
    String: Bind<D>,
    Option<String>: Bind<D>,
    &'static str: Bind<D>,
{
    let (kind, since, attempts, flag) = match wait {
        Wait::Send => (
            ClaimKind::Sends,
            "decided_at",
            "send_attempts",
            "send_overdue_alerted",
        ),
        Wait::Decision => (
            ClaimKind::Verifies,
            "created_at",
            "verify_attempts",
            "verify_overdue_alerted",
        ),
    };
    let state = kind.state();
    // An operator's redeliver or re-verify starts the wait again; a send
    // delayed to `deliver_at` waits from then, not from its commit.
    let later = match wait {
        Wait::Send => format!(", COALESCE(deliver_at, {since})"),
        Wait::Decision => String::new(),
    };
    let since = format!(
        "{}({since}, COALESCE(requeued_at, {since}){later})",
        D::GREATEST
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT id, biz_id, message_key, {attempts} AS attempts, {since} AS since, last_error \
         FROM messages WHERE {state} AND {due} IS NOT NULL AND {flag} = 0 \
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
        let mut tx = pool.begin().await?;
        let done = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE messages SET {flag} = 1 WHERE id = ? AND {flag} = 0 AND {state}"
        )))
        .bind(D::int(id))
        .execute(&mut *tx)
        .await?;
        if D::rows_affected(&done) != 1 {
            continue;
        }
        // Read leniently: an alert about a row that is partly unreadable
        // still names it.
        let overdue = Overdue {
            id,
            biz_id: lossy_text(row, "biz_id"),
            message_key: lossy_text(row, "message_key"),
            attempts: row.unsigned("attempts").unwrap_or(0),
            since: row.opt_time("since").ok().flatten(),
            last_error: row.opt_text("last_error").ok().flatten(),
        };
        let alert = NewAlert::overdue(wait, older_than, &overdue);
        let raised = raise_alerts::<D>(&mut tx, vec![alert]).await?;
        tx.commit().await?;
        raised.announce();
        flagged.push(overdue);
    }
    Ok(flagged)
}

/// What [`crate::store::Store::send_now`] sets (`now` is the dialect's
/// clock) on a committed, PENDING row (`id`, `version`) whose `deliver_at`
/// is still ahead: its delivery time now (so its wait counts from now),
/// version bumped, and due now, unless it is an ordered message waiting
/// behind its key's head (`next_send_at` NULL): that one keeps waiting for
/// the head, and then goes at once.
pub(in crate::store) fn send_now_update(now: &str) -> String {
    format!(
        "UPDATE messages SET \
         next_send_at = CASE WHEN next_send_at IS NULL THEN NULL ELSE {now} END, \
         deliver_at = {now}, \
         version = version + 1, updated_at = {now} \
         WHERE id = ? AND version = ? AND status = 'COMMITTED' AND send_status = 'PENDING' \
         AND deliver_at > {now}"
    )
}

/// [`crate::store::Store::release_sends`]: one guarded UPDATE for the lot.
/// The ids alone come first so MariaDB finds the rows by the primary key.
pub(in crate::store) async fn release_sends<D>(
    pool: &sqlx::Pool<D>,
    claims: &[(u64, u64)],
) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    if claims.is_empty() {
        return Ok(0);
    }
    let mut q = QueryBuilder::<D>::new(format!(
        "UPDATE messages SET next_send_at = {} \
         WHERE status = 'COMMITTED' AND send_status = 'PENDING' AND id IN (",
        D::NOW
    ));
    let mut ids = q.separated(", ");
    for (id, _) in claims {
        ids.push_bind(D::int(*id));
    }
    q.push(") AND (");
    let mut guards = q.separated(" OR ");
    for (id, version) in claims {
        guards
            .push("(id = ")
            .push_bind_unseparated(D::int(*id))
            .push_unseparated(" AND version = ")
            .push_bind_unseparated(D::int(*version))
            .push_unseparated(")");
    }
    q.push(")");
    Ok(D::rows_affected(&q.build().execute(pool).await?))
}

/// [`crate::store::Store::list_messages`]: the filter's conditions, a keyset bound
/// and `ORDER BY id DESC`, reading no content: an empty payload, and its
/// length as the prepare recorded it (read from the payload only for a row
/// from before that record, whose payload is in the row).
pub(in crate::store) async fn list_messages<D>(
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
    let mut q = QueryBuilder::<D>::new(format!(
        "SELECT {STATE_COLUMNS}, X'' AS payload, '{{}}' AS headers, \
         CAST(COALESCE(payload_bytes, LENGTH(payload)) AS SIGNED) AS payload_size \
         FROM messages WHERE 1 = 1"
    ));
    push_filter(&mut q, f);
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

/// Appends ` AND …` for each condition of `f`, for the operators' list and
/// their bulk actions alike.
pub(in crate::store) fn push_filter<D>(q: &mut QueryBuilder<D>, f: &MessageFilter)
where
    D: Dialect,
    String: Bind<D>,
    &'static str: Bind<D>,
{
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
}

/// The states an operator may still have to act on, as SQL. Their rows are
/// the backlog, so counting them reads index ranges whose size is the
/// backlog's, never the table's (`idx_messages_state`, migration 0008).
const LIVE: &str = "(status IN ('PREPARED', 'VERIFY_FAILED') \
     OR (status = 'COMMITTED' AND send_status IN ('PENDING', 'SEND_FAILED')))";

/// 1 for a committed message whose send waits for a `deliver_at` still in
/// the future, else 0: scheduled, reported apart from the backlog.
fn scheduled<D: Dialect>() -> String {
    format!(
        "CASE WHEN send_status = 'PENDING' AND deliver_at > {} THEN 1 ELSE 0 END",
        D::NOW
    )
}

/// Since when a PENDING send has waited: its commit, or its `deliver_at` if
/// that came later (as the overdue watch counts it).
fn send_wait_since<D: Dialect>() -> String {
    format!(
        "{}(decided_at, COALESCE(deliver_at, decided_at))",
        D::GREATEST
    )
}

/// [`crate::store::Store::summary`]: two statements, neither of which reads
/// the finished rows that make up most of the table. The live states are
/// counted exactly from their index ranges; the finished ones only over the
/// last `recent`, from the `(status, send_status, updated_at, biz_id)` index
/// alone (no row is read), so the cost follows the recent throughput, not the
/// table's size.
pub(in crate::store) async fn summary<D>(
    pool: &sqlx::Pool<D>,
    recent: std::time::Duration,
) -> StoreResult<Vec<ProducerSummary>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    i64: Bind<D>,
{
    let live = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT biz_id, status, send_status, {SCHEDULED} AS scheduled, COUNT(*) AS n, \
         MIN(created_at) AS oldest_created, MIN({SEND_WAIT_SINCE}) AS oldest_decided \
         FROM messages WHERE {LIVE} GROUP BY biz_id, status, send_status, scheduled",
        SCHEDULED = scheduled::<D>(),
        SEND_WAIT_SINCE = send_wait_since::<D>(),
    )))
    .fetch_all(pool)
    .await?;
    // `send_status IS NULL` pins the index's second column, so `updated_at`
    // bounds the ROLLED_BACK range as it does the SENT one.
    let since = format!("{}{}", D::NOW, D::MINUS_SPAN);
    let finished = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT biz_id, status, COUNT(*) AS n FROM messages \
         WHERE (status = 'COMMITTED' AND send_status = 'SENT' AND updated_at >= {since}) \
         OR (status = 'ROLLED_BACK' AND send_status IS NULL AND updated_at >= {since}) \
         GROUP BY biz_id, status"
    )))
    .bind(D::span(recent))
    .bind(D::span(recent))
    .fetch_all(pool)
    .await?;
    let older = |a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>| match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let mut by_biz: std::collections::BTreeMap<String, ProducerSummary> = Default::default();
    fn entry(
        by_biz: &mut std::collections::BTreeMap<String, ProducerSummary>,
        biz_id: String,
    ) -> &mut ProducerSummary {
        by_biz
            .entry(biz_id.clone())
            .or_insert_with(|| ProducerSummary {
                biz_id,
                ..Default::default()
            })
    }
    for row in &live {
        let status = row.text("status")?;
        let send = row.opt_text("send_status")?;
        let n = u64::try_from(row.opt_i64("n")?.unwrap_or(0)).unwrap_or(0);
        let s = entry(&mut by_biz, row.text("biz_id")?);
        if row.opt_i64("scheduled")?.unwrap_or(0) != 0 {
            s.scheduled += n;
            continue;
        }
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
    for row in &finished {
        let status = row.text("status")?;
        let n = u64::try_from(row.opt_i64("n")?.unwrap_or(0)).unwrap_or(0);
        let s = entry(&mut by_biz, row.text("biz_id")?);
        if status == "ROLLED_BACK" {
            s.rolled_back_recently += n;
        } else {
            s.sent_recently += n;
        }
    }
    Ok(by_biz.into_values().collect())
}

/// [`crate::store::Store::record_check_attempts`]: one multi-row INSERT, and for
/// the calls past the bound one DELETE of their messages' oldest.
pub(in crate::store) async fn record_check_attempts<D>(
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

/// [`crate::store::Store::check_attempts`].
pub(in crate::store) async fn check_attempts<D>(
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

/// [`crate::store::Store::purge_finished`], given a transaction on the backend:
/// the finished messages, then the settled alerts.
pub(in crate::store) async fn purge_finished<D>(
    conn: &mut D::Connection,
    older_than: std::time::Duration,
    limit: u32,
) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
{
    let messages = purge_finished_messages::<D>(&mut *conn, older_than, limit).await?;
    let alerts = purge_settled_alerts::<D>(&mut *conn, older_than, limit).await?;
    Ok(messages + alerts)
}

/// The finished messages of [`purge_finished`], with their audit,
/// check-attempt and ledger rows and their content kept apart.
async fn purge_finished_messages<D>(
    conn: &mut D::Connection,
    older_than: std::time::Duration,
    limit: u32,
) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
{
    let Some(list) = stale_ids::<D>(&mut *conn, "messages", FINISHED, older_than, limit).await?
    else {
        return Ok(0);
    };
    // A message's consumption ledger rows go with it, as its audit rows and
    // its content kept apart do.
    for table in [
        "audit_log",
        "check_attempts",
        "consumptions",
        "message_payloads",
    ] {
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

/// Where an alert is settled (delivered, or without a webhook): only those
/// are ever deleted.
const SETTLED: &str = "state IN ('delivered', 'no_webhook')";

/// The outbox's share of [`purge_finished`]: up to `limit` settled alerts
/// unchanged for longer than `older_than`. A pending alert is never deleted,
/// however old: it has not reached anyone yet.
async fn purge_settled_alerts<D>(
    conn: &mut D::Connection,
    older_than: std::time::Duration,
    limit: u32,
) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
{
    let Some(list) = stale_ids::<D>(&mut *conn, "alerts", SETTLED, older_than, limit).await? else {
        return Ok(0);
    };
    let done = sqlx::query(sqlx::AssertSqlSafe(format!(
        "DELETE FROM alerts WHERE id IN ({list}) AND {SETTLED}"
    )))
    .execute(&mut *conn)
    .await?;
    Ok(D::rows_affected(&done))
}

/// The ids of up to `limit` rows of `table` where `condition` holds and that
/// are unchanged for longer than `older_than` (lowest first), as an SQL list
/// of numbers; None when there are none. The ids are numbers this query
/// read, so the list is safe to splice into the DELETEs that follow.
async fn stale_ids<D>(
    conn: &mut D::Connection,
    table: &str,
    condition: &str,
    older_than: std::time::Duration,
    limit: u32,
) -> StoreResult<Option<String>>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
{
    let ids: Vec<u64> = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT id FROM {table} WHERE {condition} AND updated_at < {}{} ORDER BY id LIMIT ?",
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
    Ok((!ids.is_empty()).then(|| {
        ids.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }))
}

/// [`crate::store::Store::backlog`].
pub(in crate::store) async fn backlog<D>(pool: &sqlx::Pool<D>) -> StoreResult<Backlog>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT status, send_status, {} AS scheduled, COUNT(*) AS n, \
         MIN(created_at) AS oldest_created, MIN({}) AS oldest_decided, {} AS now FROM messages \
         WHERE status IN ('PREPARED', 'VERIFY_FAILED') \
         OR (status = 'COMMITTED' AND send_status IN ('PENDING', 'SEND_FAILED')) \
         GROUP BY status, send_status, scheduled",
        scheduled::<D>(),
        send_wait_since::<D>(),
        D::NOW
    )))
    .fetch_all(pool)
    .await?;
    let mut b = Backlog::default();
    for row in &rows {
        let status = row.text("status")?;
        let send = row.opt_text("send_status")?;
        let n = u64::try_from(row.opt_i64("n")?.unwrap_or(0)).unwrap_or(0);
        if row.opt_i64("scheduled")?.unwrap_or(0) != 0 {
            b.scheduled += n;
            continue;
        }
        if status == "PREPARED" {
            b.oldest_prepared_at = row.opt_time("oldest_created")?;
        }
        if send.as_deref() == Some("PENDING") {
            b.oldest_pending_send_at = row.opt_time("oldest_decided")?;
        }
        b.counts.push((status, send, n));
    }
    let alerts = sqlx::query(
        "SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM alerts WHERE state = 'pending'",
    )
    .fetch_one(pool)
    .await?;
    b.pending_alerts = u64::try_from(alerts.opt_i64("n")?.unwrap_or(0)).unwrap_or(0);
    b.oldest_pending_alert_at = alerts.opt_time("oldest")?;
    b.waiting_commits = super::waiting::count_waiting_commits(pool).await?;
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

/// [`crate::store::Store::list_producers`].
pub(in crate::store) async fn list_producers<D>(pool: &sqlx::Pool<D>) -> StoreResult<Vec<Producer>>
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

/// The cheapest statement that proves the database answers.
pub(in crate::store) async fn ping<'c, D, E>(exec: E) -> StoreResult<()>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
{
    sqlx::query("SELECT 1").execute(exec).await?;
    Ok(())
}

/// The message holding (biz_id, message_key).
pub(in crate::store) async fn find_message<'c, D, E>(
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
pub(in crate::store) async fn find_producer<'c, D, E>(
    exec: E,
    biz_id: &str,
) -> StoreResult<Option<Producer>>
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
pub(in crate::store) async fn delete_producer<'c, D, E>(exec: E, biz_id: &str) -> StoreResult<bool>
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
pub(in crate::store) async fn set_producer_token<'c, D, E>(
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
