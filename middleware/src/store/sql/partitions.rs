//! Time partitions (issue 60; migration 0020 made them): `messages` and the
//! tables that hang off it are partitioned by RANGE of the message id, and
//! the ids are handed out a period at a time. Period `n` holds the ids from
//! `n << PERIOD_BITS` on; when a period has lasted `--partition-period`, the
//! round below moves the id counter to the next period's first id, so each
//! partition holds the messages created in one period, with their audit,
//! check-back, ledger and content rows. Retention then drops a partition
//! whole once every message in it is finished and unchanged for the
//! retention window, instead of deleting its rows one by one.
//!
//! What an operator may still act on is never dropped: a partition past
//! retention that still holds a PREPARED, VERIFY_FAILED, PENDING or
//! SEND_FAILED message waits, and meanwhile its finished rows are deleted
//! one by one (the held ceiling, [`PartitionRound::held`]), so that only the
//! rows waiting for someone stay; it goes when they are settled.
//!
//! The key a prepare is idempotent by, (biz_id, message_key), is unique in
//! `message_keys` (migration 0020's trigger writes it with the message). A
//! dropped partition's keys are deleted afterwards, a batch at a time,
//! by message id range, so a key is taken for as long as its message
//! exists, and a little longer.
//!
//! One instance at a time makes, moves and drops (a lock of the database's
//! own, tried and never waited for); every statement that changes a table's
//! layout gives up after 2 s ([`PartitionDdl::DDL_WAIT_SQL`]) rather than make the traffic queue
//! behind it, and is tried again on the next round. Each step is one
//! statement that either happened or did not, and the round works out from
//! what the tables hold what is left to do, so a crash at any point leaves
//! nothing half done that the next round does not finish.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::Executor;

use super::retention::WAITING;
use super::row::SqlRow;
use super::{stmt, Bind, Dialect};
use crate::store::{
    ArchiveRange, OldestPartition, PartitionPlan, PartitionRound, StoreError, StoreResult,
};

/// Ids per period: period `n` takes ids from `n << PERIOD_BITS` on, 4.3
/// billion of them, and the 48 bits of a shard's ids (`shards::ID_BITS`)
/// hold 65,536 periods.
pub(in crate::store) const PERIOD_BITS: u32 = 32;

/// The tables partitioned by message id: each with the column it is
/// partitioned by. `messages` last: it is dropped after what hangs off it,
/// so a partition of `messages` exists for as long as any of its children.
pub(in crate::store) const PARTITIONED: [(&str, &str); 5] = [
    ("audit_log", "message_id"),
    ("check_attempts", "message_id"),
    ("consumptions", "message_id"),
    ("message_payloads", "message_id"),
    ("messages", "id"),
];

/// Partitions made ahead of the one taking new messages, so that moving the
/// ids on never waits for a partition to be made.
pub(in crate::store) const AHEAD: u64 = 2;

/// Keys of a dropped partition deleted per statement.
const KEY_BATCH: u32 = 5_000;

/// Key batches per round (a million keys): the rest waits for the next
/// round. A prepare that meets a key of a message that has left frees it
/// itself (`sql::free_stale_key`), so the wait costs only room.
const KEY_BATCHES: u32 = 200;

/// The period id `id` belongs to.
pub(in crate::store) fn period_of(id: u64) -> u64 {
    id >> PERIOD_BITS
}

/// The first id of period `period`.
pub(in crate::store) fn first_id(period: u64) -> u64 {
    period << PERIOD_BITS
}

/// What a dialect says differently about partitions: where to read them,
/// how to make, drop and lock them, and how to move the id counter.
pub(in crate::store) trait PartitionDdl: Dialect
where
    for<'e> &'e mut Self::Connection: Executor<'e, Database = Self>,
{
    /// Sets what this connection's changes of layout wait at most for the
    /// locks they need: 2 s.
    const DDL_WAIT_SQL: &'static str;
    /// Tries the upkeep's lock on this connection, without waiting: one
    /// row, `locked` 1 when taken.
    const TRY_LOCK: &'static str;
    /// Lets the upkeep's lock go.
    const UNLOCK: &'static str;
    /// A query naming `table`'s partitions (one of ours): the text of each
    /// row's [`PartitionDdl::PARTITION_NAMES_COLUMN`] holds names that
    /// [`PartitionDdl::partition_names_in`] finds and [`partition_period`]
    /// reads.
    fn partition_names(table: &str) -> String;
    /// The column of [`PartitionDdl::partition_names`]' rows to read.
    const PARTITION_NAMES_COLUMN: &'static str;
    /// The partition names in one row's text: by default, the text is one.
    fn partition_names_in(text: &str) -> Vec<String> {
        vec![text.to_owned()]
    }
    /// The statement that adds `table`'s partition of `period`: the ids
    /// from its first to the next period's first. A period's partitions
    /// are made in order, so on MySQL (where a partition takes every id
    /// from the end of the one before) the two say the same.
    fn add_partition(table: &str, period: u64) -> String;
    /// The statement that drops `table`'s partition of `period`.
    fn drop_partition(table: &str, period: u64) -> String;
    /// The statement that makes the next message id `first`.
    fn move_ids(first: u64) -> String;
    /// A query of the next message id the counter will hand out, as
    /// `next` (0 where it cannot say).
    const NEXT_ID: &'static str;
    /// One statement deleting up to `limit` keys whose message id is in
    /// [`from`, `to`): three parameters, from, to and limit.
    const DELETE_KEYS: &'static str;
}

/// The period a partition's name names: `p<n>` on MySQL, `<table>_p<n>` on
/// PostgreSQL.
pub(in crate::store) fn partition_period(name: &str) -> Option<u64> {
    name.rsplit_once('p')
        .filter(|(head, _)| head.is_empty() || head.ends_with('_'))
        .and_then(|(_, n)| n.parse().ok())
}

/// [`crate::store::HousekeepingStore::keep_partitions`] on a partitioned
/// backend: one round of [`keep`] on a connection taken out of `pool` for
/// it and closed after (the lock and the layout changes' wait are the
/// connection's, and go with it whatever happens), and, when this instance
/// led it, the held ceiling the row purge reads ([`held_below`]) set anew.
pub(in crate::store) async fn upkeep<D>(
    pool: &sqlx::Pool<D>,
    held_below: &AtomicU64,
    plan: &PartitionPlan,
) -> StoreResult<PartitionRound>
where
    D: PartitionDdl,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
    String: Bind<D>,
    &'static str: Bind<D>,
{
    let mut conn = pool.acquire().await?.detach();
    let round = keep::<D>(&mut conn, plan).await;
    let _ = sqlx::Connection::close(conn).await;
    let round = round?;
    if round.led {
        let ceiling = round.held.iter().max().map_or(0, |p| first_id(p + 1));
        held_below.store(ceiling, Ordering::Relaxed);
    }
    Ok(round)
}

/// [`crate::store::HousekeepingStore::mark_archived`]: records that the
/// messages of `period` below `through` are archived (never moving back).
pub(in crate::store) async fn mark_archived<D>(
    pool: &sqlx::Pool<D>,
    period: u64,
    through: u64,
) -> StoreResult<()>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    sqlx::query(stmt::<D>(
        "UPDATE message_partitions SET archived_through = ? WHERE period = ? \
         AND (archived_through IS NULL OR archived_through < ?)",
    ))
    .bind(D::int(through))
    .bind(D::int(period))
    .bind(D::int(through))
    .execute(pool)
    .await?;
    Ok(())
}

/// The oldest partition still there: the first period opened and not
/// dropped, with when the next one opened.
pub(in crate::store) async fn oldest_partition<D>(
    pool: &sqlx::Pool<D>,
) -> StoreResult<Option<OldestPartition>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    let rows = sqlx::query(stmt::<D>(
        "SELECT period, opened_at FROM message_partitions WHERE dropped_at IS NULL \
         ORDER BY period LIMIT 2",
    ))
    .fetch_all(pool)
    .await?;
    let Some(first) = rows.first() else {
        return Ok(None);
    };
    Ok(Some(OldestPartition {
        period: first.unsigned("period")?,
        from: first.time("opened_at")?,
        to: rows.get(1).map(|next| next.time("opened_at")).transpose()?,
    }))
}

/// Where the row purge of a partitioned backend stops: the end of the
/// newest partition held past retention (0: none is, and no message is
/// deleted row by row).
pub(in crate::store) fn held_below(held_below: &AtomicU64) -> Option<u64> {
    Some(held_below.load(Ordering::Relaxed))
}

/// One round of upkeep on `conn` (a connection of its own: the lock is
/// the connection's): when this instance gets the lock, makes the
/// partitions ahead, moves the ids to the next period when the current one
/// has lasted `plan.period`, drops what retention lets go, and deletes the
/// keys of what was dropped; then reads what there is. Without the lock
/// only reads.
pub(in crate::store) async fn keep<D>(
    conn: &mut D::Connection,
    plan: &PartitionPlan,
) -> StoreResult<PartitionRound>
where
    D: PartitionDdl,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
    String: Bind<D>,
    &'static str: Bind<D>,
{
    let mut round = PartitionRound {
        partitioned: true,
        ..PartitionRound::default()
    };
    let locked = sqlx::query(D::TRY_LOCK)
        .fetch_one(&mut *conn)
        .await?
        .opt_i64("locked")?;
    round.led = locked == Some(1);
    if round.led {
        let done = lead::<D>(&mut *conn, plan, &mut round).await;
        sqlx::query(D::UNLOCK).execute(&mut *conn).await?;
        done?;
    }
    let open = opened::<D>(&mut *conn).await?;
    round.current = open.last().map(|p| p.period);
    round.partitions = open.iter().filter(|p| p.dropped_at.is_none()).count() as u64;
    round.oldest_opened_at = open
        .iter()
        .find(|p| p.dropped_at.is_none())
        .map(|p| p.opened_at);
    Ok(round)
}

/// A row of `message_partitions`.
struct Opened {
    period: u64,
    opened_at: DateTime<Utc>,
    archived_through: Option<u64>,
    /// When its archive began: a change after it is not in the archive.
    archived_at: Option<DateTime<Utc>>,
    dropped_at: Option<DateTime<Utc>>,
}

/// Every period opened, oldest first.
async fn opened<D>(conn: &mut D::Connection) -> StoreResult<Vec<Opened>>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
{
    sqlx::query(stmt::<D>(
        "SELECT period, opened_at, archived_through, archived_at, dropped_at \
         FROM message_partitions ORDER BY period",
    ))
    .fetch_all(&mut *conn)
    .await?
    .iter()
    .map(|row| {
        Ok(Opened {
            period: row.unsigned("period")?,
            opened_at: row.time("opened_at")?,
            archived_through: row.opt_u64("archived_through")?,
            archived_at: row.opt_time("archived_at")?,
            dropped_at: row.opt_time("dropped_at")?,
        })
    })
    .collect()
}

/// The work of the instance holding the lock.
async fn lead<D>(
    conn: &mut D::Connection,
    plan: &PartitionPlan,
    round: &mut PartitionRound,
) -> StoreResult<()>
where
    D: PartitionDdl,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
    String: Bind<D>,
    &'static str: Bind<D>,
{
    sqlx::query(D::DDL_WAIT_SQL).execute(&mut *conn).await?;
    let now: DateTime<Utc> = sqlx::query(stmt::<D>(format!("SELECT {} AS now", D::NOW)))
        .fetch_one(&mut *conn)
        .await?
        .time("now")?;
    let open = opened::<D>(&mut *conn).await?;
    // The period the counter is in: the last opened, or later when the ids
    // were moved on by something else (a shard's id floor).
    let top = top_period::<D>(&mut *conn).await?;
    let mut current = open.last().map(|p| (p.period, p.opened_at));
    if current.is_none_or(|(period, _)| period < top) {
        open_period::<D>(&mut *conn, top).await?;
        current = Some((top, now));
    }
    let (mut period, since) = current.expect("a period is open");
    make_ahead::<D>(&mut *conn, period, plan.ahead).await?;
    if plan.period <= (now - since).to_std().unwrap_or_default() {
        period += 1;
        // The next period's partitions exist (made ahead): the ids move
        // into them, and only then is the period recorded as open.
        sqlx::raw_sql(sqlx::AssertSqlSafe(D::move_ids(first_id(period))))
            .execute(&mut *conn)
            .await?;
        open_period::<D>(&mut *conn, period).await?;
        round.opened = Some(period);
        make_ahead::<D>(&mut *conn, period, plan.ahead).await?;
    }
    if let Some(retention) = plan.retention {
        let open = opened::<D>(&mut *conn).await?;
        drop_expired::<D>(&mut *conn, &open, now, retention, plan.archive, round).await?;
    }
    round.keys_deleted = delete_dropped_keys::<D>(&mut *conn).await?;
    Ok(())
}

/// The period of the highest id taken or about to be.
async fn top_period<D>(conn: &mut D::Connection) -> StoreResult<u64>
where
    D: PartitionDdl,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
{
    let top = sqlx::query(stmt::<D>("SELECT MAX(id) AS top FROM messages"))
        .fetch_one(&mut *conn)
        .await?
        .opt_u64("top")?
        .unwrap_or(0);
    let next = sqlx::query(D::NEXT_ID)
        .fetch_one(&mut *conn)
        .await?
        .opt_u64("next")?
        .unwrap_or(0);
    Ok(period_of(top.max(next.saturating_sub(1))))
}

/// Makes the partitions ready for the ids about to be handed out, from
/// `at_least` (a shard's first id) on: the period they are in recorded as
/// open and its partitions made, with [`AHEAD`] more. Run after the
/// migrations and after a shard's ids are moved to its floor, so that no
/// message finds no partition before the first upkeep; under the upkeep's
/// lock, waited for (instances starting together make them once).
pub(in crate::store) async fn make_ready<D>(pool: &sqlx::Pool<D>, at_least: u64) -> StoreResult<()>
where
    D: PartitionDdl,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
    &'static str: Bind<D>,
{
    let mut conn = pool.acquire().await?.detach();
    let done = async {
        sqlx::query(D::DDL_WAIT_SQL).execute(&mut conn).await?;
        let mut tries = 0;
        while sqlx::query(D::TRY_LOCK)
            .fetch_one(&mut conn)
            .await?
            .opt_i64("locked")?
            != Some(1)
        {
            tries += 1;
            if tries == LOCK_TRIES {
                return Err(StoreError::Unavailable(
                    "another instance held the time partitions' lock for a minute".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let open = opened::<D>(&mut conn).await?;
        let period = top_period::<D>(&mut conn).await?.max(period_of(at_least));
        if open.last().is_none_or(|p| p.period < period) {
            open_period::<D>(&mut conn, period).await?;
        }
        let current = open.last().map_or(period, |p| p.period.max(period));
        make_ahead::<D>(&mut conn, current, AHEAD).await
    }
    .await;
    let _ = sqlx::Connection::close(conn).await;
    done
}

/// Tries of the lock [`make_ready`] makes, 100 ms apart.
const LOCK_TRIES: u32 = 600;

/// Records `period` as open now (once).
async fn open_period<D>(conn: &mut D::Connection, period: u64) -> StoreResult<()>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
{
    sqlx::query(stmt::<D>(format!(
        "{} INTO message_partitions (period, opened_at) VALUES (?, {}){}",
        D::INSERT_IGNORE,
        D::NOW,
        D::IGNORED
    )))
    .bind(D::int(period))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Makes the partitions of periods `period` to `period + ahead` in every
/// partitioned table where they are missing.
async fn make_ahead<D>(conn: &mut D::Connection, period: u64, ahead: u64) -> StoreResult<()>
where
    D: PartitionDdl,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    &'static str: Bind<D>,
{
    for (table, _) in PARTITIONED {
        let have = periods::<D>(&mut *conn, table).await?;
        let Some(&last) = have.last() else {
            // Not partitioned (a migration not applied yet): nothing to make.
            continue;
        };
        for p in (last + 1).max(period)..=period + ahead {
            sqlx::raw_sql(sqlx::AssertSqlSafe(D::add_partition(table, p)))
                .execute(&mut *conn)
                .await?;
        }
    }
    Ok(())
}

/// Whether migration 0020 (time partitions) is applied: its online steps
/// (`mysql::upgrade`, `postgres::upgrade`) run only before.
pub(in crate::store) async fn partitions_migrated<D>(conn: &mut D::Connection) -> StoreResult<bool>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
{
    let applied = format!(
        "SELECT version FROM _sqlx_migrations WHERE version = {} AND success",
        crate::store::migrations::TIME_PARTITIONS
    );
    Ok(sqlx::query(sqlx::AssertSqlSafe(applied))
        .fetch_optional(&mut *conn)
        .await?
        .is_some())
}

/// The periods `table` has partitions for, in order.
pub(in crate::store) async fn periods<D>(
    conn: &mut D::Connection,
    table: &'static str,
) -> StoreResult<Vec<u64>>
where
    D: PartitionDdl,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
{
    let texts: Vec<String> = sqlx::query(stmt::<D>(D::partition_names(table)))
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|row| row.text(D::PARTITION_NAMES_COLUMN))
        .collect::<StoreResult<_>>()?;
    let mut periods: Vec<u64> = texts
        .iter()
        .flat_map(|text| D::partition_names_in(text))
        .filter_map(|n| partition_period(&n))
        .collect();
    periods.sort_unstable();
    Ok(periods)
}

/// Drops, oldest first, the partitions of the periods that ended more than
/// `retention` ago and hold only finished messages unchanged for as long;
/// notes in `round` the ones held by a message waiting for someone, and,
/// with `archive`, the ones whose messages are not all archived yet.
async fn drop_expired<D>(
    conn: &mut D::Connection,
    open: &[Opened],
    now: DateTime<Utc>,
    retention: Duration,
    archive: bool,
    round: &mut PartitionRound,
) -> StoreResult<()>
where
    D: PartitionDdl,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
    &'static str: Bind<D>,
{
    let live: Vec<&Opened> = open.iter().filter(|p| p.dropped_at.is_none()).collect();
    for pair in live.windows(2) {
        let (this, next) = (pair[0], pair[1]);
        // Every message of `this` was created before `next` opened.
        let ended = (now - next.opened_at).to_std().unwrap_or_default();
        if ended < retention {
            break;
        }
        let (from, to) = (first_id(this.period), first_id(next.period));
        // The first partition also holds every id below its period's.
        let from = if std::ptr::eq(this, live[0]) { 0 } else { from };
        if holds::<D>(&mut *conn, MESSAGES, from, to, WAITING, None).await? {
            round.held.push(this.period);
            continue;
        }
        if holds::<D>(
            &mut *conn,
            MESSAGES,
            from,
            to,
            CHANGED_SINCE,
            Some(retention),
        )
        .await?
        {
            // Finished, but not long enough ago: it waits.
            continue;
        }
        let archived = this.archived_through.unwrap_or(from);
        if archive && archived < to {
            if this.archived_at.is_none() {
                // Its archive begins: what changes from now on is not in it.
                sqlx::query(stmt::<D>(format!(
                    "UPDATE message_partitions SET archived_at = {} WHERE period = ? \
                     AND archived_at IS NULL",
                    D::NOW
                )))
                .bind(D::int(this.period))
                .execute(&mut *conn)
                .await?;
            }
            round.to_archive.push(ArchiveRange {
                period: this.period,
                from: archived,
                to,
            });
            continue;
        }
        if archive && changed_since_archived::<D>(&mut *conn, this, now, from, to).await? {
            // Archived as it was: archived again as it is before it goes.
            sqlx::query(stmt::<D>(
                "UPDATE message_partitions SET archived_through = NULL, archived_at = NULL \
                 WHERE period = ?",
            ))
            .bind(D::int(this.period))
            .execute(&mut *conn)
            .await?;
            tracing::info!(
                period = this.period,
                "a partition changed after it was archived; it is archived again before it is dropped"
            );
            continue;
        }
        // With any partition made ahead for a period that never opened
        // (the ids jumped past it): it is empty, and in the same range.
        for (table, _) in PARTITIONED {
            for p in periods::<D>(&mut *conn, table).await? {
                if (this.period..next.period).contains(&p) {
                    sqlx::raw_sql(sqlx::AssertSqlSafe(D::drop_partition(table, p)))
                        .execute(&mut *conn)
                        .await?;
                }
            }
        }
        sqlx::query(stmt::<D>(format!(
            "UPDATE message_partitions SET dropped_at = {} WHERE period = ?",
            D::NOW
        )))
        .bind(D::int(this.period))
        .execute(&mut *conn)
        .await?;
        round.dropped.push(this.period);
    }
    Ok(())
}

/// Whether a message of the archived period `this` ([`from`, `to`)), or
/// a consumer's ledger row of one, changed since its archive began (an
/// operator's redelivery, a consumer's begin of an old message): the
/// archive would miss it. A second's slack covers the statements between
/// the clock reads. The ledger has no index on `updated_at`: this reads
/// the partition's ledger rows, once, before the drop. What changes
/// between this and the drop (milliseconds) is not seen.
async fn changed_since_archived<D>(
    conn: &mut D::Connection,
    this: &Opened,
    now: DateTime<Utc>,
    from: u64,
    to: u64,
) -> StoreResult<bool>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
{
    let Some(began) = this.archived_at else {
        // Archived by a release that did not note when: taken as it is.
        return Ok(false);
    };
    let since = (now - began).to_std().unwrap_or_default() + Duration::from_secs(1);
    Ok(
        // Every message in it is finished (nothing waits): the status index's ranges.
        holds::<D>(&mut *conn, MESSAGES, from, to, CHANGED_SINCE, Some(since)).await?
            || holds::<D>(&mut *conn, LEDGER, from, to, "updated_at >= ?", Some(since)).await?,
    )
}

/// The tables [`holds`] asks, with their message id column.
const MESSAGES: (&str, &str) = ("messages", "id");
const LEDGER: (&str, &str) = ("consumptions", "message_id");

/// A finished message changed since a bound time (twice: `?` is the time),
/// as ranges of the status index (status, send_status, updated_at), so that
/// asking it of a partition past retention reads no row of it.
const CHANGED_SINCE: &str = "((status = 'COMMITTED' AND send_status = 'SENT' AND updated_at >= ?) \
     OR (status = 'ROLLED_BACK' AND send_status IS NULL AND updated_at >= ?))";

/// Whether a row of `table` with a message id in [`from`, `to`) matches
/// `condition` (of `messages`, as ranges of the status index). With
/// `within`, each `?` of `condition` is the time that long ago.
async fn holds<D>(
    conn: &mut D::Connection,
    (table, id): (&str, &str),
    from: u64,
    to: u64,
    condition: &str,
    within: Option<Duration>,
) -> StoreResult<bool>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
{
    let since = format!("{}{}", D::NOW, D::MINUS_SPAN);
    let mut q = sqlx::query(stmt::<D>(format!(
        "SELECT {id} FROM {table} WHERE {id} >= ? AND {id} < ? AND {} LIMIT 1",
        condition.replace('?', &since)
    )))
    .bind(D::int(from))
    .bind(D::int(to));
    if let Some(within) = within {
        for _ in 0..condition.matches('?').count() {
            q = q.bind(D::span(within));
        }
    }
    Ok(q.fetch_optional(&mut *conn).await?.is_some())
}

/// Deletes the keys of dropped periods, [`KEY_BATCH`] at a time and at most
/// [`KEY_BATCHES`] batches; a period whose keys are all gone leaves
/// `message_partitions`. Returns how many keys went.
async fn delete_dropped_keys<D>(conn: &mut D::Connection) -> StoreResult<u64>
where
    D: PartitionDdl,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
{
    let open = opened::<D>(&mut *conn).await?;
    let mut deleted = 0;
    let mut batches = 0;
    for (i, p) in open.iter().enumerate() {
        if p.dropped_at.is_none() {
            continue;
        }
        let from = if i == 0 { 0 } else { first_id(p.period) };
        let to = open
            .get(i + 1)
            .map_or(u64::MAX >> 1, |next| first_id(next.period));
        loop {
            if batches == KEY_BATCHES {
                return Ok(deleted);
            }
            batches += 1;
            let done = sqlx::query(stmt::<D>(D::DELETE_KEYS))
                .bind(D::int(from))
                .bind(D::int(to))
                .bind(i64::from(KEY_BATCH))
                .execute(&mut *conn)
                .await?;
            let n = D::rows_affected(&done);
            deleted += n;
            if n < u64::from(KEY_BATCH) {
                break;
            }
        }
        sqlx::query(stmt::<D>("DELETE FROM message_partitions WHERE period = ?"))
            .bind(D::int(p.period))
            .execute(&mut *conn)
            .await?;
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_names_name_their_period() {
        assert_eq!(partition_period("p0"), Some(0));
        assert_eq!(partition_period("p17"), Some(17));
        assert_eq!(partition_period("messages_p3"), Some(3));
        assert_eq!(partition_period("message_payloads_p65536"), Some(65_536));
        assert_eq!(partition_period("pmax"), None);
        assert_eq!(partition_period("messages"), None);
    }

    #[test]
    fn a_period_is_a_range_of_ids() {
        assert_eq!(period_of(1), 0);
        assert_eq!(period_of(first_id(5)), 5);
        assert_eq!(period_of(first_id(5) - 1), 4);
    }
}
