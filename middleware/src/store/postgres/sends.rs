//! [`SendStore`] on PostgreSQL: the send claim, the SENT marks (one transaction
//! for a batch), retries, releases and SEND_FAILED.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::Postgres;

use crate::store::sql::{self, clip_error, stmt, ClaimKind, Lease};
use crate::store::{Actor, Claimed, Message, PayloadRoom, SendStore, SentMark, StoreResult};

use super::{millis, sql_int, PgStore, MS, NOW};

#[async_trait]
impl SendStore for PgStore {
    async fn claim_due_sends(
        &self,
        limit: u32,
        room: PayloadRoom,
        lease: Duration,
    ) -> StoreResult<Claimed> {
        self.claim_due(ClaimKind::Sends, limit, room, Lease::Every(lease))
            .await
    }

    async fn mark_sent(&self, marks: &[SentMark]) -> StoreResult<u64> {
        if marks.is_empty() {
            return Ok(0);
        }
        // One transaction for the batch: one commit to wait for.
        let mut tx = self.pool.begin().await?;
        let mut matched = sql::mark_sent_ordered::<Postgres>(&mut tx, marks).await?;
        for m in marks.iter().filter(|m| m.order.is_none()) {
            matched += sqlx::query(stmt::<Postgres>(format!(
                "UPDATE messages SET send_status = 'SENT', next_send_at = NULL, \
                 sent_at = {NOW}, updated_at = {NOW}, version = version + 1, \
                 send_attempts = send_attempts + 1, kafka_partition = ?, kafka_offset = ? \
                 WHERE id = ? AND version = ? AND status = 'COMMITTED' AND send_status = 'PENDING'"
            )))
            .bind(m.partition)
            .bind(m.offset)
            .bind(sql_int(m.id))
            .bind(sql_int(m.version))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        tx.commit().await?;
        Ok(matched)
    }

    async fn reschedule_send(
        &self,
        id: u64,
        version: u64,
        error: &str,
        delay: Duration,
    ) -> StoreResult<bool> {
        self.retry_send_later(id, version, error, delay, 1).await
    }

    async fn postpone_send(
        &self,
        id: u64,
        version: u64,
        error: &str,
        delay: Duration,
    ) -> StoreResult<bool> {
        self.retry_send_later(id, version, error, delay, 0).await
    }

    async fn release_sends(&self, claims: &[(u64, u64)]) -> StoreResult<u64> {
        sql::release_sends(&self.pool, claims).await
    }

    async fn mark_send_failed(
        &self,
        id: u64,
        version: u64,
        error: &str,
        actor: &Actor,
    ) -> StoreResult<Option<Message>> {
        let tx = self.pool.begin().await?;
        sql::mark_send_failed::<Postgres>(tx, " FOR UPDATE", (id, version), error, actor).await
    }
}

impl PgStore {
    /// Reschedules a pending send after `delay`, recording `error` and adding
    /// `counted` (0 or 1) to its attempts.
    async fn retry_send_later(
        &self,
        id: u64,
        version: u64,
        error: &str,
        delay: Duration,
        counted: i64,
    ) -> StoreResult<bool> {
        let done = sqlx::query(stmt::<Postgres>(format!(
            "UPDATE messages SET send_attempts = send_attempts + ?, last_error = ?, \
             next_send_at = {NOW} + ?{MS}, version = version + 1, updated_at = {NOW} \
             WHERE id = ? AND version = ? AND status = 'COMMITTED' AND send_status = 'PENDING'"
        )))
        .bind(counted)
        .bind(clip_error(error))
        .bind(millis(delay))
        .bind(sql_int(id))
        .bind(sql_int(version))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}
