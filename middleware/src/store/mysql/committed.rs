//! Messages created COMMITTED on MySQL: a relayed row of a producer's
//! outbox table, which the producer's own transaction decided, is one
//! INSERT of a committed row (with its audit row, its key's seq and any
//! alert, in one transaction) instead of a prepare's INSERT and a commit's
//! UPDATE: one row write and its index changes fewer per message.

use std::time::Duration;

use sqlx::MySql;

use crate::store::sql::{self, AuditRow, STORED_COLUMNS};
use crate::store::{Message, NewCommitted, NewMessage, StoreError, StoreResult};

use super::prepare::{created_apart, insert_rows, rows_by_key};
use super::transitions::BUMP_KEYS;
use super::{is_lock_conflict, is_unique_violation, MySqlStore};

impl MySqlStore {
    /// [`crate::store::MessageStore::insert_committed_batch`]: one INSERT …
    /// RETURNING of every row (MariaDB), the contents kept apart, the audit
    /// rows, the seqs and the alerts, in one transaction. None, having
    /// written nothing, without RETURNING (MySQL), for a key twice in the
    /// batch, or when a key exists already or another writer holds a lock
    /// this needs.
    pub(super) async fn insert_committed(
        &self,
        batch: &[NewCommitted],
        send_lease: Duration,
    ) -> StoreResult<Option<Vec<Message>>> {
        let Some(keys) = sql::distinct_keys(batch).filter(|_| self.returning) else {
            return Ok(None);
        };
        let messages: Vec<&NewMessage> = batch.iter().map(|c| &c.message).collect();
        let contents: Vec<sql::Content<'_>> =
            messages.iter().map(|m| sql::Content::of(m)).collect();
        let creates: Vec<(&NewMessage, &sql::Content<'_>)> =
            messages.into_iter().zip(&contents).collect();
        let mut q = insert_rows(&creates, Some(send_lease));
        q.push(format!(" RETURNING {STORED_COLUMNS}"));
        let mut tx = self.pool.begin().await?;
        let rows = match q.build().fetch_all(&mut *tx).await {
            Ok(rows) => rows,
            Err(e) if is_unique_violation(&e) || is_lock_conflict(&e) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut by_key = rows_by_key(&rows)?;
        created_apart(&mut tx, &mut by_key, &creates).await?;
        let mut created = keys
            .iter()
            .map(|(b, k)| {
                by_key
                    .remove(&(b.to_string(), k.to_string()))
                    .map(Some)
                    .ok_or(StoreError::Vanished("a row INSERT … RETURNING wrote"))
            })
            .collect::<StoreResult<Vec<Option<Message>>>>()?;
        let audits: Vec<AuditRow> = created
            .iter()
            .flatten()
            .zip(batch)
            .map(|(m, c)| AuditRow::created_committed(m.id, &c.actor, &c.reason))
            .collect();
        sql::insert_audits(&mut *tx, &audits).await?;
        let alerts = match sql::order_commit_batch::<MySql>(&mut tx, BUMP_KEYS, &mut created).await
        {
            Ok(alerts) => alerts,
            // A deadlock on a key row with another batch: undo it all.
            Err(StoreError::Db(e)) if is_lock_conflict(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let raised = sql::raise_alerts::<MySql>(&mut tx, alerts).await?;
        tx.commit().await?;
        raised.announce();
        Ok(Some(created.into_iter().flatten().collect()))
    }
}
