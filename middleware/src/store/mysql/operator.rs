//! [`OperatorStore`] on MySQL: an operator's guarded change of one message
//! with its audit row, a blocked key's skip, the bulk requeues, the list
//! and the summary.

use async_trait::async_trait;
use sqlx::MySql;
use trustmsg_verify_api::MessageView;

use crate::store::sql::{self, AuditRow, Dialect};
use crate::store::{
    Actor, Message, MessageFilter, OperatorStore, ProducerSummary, Requeue, RequeuedChunk,
    StoreResult,
};

use super::{select_messages_by_ids, MySqlStore};

#[async_trait]
impl OperatorStore for MySqlStore {
    async fn redeliver(
        &self,
        id: u64,
        version: u64,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        let audit = AuditRow::redeliver(id, actor, reason);
        self.operator_update(sql::redeliver_update(MySql::NOW), id, version, audit)
            .await
    }

    async fn skip_blocked(
        &self,
        m: &Message,
        actor: &Actor,
        reason: &str,
    ) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin().await?;
        let row = sql::skip::<MySql>(&mut tx, m, actor, reason).await?;
        // A lost guard ends the transaction now, not when the connection is
        // next used: its locks must not hold the key back meanwhile.
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
        self.operator_update(sql::send_now_update(MySql::NOW), id, version, audit)
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
        let chunk = sql::requeue_chunk::<MySql>(
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

impl MySqlStore {
    /// An operator's change of one message: `update` (binds `id`, `version`:
    /// its guard) and `audit`, in one transaction; the row as it is then.
    /// None when the guard matched nothing: the transaction ends at once,
    /// not when its connection is next used, so the row's lock cannot make a
    /// sweeper's SKIP LOCKED pass it by meanwhile.
    async fn operator_update(
        &self,
        update: String,
        id: u64,
        version: u64,
        audit: AuditRow,
    ) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(sqlx::AssertSqlSafe(update))
            .bind(id)
            .bind(version)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(None);
        }
        sql::insert_audits(&mut *tx, &[audit]).await?;
        let row = select_messages_by_ids(&mut *tx, &[id]).await?.pop();
        tx.commit().await?;
        Ok(row)
    }
}
