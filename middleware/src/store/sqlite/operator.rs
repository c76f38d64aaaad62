//! [`OperatorStore`] on SQLite: an operator's guarded change of one message
//! with its audit row, a blocked key's skip, the bulk requeues, the list
//! and the summary.

use async_trait::async_trait;
use sqlx::Sqlite;
use trustmsg_verify_api::MessageView;

use crate::store::sql::{self, AuditRow, MESSAGE_COLUMNS};
use crate::store::{
    Actor, Message, MessageFilter, OperatorStore, ProducerSummary, Requeue, RequeuedChunk,
    StoreResult,
};

use super::{first_message, sql_int, SqliteStore, NOW_MS};

#[async_trait]
impl OperatorStore for SqliteStore {
    async fn redeliver(
        &self,
        id: u64,
        version: u64,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        let audit = AuditRow::redeliver(id, actor, reason);
        self.operator_update(sql::redeliver_update(NOW_MS), id, version, audit)
            .await
    }

    async fn skip_blocked(
        &self,
        m: &Message,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let row = sql::skip::<Sqlite>(&mut tx, m, actor, reason).await?;
        // A lost guard ends the transaction now: BEGIN IMMEDIATE holds the
        // database's write lock until then.
        if row.is_some() {
            tx.commit().await?;
        } else {
            tx.rollback().await?;
        }
        Ok(row)
    }

    async fn blocked_by(&self, m: &Message) -> StoreResult<Option<u64>> {
        sql::blocked_by(&self.pool, m).await
    }

    async fn send_now(
        &self,
        id: u64,
        version: u64,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        let audit = AuditRow::send_now(id, actor, reason);
        self.operator_update(sql::send_now_update(NOW_MS), id, version, audit)
            .await
    }

    async fn requeue_chunk(
        &self,
        requeue: Requeue,
        filter: &MessageFilter,
        after_id: u64,
        limit: u32,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<RequeuedChunk> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let chunk = sql::requeue_chunk::<Sqlite>(
            &mut tx,
            "",
            requeue,
            filter,
            (after_id, limit),
            actor,
            reason,
        )
        .await?;
        tx.commit().await?;
        Ok(chunk)
    }

    async fn count_requeueable(
        &self,
        requeue: Requeue,
        filter: &MessageFilter,
    ) -> StoreResult<u64> {
        sql::count_requeueable(&self.pool, requeue, filter).await
    }

    async fn list_messages(
        &self,
        filter: &MessageFilter,
        limit: u32,
        before: Option<u64>,
    ) -> StoreResult<Vec<MessageView>> {
        sql::list_messages(&self.pool, filter, limit, before).await
    }

    async fn summary(&self, recent: std::time::Duration) -> StoreResult<Vec<ProducerSummary>> {
        sql::summary(&self.pool, recent).await
    }
}

impl SqliteStore {
    /// An operator's change of one message: `update` (binds `id`, `version`:
    /// its guard) and `audit`, in one transaction; the row as it is then.
    /// None when the guard matched nothing: the transaction ends at once,
    /// since `BEGIN IMMEDIATE` holds the database's write lock until then.
    async fn operator_update(
        &self,
        update: String,
        id: u64,
        version: u64,
        audit: AuditRow,
    ) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "{update} RETURNING {MESSAGE_COLUMNS}"
        )))
        .bind(sql_int(id))
        .bind(sql_int(version))
        .fetch_all(&mut *tx)
        .await?;
        let Some(row) = first_message(&rows)? else {
            tx.rollback().await?;
            return Ok(None);
        };
        sql::insert_audits(&mut *tx, &[audit]).await?;
        tx.commit().await?;
        Ok(Some(row))
    }
}
