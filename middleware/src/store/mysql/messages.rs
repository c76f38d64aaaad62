//! [`MessageStore`] on MySQL: prepares (one, or a batch in one statement),
//! tombstones, reads, and transitions (one, or a batch: see
//! `transitions.rs`).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_trait::async_trait;
use sqlx::MySql;

use crate::store::sql::{self, message_from_row, AuditRow, PREPARE_COLUMNS, STORED_COLUMNS};
use crate::store::{
    AuditEntry, Inserted, Message, MessageStore, NewCommitted, NewMessage, StoreError, StoreResult,
    Tombstone, Transition,
};

use super::prepare::{created_apart, insert_prepared_rows, select_messages_by_keys, HEADROOM};
use super::transitions::{decide_alone, order_commits, transition_update, verify_failed_alerts};
use super::{
    is_lock_conflict, is_unique_violation, micros, select_messages_by_ids, select_rows_by_ids,
    MySqlStore,
};

#[async_trait]
impl MessageStore for MySqlStore {
    async fn insert_prepared(&self, m: &NewMessage) -> StoreResult<Inserted> {
        let content = sql::Content::of(m);
        // With RETURNING the new row comes back with the INSERT; without, it
        // is read back by its id.
        let returning = if self.returning {
            format!(" RETURNING {STORED_COLUMNS}")
        } else {
            String::new()
        };
        let insert = sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO messages ({PREPARE_COLUMNS}, headroom) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, \
             'PREPARED', UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(3), \
             UTC_TIMESTAMP(3), COALESCE(?, UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND), ?, ?, \
             {HEADROOM}){returning}"
        )));
        let (at, after) = sql::deliver_binds::<MySql>(m);
        let insert = sql::bind_prepare(insert, m, &content)
            .bind(micros(m.first_verify_after))
            .bind(at)
            .bind(after)
            .bind(sql::payload_bytes(m))
            .bind(content.apart());
        // A content apart is written with its row in one transaction; a
        // row with its own content is one autocommit statement.
        let mut tx = if content.apart() {
            Some(self.pool.begin().await?)
        } else {
            None
        };
        // Ok(row): RETURNING gave the new row; Err(done): read it back.
        let res = match (&mut tx, self.returning) {
            (Some(tx), true) => insert.fetch_one(&mut **tx).await.map(Ok),
            (Some(tx), false) => insert.execute(&mut **tx).await.map(Err),
            (None, true) => insert.fetch_one(&self.pool).await.map(Ok),
            (None, false) => insert.execute(&self.pool).await.map(Err),
        };
        let created = match res {
            Ok(created) => created,
            Err(sqlx::Error::Database(db)) if db.is_unique_violation() => {
                drop(tx);
                if let Some(row) = self.find_message(&m.biz_id, &m.message_key).await? {
                    return Ok(Inserted::Existing(row));
                }
                // The key of a message that has left (`sql::free_stale_key`).
                if sql::free_stale_key(&self.pool, &m.biz_id, &m.message_key).await? {
                    return Box::pin(self.insert_prepared(m)).await;
                }
                return Err(StoreError::Vanished("the row a duplicate key names"));
            }
            Err(e) => return Err(e.into()),
        };
        let Some(mut tx) = tx else {
            let row = match created {
                Ok(row) => message_from_row(&row)?,
                Err(done) => self
                    .find_message_by_id(done.last_insert_id())
                    .await?
                    .ok_or(StoreError::Vanished("a row just inserted"))?,
            };
            return Ok(Inserted::Created(row));
        };
        let row = match created {
            Ok(row) => message_from_row(&row)?,
            Err(done) => {
                let id = [done.last_insert_id()];
                let rows = select_rows_by_ids(&mut *tx, STORED_COLUMNS, &id).await?;
                let row = rows
                    .first()
                    .ok_or(StoreError::Vanished("a row just inserted"))?;
                message_from_row(row)?
            }
        };
        sql::insert_apart::<MySql>(&mut tx, &[(row.id, &content)]).await?;
        tx.commit().await?;
        Ok(Inserted::Created(sql::with_content(row, m)))
    }

    async fn insert_tombstone(&self, t: &Tombstone<'_>) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin().await?;
        let res = sqlx::query(
            "INSERT INTO messages (biz_id, message_key, payload, headers, status, tombstone, \
             created_at, updated_at, decided_at) \
             VALUES (?, ?, '', '{}', 'ROLLED_BACK', TRUE, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))",
        )
        .bind(t.biz_id)
        .bind(t.message_key)
        .execute(&mut *tx)
        .await;
        let id = match res {
            Ok(done) => done.last_insert_id(),
            Err(sqlx::Error::Database(db)) if db.is_unique_violation() => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        sql::insert_audits(&mut *tx, &[AuditRow::tombstone(id, t.actor, t.reason)]).await?;
        let row = select_messages_by_ids(&mut *tx, &[id]).await?.pop();
        tx.commit().await?;
        Ok(row)
    }

    async fn find_message(&self, biz_id: &str, message_key: &str) -> StoreResult<Option<Message>> {
        sql::find_message(&self.pool, biz_id, message_key).await
    }

    async fn find_message_by_id(&self, id: u64) -> StoreResult<Option<Message>> {
        Ok(select_messages_by_ids(&self.pool, &[id]).await?.pop())
    }

    async fn transition(&self, t: &Transition) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin().await?;
        let mut q = transition_update(t, None);
        q.push(" WHERE id = ")
            .push_bind(t.id)
            .push(" AND status = ")
            .push_bind(t.from.as_str())
            .push(" AND version = ")
            .push_bind(t.version);
        match q.build().execute(&mut *tx).await {
            Ok(done) if done.rows_affected() == 1 => {}
            Ok(_) => return Ok(None),
            Err(e) if is_lock_conflict(&e) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        sql::insert_audits(&mut *tx, AuditRow::transition(t).as_slice()).await?;
        let mut row = select_messages_by_ids(&mut *tx, &[t.id]).await?.pop();
        let mut alerts = verify_failed_alerts([&row]);
        if let Some(m) = row.as_mut() {
            alerts.extend(order_commits(&mut tx, std::slice::from_mut(m)).await?);
        }
        let raised = sql::raise_alerts::<MySql>(&mut tx, alerts).await?;
        tx.commit().await?;
        raised.announce();
        Ok(row)
    }

    async fn insert_committed_batch(
        &self,
        batch: &[NewCommitted],
        send_lease: Duration,
    ) -> StoreResult<Option<Vec<Message>>> {
        self.insert_committed(batch, send_lease).await
    }

    async fn insert_prepared_batch(&self, batch: &[NewMessage]) -> StoreResult<Vec<Inserted>> {
        if batch.len() == 1 {
            return Ok(vec![self.insert_prepared(&batch[0]).await?]);
        }
        let keys: Vec<(&str, &str)> = batch
            .iter()
            .map(|m| (m.biz_id.as_str(), m.message_key.as_str()))
            .collect();
        if let Some(created) = self.insert_all_returning(batch, &keys).await? {
            return Ok(created);
        }
        let mut tx = self.pool.begin().await?;
        let existing = select_messages_by_keys(&mut *tx, &keys).await?;
        let mut seen: HashSet<(&str, &str)> = existing
            .iter()
            .map(|m| (m.biz_id.as_str(), m.message_key.as_str()))
            .collect();
        // The first occurrence of each new key is the one this batch creates.
        let creates: Vec<&NewMessage> = batch
            .iter()
            .filter(|m| seen.insert((m.biz_id.as_str(), m.message_key.as_str())))
            .collect();
        let contents: Vec<sql::Content<'_>> = creates.iter().map(|m| sql::Content::of(m)).collect();
        let creates: Vec<(&NewMessage, &sql::Content<'_>)> =
            creates.into_iter().zip(&contents).collect();
        if !creates.is_empty() {
            let mut q = insert_prepared_rows(&creates);
            match q.build().execute(&mut *tx).await {
                Ok(_) => {}
                // Another instance inserted one of the keys since our read, or
                // a lock conflict: let the one-by-one path sort each out.
                Err(e) if is_lock_conflict(&e) || is_unique_violation(&e) => {
                    drop(tx);
                    return crate::store::insert_prepared_each(self, batch).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
        let created_keys: Vec<(&str, &str)> = creates
            .iter()
            .map(|(m, _)| (m.biz_id.as_str(), m.message_key.as_str()))
            .collect();
        // As stored: the contents apart are not written yet.
        let created = sql::select_by_keys(&mut *tx, STORED_COLUMNS, &created_keys).await?;
        let mut by_key: HashMap<(String, String), Message> = created
            .into_iter()
            .map(|m| ((m.biz_id.clone(), m.message_key.clone()), m))
            .collect();
        created_apart(&mut tx, &mut by_key, &creates).await?;
        tx.commit().await?;
        let created: Vec<Message> = by_key.into_values().collect();

        let mut rows: HashMap<(&str, &str), (&Message, bool)> = HashMap::new();
        for m in &existing {
            rows.insert((m.biz_id.as_str(), m.message_key.as_str()), (m, false));
        }
        for m in &created {
            rows.insert((m.biz_id.as_str(), m.message_key.as_str()), (m, true));
        }
        let mut out = Vec::with_capacity(batch.len());
        for key in &keys {
            let entry = rows.get_mut(key).ok_or(StoreError::Vanished(
                "a row a batched prepare wrote or found",
            ))?;
            let (row, fresh) = *entry;
            out.push(if fresh {
                entry.1 = false;
                Inserted::Created(row.clone())
            } else {
                Inserted::Existing(row.clone())
            });
        }
        Ok(out)
    }

    async fn find_messages(&self, keys: &[(&str, &str)]) -> StoreResult<Vec<Message>> {
        select_messages_by_keys(&self.pool, keys).await
    }

    async fn transition_batch(&self, ts: &[Transition]) -> StoreResult<Vec<Option<Message>>> {
        self.transition_together(ts, None).await
    }

    async fn transition_batch_seen(
        &self,
        ts: &[Transition],
        seen: &[&Message],
    ) -> StoreResult<Vec<Option<Message>>> {
        if seen.len() == ts.len() && decide_alone(ts, seen) {
            return self.decide_together(ts, seen).await;
        }
        // The audit INSERT's RETURNING reads the clock the UPDATE then binds;
        // without RETURNING (MySQL) the rows are read back as usual.
        let seen = (self.returning && seen.len() == ts.len()).then_some(seen);
        self.transition_together(ts, seen).await
    }

    async fn audit_trail(&self, message_id: u64) -> StoreResult<Vec<AuditEntry>> {
        sql::audit_trail(&self.pool, message_id).await
    }
}
