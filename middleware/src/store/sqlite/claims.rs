//! Claims on SQLite: one `UPDATE … WHERE id IN (SELECT … LIMIT ?)
//! RETURNING …` under the database's single write lock, which is what SKIP
//! LOCKED plus row locks give on MySQL; a check-back lease is worked out in
//! the same statement from the row's producer. Unreadable rows are
//! quarantined in a second transaction. Messages (sends and check-backs),
//! alerts and waiting commits are claimed here.

use std::time::Duration;

use sqlx::sqlite::SqliteRow;
use sqlx::Sqlite;

use crate::store::sql::{self, ClaimKind, Lease, SqlRow};
use crate::store::{Claimed, PayloadRoom, StoreResult};

use super::{millis, SqliteStore, NOW_MS};

impl SqliteStore {
    /// Claims up to `limit` rows of `table` whose `due` time has come, oldest
    /// due first, pushing `due` out by `lease` (one UPDATE … RETURNING under
    /// SQLite's single write lock), returning `returning` of each, in no
    /// defined order. The alert outbox and waiting commits are claimed this way.
    pub(super) async fn claim_due_rows(
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

    /// Selects the due ids and pushes their due column out by the lease in one
    /// statement: SQLite runs it under the database's single write lock, which is
    /// what SKIP LOCKED plus row locks give on MySQL. A check-back lease is
    /// worked out in the same statement from the row's producer (SQLite locks
    /// no rows, so reading the registration there holds nobody up). Rows that
    /// cannot be read are then quarantined in a second transaction; if that
    /// fails they keep the claim's lease and the next claim after it tries again.
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
            columns = kind.columns::<Sqlite>(),
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
        rows: Vec<crate::store::Quarantined>,
    ) -> StoreResult<Vec<crate::store::Quarantined>> {
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
