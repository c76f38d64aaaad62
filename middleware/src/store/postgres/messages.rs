//! [`MessageStore`] on PostgreSQL: prepares (`ON CONFLICT DO NOTHING
//! RETURNING`), tombstones, reads, and a transition as one guarded
//! `UPDATE … RETURNING` with its audit row, seq and alert in one
//! transaction. A batch of prepares is one statement, a batch of
//! transitions one transaction of one UPDATE per target state.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::{PgConnection, Postgres};
use trustmsg_verify_api::admin::AlertKind;
use trustmsg_verify_api::MessageStatus;

use crate::store::sql::{
    self, clip_error, message_from_row, stmt, transition_effects, AuditRow, MESSAGE_COLUMNS,
    PREPARE_COLUMNS, STORED_COLUMNS,
};
use crate::store::{
    AuditEntry, Inserted, Message, MessageStore, NewAlert, NewCommitted, NewMessage, StoreError,
    StoreResult, Tombstone, Transition,
};

use crate::store::traits::{insert_prepared_each, transition_each};

use super::{bump_keys, deliver_at, is_deadlock, millis, sql_int, PgQuery, PgStore, MS, NOW};

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

impl PgStore {
    /// Prepares `part` with one `INSERT … ON CONFLICT DO NOTHING RETURNING`
    /// (in a transaction with the contents kept apart, if any): the rows it
    /// creates come back, and each key that was there already (or earlier
    /// in `part`: PostgreSQL inserts a statement's rows in their order, so
    /// the first of several identical keys is the one created) is read.
    async fn insert_prepared_part(&self, part: &[NewMessage]) -> StoreResult<Vec<Inserted>> {
        let mut inserted = self.insert_prepared_once(part).await?;
        // The keys of messages that have left (`sql::free_stale_key`):
        // freed, and their messages prepared once more.
        for (slot, m) in inserted.iter_mut().zip(part) {
            if slot.is_none() && sql::free_stale_key(&self.pool, &m.biz_id, &m.message_key).await? {
                *slot = self
                    .insert_prepared_once(std::slice::from_ref(m))
                    .await?
                    .pop()
                    .flatten();
            }
        }
        inserted
            .into_iter()
            .map(|slot| slot.ok_or(StoreError::Vanished("the row a duplicate key names")))
            .collect()
    }

    /// [`PgStore::insert_prepared_part`] once: what it created and found,
    /// None where it found the key taken by no message.
    async fn insert_prepared_once(
        &self,
        part: &[NewMessage],
    ) -> StoreResult<Vec<Option<Inserted>>> {
        let contents: Vec<sql::Content<'_>> = part.iter().map(sql::Content::of).collect();
        // A row whose key is taken is skipped by the trigger of migration
        // 0020 (the key is unique in message_keys, not in the partitioned
        // messages), as ON CONFLICT DO NOTHING skipped it before.
        let mut insert = sqlx::query(stmt::<Postgres>(format!(
            "INSERT INTO messages ({PREPARE_COLUMNS}) VALUES {} RETURNING {STORED_COLUMNS}",
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
        // The keys that were there already, read with one statement.
        let existing_keys: Vec<(&str, &str)> = out
            .iter()
            .zip(part)
            .filter(|(row, _)| row.is_none())
            .map(|(_, m)| (m.biz_id.as_str(), m.message_key.as_str()))
            .collect();
        let existing: HashMap<(String, String), Message> =
            sql::select_by_keys(&self.pool, MESSAGE_COLUMNS, &existing_keys)
                .await?
                .into_iter()
                .map(|m| ((m.biz_id.clone(), m.message_key.clone()), m))
                .collect();
        let mut inserted = Vec::with_capacity(part.len());
        for ((row, m), content) in out.into_iter().zip(part).zip(&contents) {
            inserted.push(match row {
                Some(row) if content.apart() => Some(Inserted::Created(sql::with_content(row, m))),
                Some(row) => Some(Inserted::Created(row)),
                None => existing
                    .get(&(m.biz_id.clone(), m.message_key.clone()))
                    .cloned()
                    .map(Inserted::Existing),
            });
        }
        Ok(inserted)
    }

    /// Applies `ts` in one transaction, in their order, with their audit
    /// rows, seqs and alerts; one result per transition (None where its
    /// guard matched nothing). Transitions to one state with one lease,
    /// attempt count and error go as one guarded UPDATE, whose `RETURNING`
    /// says which guards matched; a batch naming a row twice goes one
    /// transition at a time.
    async fn transition_all(&self, ts: &[Transition]) -> StoreResult<Vec<Option<Message>>> {
        let mut tx = self.pool.begin().await?;
        let mut alerts = Vec::new();
        let mut out = Vec::with_capacity(ts.len());
        if distinct_rows(ts) {
            out.resize(ts.len(), None);
            for group in uniform_groups(ts) {
                let part: Vec<Transition> = group.iter().map(|&i| ts[i].clone()).collect();
                let mut changed: HashMap<u64, Message> = transition_together(&mut tx, &part)
                    .await?
                    .into_iter()
                    .map(|m| (m.id, m))
                    .collect();
                for i in group {
                    out[i] = changed.remove(&ts[i].id);
                }
            }
            let audits: Vec<AuditRow> = ts
                .iter()
                .zip(&out)
                .filter(|(_, row)| row.is_some())
                .filter_map(|(t, _)| AuditRow::transition(t))
                .collect();
            sql::insert_audits(&mut *tx, &audits).await?;
            alerts.extend(
                out.iter()
                    .flatten()
                    .filter(|m| m.status == MessageStatus::VerifyFailed)
                    .map(|m| NewAlert::failed(AlertKind::VerifyFailed, m)),
            );
            // In order per key: the batch's ordered commits take their seqs
            // together, in the batch's order.
            let bump = bump_keys();
            alerts.extend(sql::order_commit_batch::<Postgres>(&mut tx, &bump, &mut out).await?);
        } else {
            for t in ts {
                out.push(transition_on(&mut tx, t, &mut alerts).await?);
            }
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

/// Whether `ts` names each row once.
fn distinct_rows(ts: &[Transition]) -> bool {
    let ids: std::collections::HashSet<u64> = ts.iter().map(|t| t.id).collect();
    ids.len() == ts.len()
}

/// The indices of `ts` split into groups that can each go as one UPDATE
/// ([`sql::same_update`]: one target state, lease, attempt count and error),
/// each group in the batch's order, the groups in the order of their first
/// transition.
fn uniform_groups(ts: &[Transition]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, t) in ts.iter().enumerate() {
        match groups.iter_mut().find(|g| sql::same_update(&ts[g[0]], t)) {
            Some(g) => g.push(i),
            None => groups.push(vec![i]),
        }
    }
    groups
}

/// The guarded UPDATE of a transition to `?1` (`?2` its send status, `?3`
/// the attempts it adds, `?4` its error, `?5` a commit's send lease); the
/// caller adds the guard.
fn transition_set() -> String {
    format!(
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
         updated_at = {NOW}",
        commit_due("?5")
    )
}

/// [`transition_set`]'s parameters for `t`.
fn bind_set<'q>(q: PgQuery<'q>, t: &'q Transition) -> PgQuery<'q> {
    // `?1` is compared with text literals: typed so, it is one parameter
    // of one type wherever it appears.
    q.bind(t.to.as_str())
        .bind(transition_effects(t.to).send_status)
        .bind(i64::from(t.verify_attempt))
        .bind(t.error.as_deref().map(clip_error))
        .bind(millis(t.send_lease))
}

/// `ts` (at least one, [`sql::one_update`]) as one guarded `UPDATE …
/// RETURNING` on `tx`, one statement text whatever their number: the rows
/// whose guards matched, as they are now.
async fn transition_together(
    tx: &mut PgConnection,
    ts: &[Transition],
) -> StoreResult<Vec<Message>> {
    // Each row's guard is its (id, status, version), bound as arrays; the
    // ids alone first, so the rows are found on the primary key.
    let text = stmt::<Postgres>(format!(
        "{} WHERE id = ANY(?6) AND (id, status, version) IN \
         (SELECT * FROM UNNEST(?6::BIGINT[], ?7::VARCHAR[], ?8::BIGINT[])) \
         RETURNING {MESSAGE_COLUMNS}",
        transition_set()
    ));
    bind_set(sqlx::query(text), &ts[0])
        .bind(ts.iter().map(|t| sql_int(t.id)).collect::<Vec<i64>>())
        .bind(ts.iter().map(|t| t.from.as_str()).collect::<Vec<&str>>())
        .bind(ts.iter().map(|t| sql_int(t.version)).collect::<Vec<i64>>())
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(message_from_row)
        .collect()
}

/// One transition on `tx`: its guarded `UPDATE … RETURNING`, its audit row
/// and, for an ordered commit, its key's seq; the alerts it raises are
/// added to `alerts`. None when the guard matched nothing.
async fn transition_on(
    tx: &mut PgConnection,
    t: &Transition,
    alerts: &mut Vec<NewAlert>,
) -> StoreResult<Option<Message>> {
    let rows = transition_together(tx, std::slice::from_ref(t)).await?;
    let Some(mut row) = rows.into_iter().next() else {
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

    async fn insert_tombstone(&self, t: &Tombstone<'_>) -> StoreResult<Option<Message>> {
        sql::insert_tombstone(self.write_tx().await?, t).await
    }

    async fn find_message(&self, biz_id: &str, message_key: &str) -> StoreResult<Option<Message>> {
        sql::find_message(&self.pool, biz_id, message_key).await
    }

    async fn find_messages(&self, keys: &[(&str, &str)]) -> StoreResult<Vec<Message>> {
        sql::select_by_keys(&self.pool, MESSAGE_COLUMNS, keys).await
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
