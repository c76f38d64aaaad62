//! [`OperatorStore`] on PostgreSQL: an operator's guarded change of one message
//! with its audit row, a blocked key's skip, the bulk requeues, the list
//! and the summary.

use async_trait::async_trait;
use sqlx::Postgres;
use trustmsg_verify_api::MessageView;

use crate::store::sql::{self, AuditRow, MESSAGE_COLUMNS};
use crate::store::{
    Actor, Message, MessageFilter, OperatorStore, ProducerSummary, Requeue, RequeuedChunk,
    StoreResult,
};

use super::{first_message, sql_int, PgStore, NOW};
use crate::store::sql::stmt;

#[async_trait]
impl OperatorStore for PgStore {
    async fn redeliver(
        &self,
        id: u64,
        version: u64,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        let audit = AuditRow::redeliver(id, actor, reason);
        self.operator_update(sql::redeliver_update(NOW), id, version, audit)
            .await
    }

    async fn skip_blocked(
        &self,
        m: &Message,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin().await?;
        let row = sql::skip::<Postgres>(&mut tx, m, actor, reason).await?;
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
        self.operator_update(sql::send_now_update(NOW), id, version, audit)
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
        let mut tx = self.pool.begin().await?;
        let chunk = sql::requeue_chunk::<Postgres>(
            &mut tx,
            " FOR UPDATE",
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

impl PgStore {
    /// An operator's change of one message: `update` (binds `id`, `version`:
    /// its guard) and `audit`, in one transaction; the row as it is then.
    /// None when the guard matched nothing.
    async fn operator_update(
        &self,
        update: String,
        id: u64,
        version: u64,
        audit: AuditRow,
    ) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin().await?;
        let rows = sqlx::query(stmt::<Postgres>(format!(
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
