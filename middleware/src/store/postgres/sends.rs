//! [`SendStore`] on PostgreSQL: the send claim, the SENT marks (one statement
//! for a batch), retries, releases and SEND_FAILED.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::Postgres;

use crate::store::sql::{self, clip_error, stmt, ClaimKind, Lease};
use crate::store::{Actor, Claimed, Message, PayloadRoom, SendStore, SentMark, StoreResult};

use super::PgQuery;
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
        // Ordered messages' marks move their keys on, in a transaction of
        // their own; the others take one statement.
        let (ordered, plain): (Vec<&SentMark>, Vec<&SentMark>) =
            marks.iter().partition(|m| m.order.is_some());
        let mut matched = 0;
        if !ordered.is_empty() {
            let ordered: Vec<SentMark> = ordered.into_iter().cloned().collect();
            let mut tx = self.pool.begin().await?;
            matched += sql::mark_sent_ordered::<Postgres>(&mut tx, &ordered).await?;
            tx.commit().await?;
        }
        if !plain.is_empty() {
            matched += mark_sent_statement(&plain)
                .execute(&self.pool)
                .await?
                .rows_affected();
        }
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

/// The guarded SENT UPDATE of `marks` (not empty), one statement for the
/// lot whatever their number: the marks, bound as arrays, are a table
/// joined on (id, version), the claim's guard, so each row takes the
/// partition and offset of its own claim's mark (a stale owner's mark for
/// the same id joins nothing).
fn mark_sent_statement<'q>(marks: &[&SentMark]) -> PgQuery<'q> {
    sqlx::query(stmt::<Postgres>(format!(
        "UPDATE messages m SET send_status = 'SENT', next_send_at = NULL, \
         sent_at = {NOW}, updated_at = {NOW}, version = m.version + 1, \
         send_attempts = m.send_attempts + 1, kafka_partition = s.kafka_partition, \
         kafka_offset = s.kafka_offset \
         FROM UNNEST(?::BIGINT[], ?::BIGINT[], ?::INTEGER[], ?::BIGINT[]) \
             AS s (id, version, kafka_partition, kafka_offset) \
         WHERE m.id = s.id AND m.version = s.version \
         AND m.status = 'COMMITTED' AND m.send_status = 'PENDING'"
    )))
    .bind(marks.iter().map(|m| sql_int(m.id)).collect::<Vec<i64>>())
    .bind(
        marks
            .iter()
            .map(|m| sql_int(m.version))
            .collect::<Vec<i64>>(),
    )
    .bind(marks.iter().map(|m| m.partition).collect::<Vec<i32>>())
    .bind(marks.iter().map(|m| m.offset).collect::<Vec<i64>>())
}
