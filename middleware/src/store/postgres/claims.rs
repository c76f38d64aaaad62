//! Claims on PostgreSQL: one `UPDATE … WHERE id IN (SELECT … ORDER BY due
//! LIMIT ? FOR UPDATE SKIP LOCKED) RETURNING …`, so concurrent instances
//! split the due rows instead of queueing on each other's locks, and the
//! rows taken get their lease in the same statement; a check-back lease is
//! worked out there from the row's producer (a plain read: PostgreSQL
//! locks no row it only reads). The unreadable rows are quarantined in the
//! claim's transaction. Messages (sends and check-backs), alerts and
//! waiting commits are claimed here.

use std::time::Duration;

use sqlx::postgres::PgRow;
use sqlx::Postgres;

use crate::store::sql::{self, stmt, ClaimKind, Lease, SqlRow};
use crate::store::{Claimed, PayloadRoom, StoreResult};

use super::{millis, PgStore, MS, NOW};

impl PgStore {
    /// Claims up to `limit` rows of `table` whose `due` time has come, oldest
    /// due first, pushing `due` out by `lease` (rows another claimer holds
    /// are skipped), returning `returning` of each, in no defined order. The
    /// alert outbox and waiting commits are claimed this way.
    pub(super) async fn claim_due_rows(
        &self,
        returning: &str,
        table: &str,
        due: &str,
        limit: u32,
        lease: Duration,
    ) -> StoreResult<Vec<PgRow>> {
        Ok(sqlx::query(stmt::<Postgres>(format!(
            "UPDATE {table} SET {due} = {NOW} + ?{MS} \
             WHERE id IN (SELECT id FROM {table} WHERE {due} <= {NOW} \
             ORDER BY {due} LIMIT ? FOR UPDATE SKIP LOCKED) \
             RETURNING {returning}"
        )))
        .bind(millis(lease))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Takes the due rows (skipping those another claimer holds), pushes
    /// their due column out by the lease and bumps their versions in one
    /// statement, then reads the contents kept apart and quarantines the
    /// rows that cannot be read, all in one transaction: the row locks keep
    /// other claimers off until the lease (or the quarantine) is written.
    pub(super) async fn claim_due(
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
             WHERE {due_column} <= {NOW} AND {state} ORDER BY {due_column}, id LIMIT ? \
             FOR UPDATE SKIP LOCKED"
        );
        let taken = if sized {
            format!(
                "SELECT id FROM (SELECT id, SUM(COALESCE(payload_bytes, ?)) \
                 OVER (ORDER BY due, id) AS upto FROM ({due_rows}) AS due_rows) AS sized \
                 WHERE upto <= ?"
            )
        } else {
            due_rows
        };
        let sql = format!(
            "UPDATE messages SET {due_column} = {NOW} + ({span}){MS}, version = version + 1 \
             WHERE id IN (SELECT id FROM ({taken}) AS taken) \
             RETURNING {columns}, {NOW} AS claimed_at",
            span = lease_span_sql(lease),
            columns = kind.columns::<Postgres>(),
        );
        let q = sqlx::query(stmt::<Postgres>(sql));
        let q = match lease {
            Lease::Every(d) => q.bind(millis(d)),
            Lease::Verify(v) => q
                .bind(millis(v.margin))
                .bind(millis(v.max_timeout))
                .bind(millis(v.max_timeout)),
        };
        let as_int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let q = if sized {
            q.bind(as_int(room.unknown))
                .bind(i64::from(limit))
                .bind(as_int(room.bytes))
        } else {
            q.bind(i64::from(limit))
        };
        let mut tx = self.pool.begin().await?;
        let rows = q.fetch_all(&mut *tx).await?;
        // Short of the limit with due rows left: what is left did not fit
        // (or another claimer holds it, which comes to the same: not now).
        let out_of_room = sized
            && rows.len() < limit as usize
            && sqlx::query_scalar::<_, bool>(stmt::<Postgres>(format!(
                "SELECT EXISTS (SELECT 1 FROM messages WHERE {due_column} <= {NOW} AND {state})"
            )))
            .fetch_one(&mut *tx)
            .await?;
        // One statement, one instant.
        let claimed_at = rows.first().map(|r| r.time("claimed_at")).transpose()?;
        let sql::Decoded {
            mut messages,
            mut unreadable,
            apart,
        } = sql::decode_claimed(rows)?;
        unreadable.extend(sql::fill_apart(&mut *tx, &mut messages, &apart).await?);
        // RETURNING comes in no defined order; MySQL returns id order.
        messages.sort_by_key(|m| m.id);
        unreadable.sort_by_key(|q| q.id);
        let (quarantined, raised) = if unreadable.is_empty() {
            Default::default()
        } else {
            sql::quarantine::<Postgres>(&mut tx, kind, unreadable).await?
        };
        tx.commit().await?;
        raised.announce();
        Ok(Claimed {
            messages,
            quarantined,
            claimed_at,
            out_of_room,
        })
    }
}

/// A claim's span in ms as SQL over the claimed row, binding what
/// [`PgStore::claim_due`] binds: [`Lease::span`] in the statement itself,
/// so a check-back claim is as long as [`crate::store::VerifyLease::covering`]
/// says (the producer's timeout cut to the maximum, the maximum for a row
/// whose producer is not registered, plus the margin).
fn lease_span_sql(lease: Lease) -> &'static str {
    match lease {
        Lease::Every(_) => "?",
        Lease::Verify(_) => {
            "? + COALESCE((SELECT LEAST(p.verify_timeout_ms, ?) FROM producers p \
             WHERE p.biz_id = messages.biz_id), ?)"
        }
    }
}
