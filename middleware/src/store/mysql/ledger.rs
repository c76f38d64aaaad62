//! [`LedgerStore`] on MySQL: begin and finish under the consumption's row
//! lock, retried a few times when they lose a deadlock.

use async_trait::async_trait;
use sqlx::MySql;

use crate::store::sql::{self};
use crate::store::{
    Began, ConsumerGroup, ConsumerGroupCounts, Consumption, Finished, LedgerStore, StoreError,
    StoreResult, StuckConsumption,
};

use super::{is_lock_conflict, MySqlStore};

#[async_trait]
impl LedgerStore for MySqlStore {
    async fn begin_consumption(
        &self,
        group: &ConsumerGroup,
        message_id: u64,
    ) -> StoreResult<Began> {
        // The upsert X-locks an existing row as the INSERT locks a new one.
        const KEEP: &str = "ON DUPLICATE KEY UPDATE attempts = attempts";
        for _ in 0..LEDGER_TRIES {
            let mut tx = self.pool.begin().await?;
            match sql::begin_consumption::<MySql>(&mut tx, KEEP, " FOR UPDATE", group, message_id)
                .await
            {
                Ok(began) => {
                    tx.commit().await?;
                    return Ok(began);
                }
                Err(StoreError::Db(e)) if is_lock_conflict(&e) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::Contention("begin a consumption"))
    }

    async fn finish_consumption(
        &self,
        group: &ConsumerGroup,
        message_id: u64,
        ok: bool,
        error: Option<&str>,
    ) -> StoreResult<Finished> {
        for _ in 0..LEDGER_TRIES {
            let mut tx = self.pool.begin().await?;
            let finished = sql::finish_consumption::<MySql>(
                &mut tx,
                " FOR UPDATE",
                group,
                message_id,
                ok,
                error,
            );
            match finished.await {
                Ok((finished, raised)) => {
                    tx.commit().await?;
                    raised.announce();
                    return Ok(finished);
                }
                Err(StoreError::Db(e)) if is_lock_conflict(&e) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::Contention("finish a consumption"))
    }

    async fn consumptions_of(&self, message_id: u64) -> StoreResult<Vec<Consumption>> {
        sql::consumptions_of(&self.pool, message_id).await
    }

    async fn flag_stuck_consumptions(&self, limit: u32) -> StoreResult<Vec<StuckConsumption>> {
        sql::flag_stuck_consumptions(&self.pool, limit).await
    }

    async fn consumer_group_counts(&self) -> StoreResult<Vec<ConsumerGroupCounts>> {
        sql::consumer_group_counts(&self.pool).await
    }
}

/// Tries of a ledger transaction that lost a deadlock before it gives up.
const LEDGER_TRIES: usize = 3;
