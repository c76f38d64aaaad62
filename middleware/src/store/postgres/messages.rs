//! [`MessageStore`] on PostgreSQL: prepares (`ON CONFLICT DO NOTHING
//! RETURNING`), tombstones, reads, and a transition as one guarded
//! `UPDATE … RETURNING` with its audit row, seq and alert in one
//! transaction. A batch of prepares is one statement, a batch of
//! transitions one transaction.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::{PgConnection, Postgres};
use trustmsg_verify_api::admin::AlertKind;
use trustmsg_verify_api::MessageStatus;

use crate::store::sql::{
    self, clip_error, message_from_row, stmt, transition_effects, AuditRow, Dialect,
    MESSAGE_COLUMNS, PREPARE_COLUMNS, STORED_COLUMNS,
};
use crate::store::{
    Actor, AuditEntry, Inserted, Message, MessageStore, NewAlert, NewCommitted, NewMessage,
    StoreError, StoreResult, Transition,
};

use crate::store::traits::{insert_prepared_each, transition_each};

use super::{first_message, is_deadlock, millis, sql_int, PgStore, MS, NOW};

/// When a commit makes its message due, as SQL (`next_send_at` of the
/// commit's UPDATE; `lease` is the parameter holding its send lease in ms):
/// at once, which for this instance's forwarder is a claim of one send lease
/// (the fast path), or at the message's `deliver_at` if that is later (no
/// claim: the sweepers take it then). The one place this backend says when
/// a committed message is due.
fn commit_due(lease: &str) -> String {
    format!("CASE WHEN deliver_at > {NOW} THEN deliver_at ELSE {NOW} + {lease}{MS} END")
}

/// Messages a prepare writes with one statement: 17 parameters each, within
/// PostgreSQL's 65,535 per statement.
const PREPARE_ROWS: usize = 1_000;

/// A prepare's row as `INSERT INTO messages ({PREPARE_COLUMNS})` takes it;
/// [`bind_prepared`] binds its parameters.
fn prepared_values() -> String {
    format!(
        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'PREPARED', {NOW} + ?{MS}, {NOW}, {NOW}, {}, ?, ?)",
        deliver_at()
    )
}

/// A message's `deliver_at`: the instant it was given, or the database
/// clock plus its delay, or NULL; its two parameters are
/// [`sql::deliver_binds`].
pub(super) fn deliver_at() -> String {
    format!(
        "COALESCE(?, {NOW}{plus})",
        plus = <Postgres as Dialect>::PLUS_SPAN
    )
}

/// Binds [`prepared_values`]' parameters for `m`, whose content is `content`.
fn bind_prepared<'q>(q: PgQuery<'q>, m: &NewMessage, content: &sql::Content<'_>) -> PgQuery<'q> {
    let (at, after) = sql::deliver_binds::<Postgres>(m);
    sql::bind_prepare(q, m, content)
        .bind(millis(m.first_verify_after))
        .bind(at)
        .bind(after)
        .bind(sql::payload_bytes(m))
        .bind(content.apart())
}

/// A statement with its parameters bound.
pub(super) type PgQuery<'q> = sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>;

impl PgStore {
    /// Prepares `part` with one `INSERT … ON CONFLICT DO NOTHING RETURNING`
    /// (in a transaction with the contents kept apart, if any): the rows it
    /// creates come back, and each key that was there already (or earlier
    /// in `part`: PostgreSQL inserts a statement's rows in their order, so
    /// the first of several identical keys is the one created) is read.
    async fn insert_prepared_part(&self, part: &[NewMessage]) -> StoreResult<Vec<Inserted>> {
        let contents: Vec<sql::Content<'_>> = part.iter().map(sql::Content::of).collect();
        // DO NOTHING only swallows the (biz_id, message_key) conflict; any other
        // constraint still fails the call.
        let mut insert = sqlx::query(stmt::<Postgres>(format!(
            "INSERT INTO messages ({PREPARE_COLUMNS}) VALUES {} \
             ON CONFLICT (biz_id, message_key) DO NOTHING RETURNING {STORED_COLUMNS}",
            vec![prepared_values(); part.len()].join(", ")
        )));
        for (m, content) in part.iter().zip(&contents) {
            insert = bind_prepared(insert, m, content);
        }
        let mut tx = match contents.iter().any(sql::Content::apart) {
            true => Some(self.pool.begin().await?),
            false => None,
        };
        let rows = match &mut tx {
            Some(tx) => insert.fetch_all(&mut **tx).await?,
            None => insert.fetch_all(&self.pool).await?,
        };
        let mut created = HashMap::with_capacity(rows.len());
        for row in &rows {
            let m = message_from_row(row)?;
            created.insert((m.biz_id.clone(), m.message_key.clone()), m);
        }
        // Each created row with the message (the first of its key) that made it.
        let mut out: Vec<Option<Message>> = Vec::with_capacity(part.len());
        for m in part {
            out.push(created.remove(&(m.biz_id.clone(), m.message_key.clone())));
        }
        if let Some(mut tx) = tx {
            let apart: Vec<(u64, &sql::Content<'_>)> = out
                .iter()
                .zip(&contents)
                .filter_map(|(row, content)| Some((row.as_ref()?.id, content)))
                .collect();
            sql::insert_apart::<Postgres>(&mut tx, &apart).await?;
            tx.commit().await?;
        }
        let mut inserted = Vec::with_capacity(part.len());
        for ((row, m), content) in out.into_iter().zip(part).zip(&contents) {
            inserted.push(match row {
                Some(row) if content.apart() => Inserted::Created(sql::with_content(row, m)),
                Some(row) => Inserted::Created(row),
                None => Inserted::Existing(
                    self.find_message(&m.biz_id, &m.message_key)
                        .await?
                        .ok_or(StoreError::Vanished("the row a duplicate key names"))?,
                ),
            });
        }
        Ok(inserted)
    }

    /// Applies `ts` in one transaction, in their order, with their audit
    /// rows, seqs and alerts; one result per transition (None where its
    /// guard matched nothing).
    async fn transition_all(&self, ts: &[Transition]) -> StoreResult<Vec<Option<Message>>> {
        let mut tx = self.pool.begin().await?;
        let mut alerts = Vec::new();
        let mut out = Vec::with_capacity(ts.len());
        for t in ts {
            out.push(transition_on(&mut tx, t, &mut alerts).await?);
        }
        if out.iter().all(Option::is_none) {
            tx.rollback().await?;
            return Ok(out);
        }
        let raised = sql::raise_alerts::<Postgres>(&mut tx, alerts).await?;
        tx.commit().await?;
        raised.announce();
        Ok(out)
    }
}

/// One transition on `tx`: its guarded `UPDATE … RETURNING`, its audit row
/// and, for an ordered commit, its key's seq; the alerts it raises are
/// added to `alerts`. None when the guard matched nothing.
async fn transition_on(
    tx: &mut PgConnection,
    t: &Transition,
    alerts: &mut Vec<NewAlert>,
) -> StoreResult<Option<Message>> {
    let send_status = transition_effects(t.to).send_status;
    // `?1` is compared with text literals: typed so, it is one parameter
    // of one type wherever it appears.
    let rows = sqlx::query(stmt::<Postgres>(format!(
        "UPDATE messages SET status = ?1, send_status = ?2, version = version + 1, \
         verify_attempts = CASE WHEN ?1 = 'PREPARED' THEN 0 ELSE verify_attempts + ?3 END, \
         last_error = COALESCE(?4, last_error), \
         next_verify_at = CASE WHEN ?1 = 'PREPARED' THEN {NOW} END, \
         verify_overdue_alerted = CASE WHEN ?1 = 'PREPARED' THEN FALSE \
             ELSE verify_overdue_alerted END, \
         requeued_at = CASE WHEN ?1 = 'PREPARED' THEN {NOW} ELSE requeued_at END, \
         next_send_at = CASE WHEN ?1 = 'COMMITTED' THEN {} END, \
         decided_at = CASE WHEN ?1 IN ('COMMITTED', 'ROLLED_BACK', 'VERIFY_FAILED') \
             THEN {NOW} ELSE decided_at END, \
         updated_at = {NOW} \
         WHERE id = ?6 AND status = ?7 AND version = ?8 RETURNING {MESSAGE_COLUMNS}",
        commit_due("?5")
    )))
    .bind(t.to.as_str())
    .bind(send_status)
    .bind(i64::from(t.verify_attempt))
    .bind(t.error.as_deref().map(clip_error))
    .bind(millis(t.send_lease))
    .bind(sql_int(t.id))
    .bind(t.from.as_str())
    .bind(sql_int(t.version))
    .fetch_all(&mut *tx)
    .await?;
    let Some(mut row) = first_message(&rows)? else {
        return Ok(None);
    };
    sql::insert_audits(&mut *tx, AuditRow::transition(t).as_slice()).await?;
    if row.status == MessageStatus::VerifyFailed {
        alerts.push(NewAlert::failed(AlertKind::VerifyFailed, &row));
    }
    if row.order_key.is_some() {
        let upsert = format!(
            "INSERT INTO ordered_keys (order_key, last_seq, sent_through, updated_at) \
             VALUES (?, 1, 0, {NOW}) ON CONFLICT (order_key) \
             DO UPDATE SET last_seq = ordered_keys.last_seq + 1, updated_at = {NOW}"
        );
        let ordered = sql::order_commits::<Postgres>(tx, &upsert, std::slice::from_mut(&mut row));
        alerts.extend(ordered.await?);
    }
    Ok(Some(row))
}

#[async_trait]
impl MessageStore for PgStore {
    async fn insert_prepared(&self, m: &NewMessage) -> StoreResult<Inserted> {
        let mut one = self.insert_prepared_part(std::slice::from_ref(m)).await?;
        one.pop()
            .ok_or(StoreError::Vanished("the result of a prepare"))
    }

    /// One statement per [`PREPARE_ROWS`] messages: one commit to wait for
    /// instead of one per message. A part that deadlocks with a concurrent
    /// prepare of the same keys in another order (each waits for the other's
    /// uncommitted key) is prepared one message at a time instead.
    async fn insert_prepared_batch(&self, batch: &[NewMessage]) -> StoreResult<Vec<Inserted>> {
        let mut out = Vec::with_capacity(batch.len());
        for part in batch.chunks(PREPARE_ROWS) {
            match self.insert_prepared_part(part).await {
                Ok(done) => out.extend(done),
                Err(StoreError::Db(e)) if part.len() > 1 && is_deadlock(&e) => {
                    out.extend(insert_prepared_each(self, part).await?)
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    async fn insert_tombstone(
        &self,
        biz_id: &str,
        message_key: &str,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin().await?;
        let rows = sqlx::query(stmt::<Postgres>(format!(
            "INSERT INTO messages (biz_id, message_key, payload, headers, status, tombstone, \
             created_at, updated_at, decided_at) \
             VALUES (?, ?, ''::bytea, '{{}}', 'ROLLED_BACK', TRUE, {NOW}, {NOW}, {NOW}) \
             ON CONFLICT (biz_id, message_key) DO NOTHING RETURNING {MESSAGE_COLUMNS}"
        )))
        .bind(biz_id)
        .bind(message_key)
        .fetch_all(&mut *tx)
        .await?;
        let Some(row) = first_message(&rows)? else {
            tx.rollback().await?;
            return Ok(None);
        };
        sql::insert_audits(&mut *tx, &[AuditRow::tombstone(row.id, actor, reason)]).await?;
        tx.commit().await?;
        Ok(Some(row))
    }

    async fn find_message(&self, biz_id: &str, message_key: &str) -> StoreResult<Option<Message>> {
        sql::find_message(&self.pool, biz_id, message_key).await
    }

    async fn find_message_by_id(&self, id: u64) -> StoreResult<Option<Message>> {
        sqlx::query(stmt::<Postgres>(format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?"
        )))
        .bind(sql_int(id))
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(message_from_row)
        .transpose()
    }

    async fn transition(&self, t: &Transition) -> StoreResult<Option<Message>> {
        let mut one = self.transition_all(std::slice::from_ref(t)).await?;
        Ok(one.pop().flatten())
    }

    /// All in one transaction, in the batch's order (so a key's seqs follow
    /// it): one commit to wait for instead of one per transition. A batch
    /// that deadlocks with another (two batches locking the same key rows in
    /// opposite orders) is applied one transition at a time instead.
    async fn transition_batch(&self, ts: &[Transition]) -> StoreResult<Vec<Option<Message>>> {
        match self.transition_all(ts).await {
            Err(StoreError::Db(e)) if ts.len() > 1 && is_deadlock(&e) => {
                transition_each(self, ts).await
            }
            done => done,
        }
    }

    async fn insert_committed_batch(
        &self,
        batch: &[NewCommitted],
        send_lease: Duration,
    ) -> StoreResult<Option<Vec<Message>>> {
        self.insert_committed(batch, send_lease).await
    }

    async fn audit_trail(&self, message_id: u64) -> StoreResult<Vec<AuditEntry>> {
        sql::audit_trail(&self.pool, message_id).await
    }
}
