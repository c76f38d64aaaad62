//! The SENT marks on PostgreSQL: one statement for a batch (the rest of
//! [`crate::store::SendStore`] is written once, in
//! [`crate::store::sql::backend`]).

use sqlx::Postgres;

use crate::store::sql::{self, stmt};
use crate::store::{SentMark, StoreResult};

use super::{sql_int, PgQuery, PgStore, NOW};

impl PgStore {
    /// The SENT marks of `marks` (not empty), the fastest way this
    /// database has.
    pub(super) async fn mark_sent_rows(&self, marks: &[SentMark]) -> StoreResult<u64> {
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
