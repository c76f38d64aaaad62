//! [`WaitingStore`] on PostgreSQL: commits waiting for their prepare.

use std::time::Duration;

use async_trait::async_trait;

use crate::store::sql::{self};
use crate::store::{StoreResult, WaitingStore};

use super::{PgStore, NOW};

#[async_trait]
impl WaitingStore for PgStore {
    async fn park_commit(&self, w: &crate::store::NewWaitingCommit) -> StoreResult<bool> {
        sql::park_commit(&self.pool, w).await
    }

    async fn claim_waiting_commits(
        &self,
        limit: u32,
        lease: Duration,
    ) -> StoreResult<Vec<crate::store::WaitingCommit>> {
        let columns = format!("{}, {NOW} AS now", sql::WAITING_COLUMNS);
        let rows = self
            .claim_due_rows(&columns, "submit_waiting", "next_try_at", limit, lease)
            .await?;
        let mut waiting = rows
            .iter()
            .map(sql::waiting_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        // RETURNING comes in no defined order.
        waiting.sort_by_key(|w| w.id);
        Ok(waiting)
    }

    async fn retry_waiting_commit(&self, id: u64, delay: Duration) -> StoreResult<bool> {
        sql::retry_waiting_commit(&self.pool, id, delay).await
    }

    async fn count_waiting_commits(&self) -> StoreResult<u64> {
        sql::count_waiting_commits(&self.pool).await
    }

    async fn unpark_commit(&self, id: u64) -> StoreResult<bool> {
        sql::unpark_commit(&self.pool, id).await
    }

    async fn list_waiting_commits(
        &self,
        limit: u32,
        after: u64,
    ) -> StoreResult<Vec<crate::store::WaitingCommit>> {
        sql::list_waiting_commits(&self.pool, limit, after).await
    }
}
