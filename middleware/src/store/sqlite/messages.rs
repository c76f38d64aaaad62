//! [`MessageStore`] on SQLite: prepares (`ON CONFLICT DO NOTHING
//! RETURNING`), tombstones, reads, and a transition as one guarded
//! `UPDATE … RETURNING` with its audit row, seq and alert in one `BEGIN
//! IMMEDIATE` transaction. Batches take the trait's one-by-one defaults:
//! with one writer at a time, a batch statement would save no waiting.

use async_trait::async_trait;
use sqlx::Sqlite;
use trustmsg_verify_api::admin::AlertKind;
use trustmsg_verify_api::MessageStatus;

use crate::store::sql::{
    self, clip_error, message_from_row, transition_effects, AuditRow, MESSAGE_COLUMNS,
    PREPARE_COLUMNS, STORED_COLUMNS,
};
use crate::store::{
    AuditEntry, Inserted, Message, MessageStore, NewAlert, NewMessage, StoreError, StoreResult,
    Tombstone, Transition,
};

use super::{first_message, millis, sql_int, SqliteStore, NOW_MS};

/// When a commit makes its message due, as SQL (`next_send_at` of the
/// commit's UPDATE; `lease` is the parameter holding its send lease in ms):
/// at once, which for this instance's forwarder is a claim of one send lease
/// (the fast path), or at the message's `deliver_at` if that is later (no
/// claim: the sweepers take it then). The one place this backend says when
/// a committed message is due.
fn commit_due(lease: &str) -> String {
    format!("CASE WHEN deliver_at > {NOW_MS} THEN deliver_at ELSE {NOW_MS} + {lease} END")
}

#[async_trait]
impl MessageStore for SqliteStore {
    async fn insert_prepared(&self, m: &NewMessage) -> StoreResult<Inserted> {
        let content = sql::Content::of(m);
        // DO NOTHING only swallows the (biz_id, message_key) conflict; any other
        // constraint still fails the call.
        let insert = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO messages ({PREPARE_COLUMNS}) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'PREPARED', {NOW_MS} + ?, {NOW_MS}, {NOW_MS}, \
             COALESCE(?, {NOW_MS} + ?), ?, ?) \
             ON CONFLICT (biz_id, message_key) DO NOTHING RETURNING {STORED_COLUMNS}"
        )));
        let (at, after) = sql::deliver_binds::<Sqlite>(m);
        let insert = sql::bind_prepare(insert, m, &content)
            .bind(millis(m.first_verify_after))
            .bind(at)
            .bind(after)
            .bind(sql::payload_bytes(m))
            .bind(content.apart());
        let created = if content.apart() {
            // The row and its content apart in one transaction.
            let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
            let rows = insert.fetch_all(&mut *tx).await?;
            let created = first_message(&rows)?;
            if let Some(row) = &created {
                sql::insert_apart::<Sqlite>(&mut tx, &[(row.id, &content)]).await?;
                tx.commit().await?;
            } else {
                tx.rollback().await?;
            }
            created.map(|row| sql::with_content(row, m))
        } else {
            first_message(&insert.fetch_all(&self.pool).await?)?
        };
        if let Some(created) = created {
            return Ok(Inserted::Created(created));
        }
        let row = self
            .find_message(&m.biz_id, &m.message_key)
            .await?
            .ok_or(StoreError::Vanished("the row a duplicate key names"))?;
        Ok(Inserted::Existing(row))
    }

    async fn insert_tombstone(&self, t: &Tombstone<'_>) -> StoreResult<Option<Message>> {
        sql::insert_tombstone(self.write_tx().await?, t).await
    }

    async fn find_message(&self, biz_id: &str, message_key: &str) -> StoreResult<Option<Message>> {
        sql::find_message(&self.pool, biz_id, message_key).await
    }

    async fn find_message_by_id(&self, id: u64) -> StoreResult<Option<Message>> {
        sqlx::query(sqlx::AssertSqlSafe(format!(
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
        let send_status = transition_effects(t.to).send_status;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE messages SET status = ?1, send_status = ?2, version = version + 1, \
             verify_attempts = CASE WHEN ?1 = 'PREPARED' THEN 0 ELSE verify_attempts + ?3 END, \
             last_error = COALESCE(?4, last_error), \
             next_verify_at = CASE WHEN ?1 = 'PREPARED' THEN {NOW_MS} END, \
             verify_overdue_alerted = CASE WHEN ?1 = 'PREPARED' THEN 0 ELSE verify_overdue_alerted END, \
             requeued_at = CASE WHEN ?1 = 'PREPARED' THEN {NOW_MS} ELSE requeued_at END, \
             next_send_at = CASE WHEN ?1 = 'COMMITTED' THEN {} END, \
             decided_at = CASE WHEN ?1 IN ('COMMITTED', 'ROLLED_BACK', 'VERIFY_FAILED') \
                 THEN {NOW_MS} ELSE decided_at END, \
             updated_at = {NOW_MS} \
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
        let mut alerts: Vec<NewAlert> = (row.status == MessageStatus::VerifyFailed)
            .then(|| NewAlert::failed(AlertKind::VerifyFailed, &row))
            .into_iter()
            .collect();
        if row.order_key.is_some() {
            let upsert = format!(
                "INSERT INTO ordered_keys (order_key, last_seq, sent_through, updated_at) \
                 VALUES (?, 1, 0, {NOW_MS}) ON CONFLICT (order_key) \
                 DO UPDATE SET last_seq = last_seq + 1, updated_at = {NOW_MS}"
            );
            let ordered =
                sql::order_commits::<Sqlite>(&mut tx, &upsert, std::slice::from_mut(&mut row));
            alerts.extend(ordered.await?);
        }
        let raised = sql::raise_alerts::<Sqlite>(&mut tx, alerts).await?;
        tx.commit().await?;
        raised.announce();
        Ok(Some(row))
    }

    async fn audit_trail(&self, message_id: u64) -> StoreResult<Vec<AuditEntry>> {
        sql::audit_trail(&self.pool, message_id).await
    }
}
