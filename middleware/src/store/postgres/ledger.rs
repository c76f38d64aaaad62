//! [`LedgerStore`] on PostgreSQL: begin and finish each in a transaction
//! that holds the consumption's row lock (`FOR UPDATE`), as on MySQL.

use async_trait::async_trait;
use sqlx::Postgres;

use crate::store::sql::{self};
use crate::store::{
    Began, ConsumerGroup, ConsumerGroupCounts, Consumption, Finished, LedgerStore, StoreResult,
    StuckConsumption,
};

use super::PgStore;

#[async_trait]
impl LedgerStore for PgStore {
    async fn begin_consumption(
        &self,
        group: &ConsumerGroup,
        message_id: u64,
    ) -> StoreResult<Began> {
        let mut tx = self.pool.begin().await?;
        let began = sql::begin_consumption::<Postgres>(
            &mut tx,
            "ON CONFLICT (group_name, message_id) DO NOTHING",
            " FOR UPDATE",
            group,
            message_id,
        )
        .await?;
        tx.commit().await?;
        Ok(began)
    }

    async fn finish_consumption(
        &self,
        group: &ConsumerGroup,
        message_id: u64,
        ok: bool,
        error: Option<&str>,
    ) -> StoreResult<Finished> {
        let mut tx = self.pool.begin().await?;
        let (finished, raised) = sql::finish_consumption::<Postgres>(
            &mut tx,
            " FOR UPDATE",
            group,
            message_id,
            ok,
            error,
        )
        .await?;
        tx.commit().await?;
        raised.announce();
        Ok(finished)
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
