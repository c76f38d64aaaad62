//! The claim of the dialects whose UPDATE returns the rows it changed
//! (PostgreSQL, SQLite): one `UPDATE … WHERE id IN (SELECT … ORDER BY due
//! LIMIT ?) RETURNING …` takes the due rows, pushes their due column out by
//! the lease (a check-back's worked out there from the row's producer) and
//! bumps their versions. The statements and what they bind are written
//! here once; each backend runs them in the transactions its database
//! wants and sets aside the unreadable rows (`sql::quarantine`).

use sqlx::query::Query;
use sqlx::Executor;

use super::claim::{decode_claimed, Decoded, Lease, MessageClaim};
use super::{millis, stmt, Bind, Dialect, SqlRow};
use crate::store::StoreResult;

/// What a returning claim needs of its dialect beyond [`Dialect`].
pub(in crate::store) trait ReturningClaim: Dialect {
    /// What the SELECT of the due rows ends with so that concurrent
    /// claimers split them (`FOR UPDATE SKIP LOCKED`); nothing where one
    /// writer at a time holds the whole database (SQLite).
    const SKIP_LOCKED: &'static str;
    /// The scalar function that picks the least of its arguments.
    const LEAST: &'static str;
    /// The database clock plus `ms`, an SQL expression of milliseconds.
    fn now_plus_ms(ms: &str) -> String;
}

/// A generic query of dialect `D`.
type DQuery<'q, D> = Query<'q, D, <D as sqlx::Database>::Arguments>;

/// Claims up to `limit` rows of `table` whose `due` time has come, oldest
/// due first, pushing `due` out by `lease`, returning `returning` of each,
/// in no defined order (the alert outbox and waiting commits are claimed
/// this way), on `exec`.
pub(in crate::store) async fn claim_due_rows<'c, D, E>(
    exec: E,
    (returning, table, due): (&str, &str, &str),
    limit: u32,
    lease: std::time::Duration,
) -> StoreResult<Vec<D::Row>>
where
    D: ReturningClaim,
    E: Executor<'c, Database = D>,
    i64: Bind<D>,
{
    let sql = format!(
        "UPDATE {table} SET {due} = {until} \
         WHERE id IN (SELECT id FROM {table} WHERE {due} <= {now} \
         ORDER BY {due} LIMIT ?{skip}) \
         RETURNING {returning}",
        until = D::now_plus_ms("?"),
        now = D::NOW,
        skip = D::SKIP_LOCKED,
    );
    Ok(sqlx::query(stmt::<D>(sql))
        .bind(millis(lease))
        .bind(i64::from(limit))
        .fetch_all(exec)
        .await?)
}

impl MessageClaim {
    /// The claim's one statement, bound: the rows taken, as claimed, each
    /// with the claim's instant (`claimed_at`).
    pub(in crate::store) fn query<D>(&self) -> DQuery<'static, D>
    where
        D: ReturningClaim,
        i64: Bind<D>,
    {
        let due_column = self.kind.due_column();
        let due_rows = format!(
            "SELECT id, {due_column} AS due, payload_bytes FROM messages \
             WHERE {due_column} <= {now} AND {state} ORDER BY {due_column}, id LIMIT ?{skip}",
            now = D::NOW,
            state = self.state(),
            skip = D::SKIP_LOCKED,
        );
        let taken = if self.sized {
            format!(
                "SELECT id FROM (SELECT id, SUM(COALESCE(payload_bytes, ?)) \
                 OVER (ORDER BY due, id) AS upto FROM ({due_rows}) AS due_rows) AS sized \
                 WHERE upto <= ?"
            )
        } else {
            due_rows
        };
        let span = match self.lease {
            Lease::Every(_) => "?".to_string(),
            // As long as `VerifyLease::covering` says: the producer's
            // timeout cut to the maximum, the maximum for a row whose
            // producer is not registered, plus the margin.
            Lease::Verify(_) => format!(
                "? + COALESCE((SELECT {least}(p.verify_timeout_ms, ?) FROM producers p \
                 WHERE p.biz_id = messages.biz_id), ?)",
                least = D::LEAST
            ),
        };
        let sql = format!(
            "UPDATE messages SET {due_column} = {until}, version = version + 1{owner} \
             WHERE id IN (SELECT id FROM ({taken}) AS taken) \
             RETURNING {columns}, {now} AS claimed_at",
            until = D::now_plus_ms(&format!("({span})")),
            owner = self.owner_set(),
            columns = self.kind.columns::<D>(),
            now = D::NOW,
        );
        let as_int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let q = sqlx::query(stmt::<D>(sql));
        let q = match self.lease {
            Lease::Every(d) => q.bind(millis(d)),
            Lease::Verify(v) => q
                .bind(millis(v.margin))
                .bind(millis(v.max_timeout))
                .bind(millis(v.max_timeout)),
        };
        if self.sized {
            q.bind(as_int(self.room.unknown))
                .bind(i64::from(self.limit))
                .bind(as_int(self.room.bytes))
        } else {
            q.bind(i64::from(self.limit))
        }
    }

    /// Whether a sized claim that took `taken` rows stopped short of its
    /// limit with due rows left: what is left did not fit its room (or
    /// another claimer holds it, which comes to the same: not now).
    pub(in crate::store) async fn out_of_room<'c, D, E>(
        &self,
        exec: E,
        taken: usize,
    ) -> StoreResult<bool>
    where
        D: ReturningClaim,
        E: Executor<'c, Database = D>,
    {
        if !self.sized || taken >= self.limit as usize {
            return Ok(false);
        }
        let row = sqlx::query(stmt::<D>(format!(
            "SELECT EXISTS (SELECT 1 FROM messages WHERE {due} <= {now} AND {state}) AS more",
            due = self.kind.due_column(),
            now = D::NOW,
            state = self.state(),
        )))
        .fetch_one(exec)
        .await?;
        row.flag("more")
    }
}

/// The claimed rows decoded, and the claim's instant (one statement, one
/// instant; None when it took nothing).
pub(in crate::store) fn decode_returned<R: SqlRow>(
    rows: Vec<R>,
) -> StoreResult<(Option<chrono::DateTime<chrono::Utc>>, Decoded)> {
    let claimed_at = rows.first().map(|r| r.time("claimed_at")).transpose()?;
    Ok((claimed_at, decode_claimed(rows)?))
}
