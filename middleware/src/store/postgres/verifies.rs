//! [`VerifyStore`] on PostgreSQL: the check-back claim, its retries and
//! releases, and the record of check-back calls.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::Postgres;

use crate::store::sql::{self, clip_error, stmt, ClaimKind, Lease};
use crate::store::{
    CheckAttempt, CheckAttemptEntry, Claimed, PayloadRoom, StoreResult, VerifyLease, VerifyStore,
};

use super::{millis, sql_int, PgStore, MS, NOW};

#[async_trait]
impl VerifyStore for PgStore {
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
        let done = sqlx::query(stmt::<Postgres>(format!(
            "UPDATE messages SET verify_attempts = verify_attempts + 1, last_error = ?, \
             next_verify_at = {NOW} + ?{MS}, version = version + 1, updated_at = {NOW} \
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
        // One transaction for the batch: one commit to wait for.
        let mut tx = self.pool.begin().await?;
        let mut matched = 0;
        for (id, version) in claims {
            matched += sqlx::query(stmt::<Postgres>(format!(
                "UPDATE messages SET next_verify_at = {NOW} + ?{MS}, version = version + 1 \
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
