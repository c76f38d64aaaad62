//! Claims on MySQL: `SELECT … FOR UPDATE SKIP LOCKED` then one UPDATE of
//! the due column by lease end, in one transaction, so concurrent
//! instances split the due rows instead of queueing on each other's locks;
//! the unreadable rows quarantined in the same transaction. Messages (sends
//! and check-backs), alerts and waiting commits are claimed here.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use sqlx::mysql::MySqlRow;
use sqlx::{MySql, QueryBuilder, Row};

use crate::store::sql::{self, ClaimKind, Lease, MessageClaim, SqlRow};
use crate::store::{Claimed, Message, StoreResult};

use super::{micros, MySqlStore};

impl MySqlStore {
    /// Claims up to `limit` rows of `table` whose `due` time has come, oldest
    /// due first, pushing `due` out by `lease` so no other instance takes
    /// them meanwhile (rows another instance is claiming are skipped, not
    /// waited for): `SELECT <columns> FROM <table> … FOR UPDATE SKIP LOCKED`, then one
    /// UPDATE by id, in one transaction. The alert outbox and waiting
    /// commits are claimed this way.
    pub(super) async fn claim_due_rows(
        &self,
        (columns, table, due): (&str, &str, &str),
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
            "SELECT {columns} FROM {table} WHERE {due} <= UTC_TIMESTAMP(3) \
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

    /// SELECT the due rows with SKIP LOCKED (and the database clock), push
    /// their due column out by the lease and bump versions, then quarantine
    /// the rows that cannot be read: all in one transaction, so the row locks
    /// keep other claimers off until the lease (or the quarantine) is written.
    /// A check-back lease depends on the row's producer: the registrations
    /// are read with a plain SELECT (READ COMMITTED: no lock, never waits), and
    /// the rows of one lease end are pushed out by one UPDATE. The claimed
    /// messages are the selected rows with the UPDATE's two changes applied
    /// here, so nothing is read twice.
    pub(super) async fn claim_due(&self, claim: MessageClaim) -> StoreResult<Claimed> {
        let (state, owner) = (claim.state(), claim.owner_set());
        let MessageClaim {
            kind,
            limit,
            room,
            lease,
            // A send claim whose rows might not all fit its room reads
            // their lengths first, then the payloads of the rows that fit.
            sized,
            ..
        } = claim;
        let due = kind.due_column();
        let columns = if sized {
            sql::sized_columns::<MySql>()
        } else {
            kind.columns::<MySql>()
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
                .push(format!(", version = version + 1{owner} WHERE id IN ("));
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

/// When a claim taken at `claimed_at` (the database clock) runs out, to the
/// millisecond `DATETIME(3)` stores, so the claimed message and its row agree.
/// A lease past the calendar ends at its last millisecond.
pub(super) fn lease_end(claimed_at: DateTime<Utc>, lease: Duration) -> DateTime<Utc> {
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
