//! Check-back claims given back on PostgreSQL, one guarded UPDATE each in one
//! transaction (the rest of [`crate::store::VerifyStore`] is written once, in
//! [`crate::store::sql::backend`]).

use std::time::Duration;

use sqlx::Postgres;

use crate::store::sql;
use crate::store::StoreResult;

use super::PgStore;

impl PgStore {
    /// Gives the check-back claims of `claims` (not empty) back, due again
    /// `delay` from now.
    pub(super) async fn release_verify_claims(
        &self,
        claims: &[(u64, u64)],
        delay: Duration,
    ) -> StoreResult<u64> {
        // One transaction for the batch: one commit to wait for.
        let mut tx = self.write_tx().await?;
        let matched = sql::release_verifies_each::<Postgres>(&mut tx, claims, delay).await?;
        tx.commit().await?;
        Ok(matched)
    }
}
