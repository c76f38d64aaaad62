//! The consumption ledger (issue 30): consumer groups, each group's
//! consumption of each message, the alerts it raises and the counts
//! operators read. Written once for both backends; a backend gives only how
//! it keeps an existing row on the INSERT that makes sure a consumption row
//! exists (`keep`: MySQL's `ON DUPLICATE KEY UPDATE`, which X-locks the
//! existing row, SQLite's `ON CONFLICT DO NOTHING` under its write lock) and
//! how it locks the row it reads (`lock`: ` FOR UPDATE`, or nothing on SQLite,
//! whose `BEGIN IMMEDIATE` holds the single write lock already).
//!
//! Why a begin is exact: it first INSERTs the row if it is missing, with
//! `attempts = 0`, a value no committed row ever has (the begin sets it to 1
//! before it commits). The INSERT locks the row, new or existing, until the
//! transaction ends, so of two concurrent begins of one (group, message) the
//! second waits for the first, then reads what it left: one `go`, one
//! `in_progress`. No begin reads a row and decides without holding its lock.

use sqlx::{Executor, QueryBuilder};
use trustmsg_verify_api::admin::AlertKind;
use trustmsg_verify_api::consumers::ConsumptionState;

use super::alerts::{raise_alerts, Raised};
use super::effects::clip_error;
use super::row::SqlRow;
use super::{stmt, Bind, Dialect};
use crate::store::{
    Began, ConsumerGroup, ConsumerGroupCounts, ConsumerGroupRecord, Consumption, Finished,
    NewAlert, StoreError, StoreResult, StuckConsumption,
};

/// The columns [`group_from_row`] reads; [`bind_group`] binds the first five.
pub(in crate::store) const GROUP_COLUMNS: &str = "group_name, topics, token_hash, max_failures, \
    in_progress_timeout_ms, created_at, updated_at";

/// The columns [`consumption_from_row`] reads.
const CONSUMPTION_COLUMNS: &str = "group_name, message_id, state, attempts, last_error, \
    first_began_at, last_began_at, finished_at, updated_at";

/// Decodes a row selected with [`GROUP_COLUMNS`].
pub(in crate::store) fn group_from_row(row: &impl SqlRow) -> StoreResult<ConsumerGroup> {
    Ok(ConsumerGroup {
        name: row.text("group_name")?,
        topics: topics_from_json(&row.text("topics")?)?,
        token_hash: row.bytes("token_hash")?,
        max_failures: row.unsigned("max_failures")?,
        in_progress_timeout_ms: row.unsigned("in_progress_timeout_ms")?,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
    })
}

fn topics_from_json(json: &str) -> StoreResult<Vec<String>> {
    serde_json::from_str(json).map_err(|e| {
        StoreError::Corrupt(format!(
            "consumer_groups.topics is not a JSON list of strings: {e}"
        ))
    })
}

/// Binds what a registration stores, in [`GROUP_COLUMNS`] order.
pub(in crate::store) fn bind_group<'q, D>(
    q: super::Query<'q, D>,
    g: &ConsumerGroupRecord,
) -> super::Query<'q, D>
where
    D: Dialect,
    String: Bind<D>,
    Vec<u8>: Bind<D>,
    i64: Bind<D>,
{
    q.bind(g.name.clone())
        .bind(serde_json::to_string(&g.topics).expect("a string list serialises"))
        .bind(g.token_hash.clone())
        .bind(i64::from(g.max_failures))
        .bind(i64::from(g.in_progress_timeout_ms))
}

fn consumption_from_row(row: &impl SqlRow) -> StoreResult<Consumption> {
    let state = row.text("state")?;
    Ok(Consumption {
        group: row.text("group_name")?,
        message_id: row.unsigned("message_id")?,
        state: ConsumptionState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown consumption state {state:?}")))?,
        attempts: row.unsigned("attempts")?,
        last_error: row.opt_text("last_error")?,
        first_began_at: row.time("first_began_at")?,
        last_began_at: row.time("last_began_at")?,
        finished_at: row.opt_time("finished_at")?,
        updated_at: row.time("updated_at")?,
    })
}

/// The registration of `name`.
pub(in crate::store) async fn find_consumer_group<'c, D, E>(
    exec: E,
    name: &str,
) -> StoreResult<Option<ConsumerGroup>>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
    String: Bind<D>,
{
    sqlx::query(stmt::<D>(format!(
        "SELECT {GROUP_COLUMNS} FROM consumer_groups WHERE group_name = ?"
    )))
    .bind(name.to_string())
    .fetch_optional(exec)
    .await?
    .as_ref()
    .map(group_from_row)
    .transpose()
}

/// [`crate::store::RegistryStore::list_consumer_groups`].
pub(in crate::store) async fn list_consumer_groups<'c, D, E>(
    exec: E,
) -> StoreResult<Vec<ConsumerGroup>>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
{
    sqlx::query(stmt::<D>(format!(
        "SELECT {GROUP_COLUMNS} FROM consumer_groups ORDER BY group_name"
    )))
    .fetch_all(exec)
    .await?
    .iter()
    .map(group_from_row)
    .collect()
}

/// [`crate::store::RegistryStore::delete_consumer_group`].
pub(in crate::store) async fn delete_consumer_group<'c, D, E>(
    exec: E,
    name: &str,
) -> StoreResult<bool>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
    String: Bind<D>,
{
    let done = sqlx::query(stmt::<D>(
        "DELETE FROM consumer_groups WHERE group_name = ?",
    ))
    .bind(name.to_string())
    .execute(exec)
    .await?;
    Ok(D::rows_affected(&done) == 1)
}

/// [`crate::store::RegistryStore::set_consumer_group_token`].
pub(in crate::store) async fn set_consumer_group_token<'c, D, E>(
    exec: E,
    name: &str,
    token_hash: &[u8],
) -> StoreResult<bool>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
    String: Bind<D>,
    Vec<u8>: Bind<D>,
{
    let done = sqlx::query(stmt::<D>(format!(
        "UPDATE consumer_groups SET token_hash = ?, updated_at = {} WHERE group_name = ?",
        D::NOW
    )))
    .bind(token_hash.to_vec())
    .bind(name.to_string())
    .execute(exec)
    .await?;
    Ok(D::rows_affected(&done) == 1)
}

/// The producer and key of message `id`, if it exists (for the alerts).
async fn message_names<D>(
    conn: &mut D::Connection,
    id: u64,
) -> StoreResult<Option<(String, String)>>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
{
    let Some(row) = sqlx::query(stmt::<D>(
        "SELECT biz_id, message_key FROM messages WHERE id = ?",
    ))
    .bind(D::int(id))
    .fetch_optional(&mut *conn)
    .await?
    else {
        return Ok(None);
    };
    Ok(Some((row.text("biz_id")?, row.text("message_key")?)))
}

/// The consumption row of (`group`, `id`) with `lock` appended, and whether
/// its hold has run out (database clock).
async fn locked_row<D>(
    conn: &mut D::Connection,
    lock: &str,
    group: &str,
    id: u64,
) -> StoreResult<Option<(Consumption, bool, bool)>>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    String: Bind<D>,
{
    let Some(row) = sqlx::query(stmt::<D>(format!(
        "SELECT {CONSUMPTION_COLUMNS}, failing_alerted, \
         CASE WHEN expires_at <= {now} THEN 1 ELSE 0 END AS expired \
         FROM consumptions WHERE group_name = ? AND message_id = ?{lock}",
        now = D::NOW
    )))
    .bind(group.to_string())
    .bind(D::int(id))
    .fetch_optional(&mut *conn)
    .await?
    else {
        return Ok(None);
    };
    let expired = row.opt_i64("expired")?.unwrap_or(0) != 0;
    Ok(Some((
        consumption_from_row(&row)?,
        expired,
        row.flag("failing_alerted")?,
    )))
}

/// [`crate::store::LedgerStore::begin_consumption`] on `conn`, a transaction the
/// caller commits (see the module docs for `keep` and `lock`).
pub(in crate::store) async fn begin<D>(
    conn: &mut D::Connection,
    keep: &str,
    lock: &str,
    group: &ConsumerGroup,
    id: u64,
) -> StoreResult<Began>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    String: Bind<D>,
    i64: Bind<D>,
{
    if message_names::<D>(&mut *conn, id).await?.is_none() {
        return Ok(Began::UnknownMessage);
    }
    sqlx::query(stmt::<D>(format!(
        "INSERT INTO consumptions (group_name, message_id, state, attempts, first_began_at, \
         last_began_at, updated_at) VALUES (?, ?, 'in_progress', 0, {now}, {now}, {now}) {keep}",
        now = D::NOW
    )))
    .bind(group.name.clone())
    .bind(D::int(id))
    .execute(&mut *conn)
    .await?;
    let (row, expired, _) = locked_row::<D>(&mut *conn, lock, &group.name, id)
        .await?
        .ok_or(StoreError::Vanished("a consumption row just written"))?;
    let go = row.attempts == 0
        || row.state == ConsumptionState::Failed
        || (row.state == ConsumptionState::InProgress && expired);
    if !go {
        return Ok(match row.state {
            ConsumptionState::Done => Began::Done(row),
            _ => Began::InProgress(row),
        });
    }
    sqlx::query(stmt::<D>(format!(
        "UPDATE consumptions SET state = 'in_progress', attempts = attempts + 1, \
         last_began_at = {now}, finished_at = NULL, expires_at = {now}{plus}, \
         stuck_alerted = FALSE, updated_at = {now} WHERE group_name = ? AND message_id = ?",
        now = D::NOW,
        plus = D::PLUS_SPAN,
    )))
    .bind(D::span(group.in_progress_timeout()))
    .bind(group.name.clone())
    .bind(D::int(id))
    .execute(&mut *conn)
    .await?;
    let (row, _, _) = locked_row::<D>(&mut *conn, lock, &group.name, id)
        .await?
        .ok_or(StoreError::Vanished("a consumption row just written"))?;
    Ok(Began::Go(row))
}

/// [`crate::store::LedgerStore::finish_consumption`] on `conn`, a transaction the
/// caller commits and then announces the alerts of.
pub(in crate::store) async fn finish<D>(
    conn: &mut D::Connection,
    lock: &str,
    group: &ConsumerGroup,
    id: u64,
    ok: bool,
    error: Option<&str>,
) -> StoreResult<(Finished, Raised)>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    String: Bind<D>,
    Option<String>: Bind<D>,
    &'static str: Bind<D>,
    i64: Bind<D>,
{
    let none = Raised::default();
    let Some((biz_id, message_key)) = message_names::<D>(&mut *conn, id).await? else {
        return Ok((Finished::UnknownMessage, none));
    };
    let Some((row, _, failing_alerted)) =
        locked_row::<D>(&mut *conn, lock, &group.name, id).await?
    else {
        return Ok((Finished::NotBegun, none));
    };
    match (row.state, ok) {
        (ConsumptionState::InProgress, _) => {}
        (ConsumptionState::Done, true) | (ConsumptionState::Failed, false) => {
            return Ok((
                Finished::Recorded {
                    row,
                    changed: false,
                },
                none,
            ));
        }
        _ => return Ok((Finished::Conflict(row), none)),
    }
    let error = error.map(|e| clip_error(e).to_string());
    if ok {
        sqlx::query(stmt::<D>(format!(
            "UPDATE consumptions SET state = 'done', finished_at = {now}, expires_at = NULL, \
             updated_at = {now} WHERE group_name = ? AND message_id = ?",
            now = D::NOW
        )))
        .bind(group.name.clone())
        .bind(D::int(id))
        .execute(&mut *conn)
        .await?;
    } else {
        sqlx::query(stmt::<D>(format!(
            "UPDATE consumptions SET state = 'failed', last_error = ?, finished_at = {now}, \
             expires_at = NULL, failing_alerted = CASE WHEN attempts >= ? THEN TRUE \
             ELSE failing_alerted END, updated_at = {now} \
             WHERE group_name = ? AND message_id = ?",
            now = D::NOW
        )))
        .bind(error.clone())
        .bind(i64::from(group.max_failures))
        .bind(group.name.clone())
        .bind(D::int(id))
        .execute(&mut *conn)
        .await?;
    }
    let (row, _, _) = locked_row::<D>(&mut *conn, lock, &group.name, id)
        .await?
        .ok_or(StoreError::Vanished("a consumption row just written"))?;
    // The flag is set under the row lock by the failure that reaches the
    // limit first, so its alert is raised once per message and group.
    let alerts = if !ok && !failing_alerted && row.attempts >= group.max_failures {
        vec![NewAlert {
            kind: AlertKind::ConsumptionFailing,
            message_id: id,
            biz_id,
            message_key,
            attempts: row.attempts,
            last_error: format!(
                "consumer group {:?} failed to process this message {} time(s) (max_failures \
                 {}); last error: {}",
                group.name,
                row.attempts,
                group.max_failures,
                row.last_error.as_deref().unwrap_or("none given")
            ),
            group: Some(group.name.clone()),
        }]
    } else {
        Vec::new()
    };
    let raised = raise_alerts::<D>(&mut *conn, alerts).await?;
    Ok((Finished::Recorded { row, changed: true }, raised))
}

/// [`crate::store::LedgerStore::consumptions_of`].
pub(in crate::store) async fn consumptions_of<'c, D, E>(
    exec: E,
    id: u64,
) -> StoreResult<Vec<Consumption>>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
{
    sqlx::query(stmt::<D>(format!(
        "SELECT {CONSUMPTION_COLUMNS} FROM consumptions WHERE message_id = ? ORDER BY group_name"
    )))
    .bind(D::int(id))
    .fetch_all(exec)
    .await?
    .iter()
    .map(consumption_from_row)
    .collect()
}

/// The consumption-ledger rows of the messages in `list` (an SQL list of
/// ids), by message id, each by group name, with `lock` appended (a
/// deletion holds them while it compares them with what it archived).
pub(in crate::store) async fn consumptions_in<D>(
    conn: &mut D::Connection,
    list: &str,
    lock: &str,
) -> StoreResult<std::collections::HashMap<u64, Vec<Consumption>>>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
{
    let mut rows: std::collections::HashMap<u64, Vec<Consumption>> = Default::default();
    for row in sqlx::query(stmt::<D>(format!(
        "SELECT {CONSUMPTION_COLUMNS} FROM consumptions WHERE message_id IN ({list}) \
         ORDER BY message_id, group_name{lock}"
    )))
    .fetch_all(&mut *conn)
    .await?
    .iter()
    {
        let c = consumption_from_row(row)?;
        rows.entry(c.message_id).or_default().push(c);
    }
    Ok(rows)
}

/// [`crate::store::LedgerStore::flag_stuck_consumptions`]: reads the candidates
/// (an index range over unflagged expired holds), then flags each with an
/// UPDATE guarded by the flag, the state and the attempt it was read at (a
/// takeover counts an attempt), so of several instances exactly one flags
/// (and alerts) each begin; flag and alert in one transaction.
pub(in crate::store) async fn flag_stuck<D>(
    pool: &sqlx::Pool<D>,
    limit: u32,
) -> StoreResult<Vec<StuckConsumption>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    String: Bind<D>,
    Option<String>: Bind<D>,
    &'static str: Bind<D>,
    i64: Bind<D>,
{
    let rows = sqlx::query(stmt::<D>(format!(
        "SELECT c.group_name, c.message_id, c.attempts, c.last_began_at, c.last_error, \
         m.biz_id, m.message_key, g.in_progress_timeout_ms \
         FROM consumptions c JOIN messages m ON m.id = c.message_id \
         LEFT JOIN consumer_groups g ON g.group_name = c.group_name \
         WHERE c.stuck_alerted = FALSE AND c.expires_at <= {} ORDER BY c.expires_at LIMIT ?",
        D::NOW
    )))
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    let mut flagged = Vec::new();
    for row in &rows {
        let stuck = StuckConsumption {
            group: row.text("group_name")?,
            message_id: row.unsigned("message_id")?,
            attempts: row.unsigned("attempts")?,
            since: row.time("last_began_at")?,
        };
        let mut tx = pool.begin().await?;
        let done = sqlx::query(stmt::<D>(
            "UPDATE consumptions SET stuck_alerted = TRUE WHERE group_name = ? AND message_id = ? \
             AND stuck_alerted = FALSE AND state = 'in_progress' AND attempts = ?",
        ))
        .bind(stuck.group.clone())
        .bind(D::int(stuck.message_id))
        .bind(i64::from(stuck.attempts))
        .execute(&mut *tx)
        .await?;
        if D::rows_affected(&done) != 1 {
            continue;
        }
        let timeout = row
            .opt_u64("in_progress_timeout_ms")?
            .map_or_else(|| "its timeout".to_string(), |ms| format!("{ms} ms"));
        let alert = NewAlert {
            kind: AlertKind::ConsumptionStuck,
            message_id: stuck.message_id,
            biz_id: row.text("biz_id")?,
            message_key: row.text("message_key")?,
            attempts: stuck.attempts,
            last_error: format!(
                "consumer group {:?} began processing this message at {} (attempt {}) and has \
                 neither finished nor been taken over within {timeout}; last error: {}",
                stuck.group,
                stuck.since.to_rfc3339(),
                stuck.attempts,
                row.opt_text("last_error")?.as_deref().unwrap_or("none")
            ),
            group: Some(stuck.group.clone()),
        };
        let raised = raise_alerts::<D>(&mut tx, vec![alert]).await?;
        tx.commit().await?;
        raised.announce();
        flagged.push(stuck);
    }
    Ok(flagged)
}

/// The first topic name after every name that starts with `prefix`: topic
/// names are ASCII below DEL, so `prefix` + DEL bounds the range.
fn prefix_end(prefix: &str) -> String {
    format!("{prefix}\u{7f}")
}

/// [`crate::store::LedgerStore::consumer_group_counts`]: one grouped count over
/// the ledger's (group, state) index, then per group one count of the
/// messages SENT to its topics since its registration without a `done` row,
/// each topic (or prefix) a range of the (topic, sent_at) index; `*` scans
/// every message sent since then.
pub(in crate::store) async fn consumer_group_counts<D>(
    pool: &sqlx::Pool<D>,
) -> StoreResult<Vec<ConsumerGroupCounts>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    String: Bind<D>,
{
    let groups = list_consumer_groups(pool).await?;
    let mut out: std::collections::BTreeMap<String, ConsumerGroupCounts> = groups
        .iter()
        .map(|g| {
            (
                g.name.clone(),
                ConsumerGroupCounts {
                    group: g.name.clone(),
                    topics: g.topics.clone(),
                    ..Default::default()
                },
            )
        })
        .collect();
    let rows = sqlx::query(stmt::<D>(
        "SELECT group_name, state, COUNT(*) AS n FROM consumptions GROUP BY group_name, state",
    ))
    .fetch_all(pool)
    .await?;
    for row in &rows {
        let Some(c) = out.get_mut(&row.text("group_name")?) else {
            continue; // the rows of a deleted group
        };
        let n = u64::try_from(row.opt_i64("n")?.unwrap_or(0)).unwrap_or(0);
        match ConsumptionState::parse(&row.text("state")?) {
            Some(ConsumptionState::Done) => c.processed = n,
            Some(ConsumptionState::Failed) => c.failing = n,
            Some(ConsumptionState::InProgress) => c.in_progress = n,
            None => {}
        }
    }
    for g in &groups {
        let mut q =
            QueryBuilder::<D>::new("SELECT COUNT(*) AS n FROM messages m WHERE m.sent_at >= ");
        q.push_bind(D::time(g.created_at));
        if !g.topics.iter().any(|t| t == "*") {
            q.push(" AND (");
            let mut any = q.separated(" OR ");
            for t in &g.topics {
                match t.strip_suffix('*') {
                    Some(prefix) => {
                        any.push("(m.topic >= ")
                            .push_bind_unseparated(prefix.to_string())
                            .push_unseparated(" AND m.topic < ")
                            .push_bind_unseparated(prefix_end(prefix))
                            .push_unseparated(")");
                    }
                    None => {
                        any.push("m.topic = ").push_bind_unseparated(t.clone());
                    }
                }
            }
            q.push(")");
        }
        q.push(" AND NOT EXISTS (SELECT 1 FROM consumptions c WHERE c.group_name = ")
            .push_bind(g.name.clone())
            .push(" AND c.message_id = m.id AND c.state = 'done')");
        let row = q.build().fetch_one(pool).await?;
        if let Some(c) = out.get_mut(&g.name) {
            c.lag = u64::try_from(row.opt_i64("n")?.unwrap_or(0)).unwrap_or(0);
        }
    }
    Ok(out.into_values().collect())
}
