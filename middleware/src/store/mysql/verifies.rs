//! [`VerifyStore`] on MySQL: the check-back claim, its retries and
//! releases, and the record of check-back calls.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::{MySql, QueryBuilder};

use crate::store::sql::{self, clip_error, ClaimKind, Lease};
use crate::store::{
    CheckAttempt, CheckAttemptEntry, Claimed, PayloadRoom, StoreResult, VerifyLease, VerifyStore,
};

use super::{micros, MySqlStore};

#[async_trait]
impl VerifyStore for MySqlStore {
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
        let done = sqlx::query(
            "UPDATE messages SET verify_attempts = verify_attempts + 1, last_error = ?, \
             next_verify_at = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, version = version + 1, \
             updated_at = UTC_TIMESTAMP(3) WHERE id = ? AND version = ? AND status = 'PREPARED'",
        )
        .bind(clip_error(error))
        .bind(micros(delay))
        .bind(id)
        .bind(version)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn release_verifies(&self, claims: &[(u64, u64)], delay: Duration) -> StoreResult<u64> {
        if claims.is_empty() {
            return Ok(0);
        }
        let mut q = QueryBuilder::<MySql>::new(
            "UPDATE messages SET next_verify_at = UTC_TIMESTAMP(3) + INTERVAL ",
        );
        q.push_bind(micros(delay)).push(
            " MICROSECOND, version = version + 1 WHERE status = 'PREPARED' AND (id, version) IN (",
        );
        let mut sep = q.separated(", ");
        for (id, version) in claims {
            sep.push("(")
                .push_bind_unseparated(*id)
                .push_unseparated(", ")
                .push_bind_unseparated(*version)
                .push_unseparated(")");
        }
        q.push(")");
        Ok(q.build().execute(&self.pool).await?.rows_affected())
    }

    async fn record_check_attempts(&self, calls: &[CheckAttempt]) -> StoreResult<()> {
        sql::record_check_attempts(&self.pool, calls).await
    }

    async fn check_attempts(&self, message_id: u64) -> StoreResult<Vec<CheckAttemptEntry>> {
        sql::check_attempts(&self.pool, message_id).await
    }
}
