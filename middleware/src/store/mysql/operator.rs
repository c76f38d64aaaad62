//! An operator's guarded change of one message with its audit row on MySQL
//! (the rest of [`crate::store::OperatorStore`] is written once, in
//! [`crate::store::sql::backend`]).

use crate::store::sql::{self, AuditRow};
use crate::store::{Message, StoreResult};

use super::{select_messages_by_ids, MySqlStore};

impl MySqlStore {
    /// An operator's change of one message: `update` (binds `id`, `version`:
    /// its guard) and `audit`, in one transaction; the row as it is then.
    /// None when the guard matched nothing: the transaction ends at once,
    /// not when its connection is next used, so the row's lock cannot make a
    /// sweeper's SKIP LOCKED pass it by meanwhile.
    pub(super) async fn operator_update(
        &self,
        update: String,
        id: u64,
        version: u64,
        audit: AuditRow,
    ) -> StoreResult<Option<Message>> {
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(sqlx::AssertSqlSafe(update))
            .bind(id)
            .bind(version)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(None);
        }
        sql::insert_audits(&mut *tx, &[audit]).await?;
        let row = select_messages_by_ids(&mut *tx, &[id]).await?.pop();
        tx.commit().await?;
        Ok(row)
    }
}
