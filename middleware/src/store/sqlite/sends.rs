//! The SENT marks on SQLite: one transaction for a batch (the rest of
//! [`crate::store::SendStore`] is written once, in
//! [`crate::store::sql::backend`]).

use sqlx::Sqlite;

use crate::store::sql;
use crate::store::{SentMark, StoreResult};

use super::{sql_int, SqliteStore, NOW_MS};

impl SqliteStore {
    /// The SENT marks of `marks` (not empty), the fastest way this
    /// database has.
    pub(super) async fn mark_sent_rows(&self, marks: &[SentMark]) -> StoreResult<u64> {
        // One transaction for the batch: one fsync, and the write lock is taken once.
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let mut matched = sql::mark_sent_ordered::<Sqlite>(&mut tx, marks).await?;
        for m in marks.iter().filter(|m| m.order.is_none()) {
            matched += sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE messages SET send_status = 'SENT', next_send_at = NULL, \
                 sent_at = {NOW_MS}, updated_at = {NOW_MS}, version = version + 1, \
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
}
