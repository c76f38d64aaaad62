//! [`VerifyStore`] on SQLite: the check-back claim, its retries and
//! releases, and the record of check-back calls.

use std::time::Duration;

use async_trait::async_trait;

use crate::store::sql::{self, clip_error, ClaimKind, Lease};
use crate::store::{
    CheckAttempt, CheckAttemptEntry, Claimed, PayloadRoom, StoreResult, VerifyLease, VerifyStore,
};

use super::{millis, sql_int, SqliteStore, NOW_MS};

#[async_trait]
impl VerifyStore for SqliteStore {
    async fn claim_due_verifies(&self, limit: u32, lease: VerifyLease) -> StoreResult<Claimed> {
        self.claim_due(
            ClaimKind::Verifies,
            limit,
            PayloadRoom::UNBOUNDED,
            Lease::Verify(lease),
        )
        .await
    }

    async fn reschedule_verify(
        &self,
        id: u64,
        version: u64,
        error: &str,
        delay: Duration,
    ) -> StoreResult<bool> {
        let done = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE messages SET verify_attempts = verify_attempts + 1, last_error = ?, \
             next_verify_at = {NOW_MS} + ?, version = version + 1, updated_at = {NOW_MS} \
             WHERE id = ? AND version = ? AND status = 'PREPARED'"
        )))
        .bind(clip_error(error))
        .bind(millis(delay))
        .bind(sql_int(id))
        .bind(sql_int(version))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn release_verifies(&self, claims: &[(u64, u64)], delay: Duration) -> StoreResult<u64> {
        if claims.is_empty() {
            return Ok(0);
        }
        // One transaction for the batch: one fsync, and the write lock is taken once.
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let mut matched = 0;
        for (id, version) in claims {
            matched += sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE messages SET next_verify_at = {NOW_MS} + ?, version = version + 1 \
                 WHERE id = ? AND version = ? AND status = 'PREPARED'"
            )))
            .bind(millis(delay))
            .bind(sql_int(*id))
            .bind(sql_int(*version))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        tx.commit().await?;
        Ok(matched)
    }

    async fn record_check_attempts(&self, calls: &[CheckAttempt]) -> StoreResult<()> {
        sql::record_check_attempts(&self.pool, calls).await
    }

    async fn check_attempts(&self, message_id: u64) -> StoreResult<Vec<CheckAttemptEntry>> {
        sql::check_attempts(&self.pool, message_id).await
    }
}
