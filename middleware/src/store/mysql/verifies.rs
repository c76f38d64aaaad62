//! Check-back claims given back on MySQL, one `(id, version) IN` UPDATE
//! for the lot (the rest of [`crate::store::VerifyStore`] is written once,
//! in [`crate::store::sql::backend`]).

use std::time::Duration;

use sqlx::{MySql, QueryBuilder};

use crate::store::StoreResult;

use super::{micros, MySqlStore};

impl MySqlStore {
    /// Gives the check-back claims of `claims` (not empty) back, due again
    /// `delay` from now, the fastest way this database has.
    pub(super) async fn release_verify_claims(
        &self,
        claims: &[(u64, u64)],
        delay: Duration,
    ) -> StoreResult<u64> {
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
}
