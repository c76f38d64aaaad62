//! An operator's guarded change of one message with its audit row on PostgreSQL
//! (the rest of [`crate::store::OperatorStore`] is written once, in
//! [`crate::store::sql::backend`]).

use sqlx::Postgres;

use crate::store::sql::{self, AuditRow, MESSAGE_COLUMNS};
use crate::store::{Message, StoreResult};

use super::{first_message, sql_int, PgStore};
use crate::store::sql::stmt;

impl PgStore {
    /// An operator's change of one message: `update` (binds `id`, `version`:
    /// its guard) and `audit`, in one transaction; the row as it is then.
    /// None when the guard matched nothing.
    pub(super) async fn operator_update(
        &self,
        update: String,
        id: u64,
        version: u64,
        audit: AuditRow,
    ) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin().await?;
        let rows = sqlx::query(stmt::<Postgres>(format!(
            "{update} RETURNING {MESSAGE_COLUMNS}"
        )))
        .bind(sql_int(id))
        .bind(sql_int(version))
        .fetch_all(&mut *tx)
        .await?;
        let Some(row) = first_message(&rows)? else {
            tx.rollback().await?;
            return Ok(None);
        };
        sql::insert_audits(&mut *tx, &[audit]).await?;
        tx.commit().await?;
        Ok(Some(row))
    }
}
