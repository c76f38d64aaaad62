//! Messages created COMMITTED on PostgreSQL: a relayed row of a producer's
//! outbox table, which the producer's own transaction decided, is one
//! INSERT of a committed row (with its audit row, its key's seq and any
//! alert, in one transaction) instead of a prepare's INSERT and a commit's
//! UPDATE: one row version and its index entries fewer per message.

use std::collections::HashMap;
use std::time::Duration;

use sqlx::Postgres;

use crate::store::sql::{self, message_from_row, stmt, AuditRow, PREPARE_COLUMNS, STORED_COLUMNS};
use crate::store::{Message, NewCommitted, StoreError, StoreResult};

use super::{bump_keys, deliver_at, is_deadlock, millis, PgQuery, PgStore, MS, NOW};

/// A committed row as `INSERT INTO messages ({PREPARE_COLUMNS},
/// send_status, decided_at, next_send_at)` takes it: no check-back time,
/// the send pending, decided now, and due as a commit makes it (at once, a
/// claim of one send lease for this instance's forwarder, or at its
/// delivery time if that is later; a value list cannot read the
/// `deliver_at` it sets, so it is computed again). [`bind_committed`]
/// binds its parameters.
fn committed_values() -> String {
    let deliver = deliver_at();
    format!(
        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'COMMITTED', NULL, {NOW}, {NOW}, {deliver}, ?, ?, \
         'PENDING', {NOW}, CASE WHEN {deliver} > {NOW} THEN {deliver} ELSE {NOW} + ?{MS} END)"
    )
}

/// Binds [`committed_values`]' parameters for `c` with the send lease `lease`.
fn bind_committed<'q>(
    q: PgQuery<'q>,
    c: &NewCommitted,
    content: &sql::Content<'_>,
    lease: Duration,
) -> PgQuery<'q> {
    let m = &c.message;
    let (at, after) = sql::deliver_binds::<Postgres>(m);
    sql::bind_prepare(q, m, content)
        .bind(at)
        .bind(after)
        .bind(sql::payload_bytes(m))
        .bind(content.apart())
        .bind(at)
        .bind(after)
        .bind(at)
        .bind(after)
        .bind(millis(lease))
}

impl PgStore {
    /// [`crate::store::MessageStore::insert_committed_batch`]: one INSERT …
    /// RETURNING of every row, the contents kept apart, the audit rows, the
    /// seqs and the alerts, in one transaction. None, having written
    /// nothing, for a key twice in the batch, a key that exists already, or
    /// a deadlock with another writer.
    pub(super) async fn insert_committed(
        &self,
        batch: &[NewCommitted],
        send_lease: Duration,
    ) -> StoreResult<Option<Vec<Message>>> {
        // 22 parameters a row, within PostgreSQL's 65,535 a statement.
        if batch.len() > 2_000 || sql::distinct_keys(batch).is_none() {
            return Ok(None);
        }
        match self.insert_committed_all(batch, send_lease).await {
            Err(StoreError::Db(e)) if is_deadlock(&e) => Ok(None),
            done => done,
        }
    }

    async fn insert_committed_all(
        &self,
        batch: &[NewCommitted],
        send_lease: Duration,
    ) -> StoreResult<Option<Vec<Message>>> {
        let contents: Vec<sql::Content<'_>> =
            batch.iter().map(|c| sql::Content::of(&c.message)).collect();
        let mut insert = sqlx::query(stmt::<Postgres>(format!(
            "INSERT INTO messages ({PREPARE_COLUMNS}, send_status, decided_at, next_send_at) \
             VALUES {} RETURNING {STORED_COLUMNS}",
            vec![committed_values(); batch.len()].join(", ")
        )));
        for (c, content) in batch.iter().zip(&contents) {
            insert = bind_committed(insert, c, content, send_lease);
        }
        let mut tx = self.pool.begin().await?;
        let rows = insert.fetch_all(&mut *tx).await?;
        if rows.len() != batch.len() {
            // A key exists already: the caller sorts it out.
            tx.rollback().await?;
            return Ok(None);
        }
        let mut by_key = HashMap::with_capacity(rows.len());
        for row in &rows {
            let m = message_from_row(row)?;
            by_key.insert((m.biz_id.clone(), m.message_key.clone()), m);
        }
        let mut created = Vec::with_capacity(batch.len());
        let mut apart = Vec::new();
        for (c, content) in batch.iter().zip(&contents) {
            let m = &c.message;
            let row = by_key
                .remove(&(m.biz_id.clone(), m.message_key.clone()))
                .ok_or(StoreError::Vanished("a row INSERT … RETURNING wrote"))?;
            if content.apart() {
                apart.push((row.id, content));
                created.push(Some(sql::with_content(row, m)));
            } else {
                created.push(Some(row));
            }
        }
        sql::insert_apart::<Postgres>(&mut tx, &apart).await?;
        let audits: Vec<AuditRow> = created
            .iter()
            .flatten()
            .zip(batch)
            .map(|(m, c)| AuditRow::created_committed(m.id, &c.actor, &c.reason))
            .collect();
        sql::insert_audits(&mut *tx, &audits).await?;
        let alerts =
            sql::order_commit_batch::<Postgres>(&mut tx, &bump_keys(), &mut created).await?;
        let raised = sql::raise_alerts::<Postgres>(&mut tx, alerts).await?;
        tx.commit().await?;
        raised.announce();
        Ok(Some(created.into_iter().flatten().collect()))
    }
}
