//! An operator's guarded change of one message with its audit row on SQLite
//! (the rest of [`crate::store::OperatorStore`] is written once, in
//! [`crate::store::sql::backend`]).

use crate::store::sql::{self, AuditRow, MESSAGE_COLUMNS};
use crate::store::{Message, StoreResult};

use super::{first_message, sql_int, SqliteStore};

impl SqliteStore {
    /// An operator's change of one message: `update` (binds `id`, `version`:
    /// its guard) and `audit`, in one transaction; the row as it is then.
    /// None when the guard matched nothing: the transaction ends at once,
    /// since `BEGIN IMMEDIATE` holds the database's write lock until then.
    pub(super) async fn operator_update(
        &self,
        update: String,
        id: u64,
        version: u64,
        audit: AuditRow,
    ) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
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
