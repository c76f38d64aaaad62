//! [`HousekeepingStore`] on PostgreSQL: the overdue watch, retention, the move
//! of long contents, the backlog and the flow per minute.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Postgres;

use crate::store::sql::{self};
use crate::store::{
    Backlog, FlowMinute, HousekeepingStore, Overdue, PayloadMove, StoreResult, Wait,
};

use super::PgStore;

#[async_trait]
impl HousekeepingStore for PgStore {
    async fn flag_overdue(
        &self,
        wait: Wait,
        older_than: Duration,
        limit: u32,
    ) -> StoreResult<Vec<Overdue>> {
        sql::flag_overdue(&self.pool, wait, older_than, limit).await
    }

    async fn purge_finished(&self, older_than: Duration, limit: u32) -> StoreResult<u64> {
        let mut tx = self.pool.begin().await?;
        let n = sql::purge_finished::<Postgres>(&mut tx, older_than, limit).await?;
        tx.commit().await?;
        Ok(n)
    }

    async fn move_payloads(&self, limit: u32) -> StoreResult<PayloadMove> {
        let mut tx = self.pool.begin().await?;
        let chunk = sql::move_chunk::<Postgres>(&mut tx, " FOR UPDATE", limit).await?;
        tx.commit().await?;
        Ok(chunk)
    }

    async fn backlog(&self) -> StoreResult<Backlog> {
        sql::backlog(&self.pool).await
    }

    async fn add_flow(&self, f: &FlowMinute) -> StoreResult<()> {
        const UPSERT: sql::Upsert = sql::Upsert {
            clause: "ON CONFLICT (minute) DO UPDATE SET",
            proposed: proposed_flow_value,
        };
        sql::add_flow(&self.pool, &UPSERT, f).await
    }

    async fn flow_since(&self, since: DateTime<Utc>) -> StoreResult<Vec<FlowMinute>> {
        sql::flow_since(&self.pool, since).await
    }

    async fn purge_flow(&self, before: DateTime<Utc>) -> StoreResult<u64> {
        sql::purge_flow(&self.pool, before).await
    }
}

/// How an upsert of `flow_minutes` names the value proposed for column `c`.
fn proposed_flow_value(c: &str) -> String {
    format!("excluded.{c}")
}
