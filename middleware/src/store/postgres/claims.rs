//! Claims on PostgreSQL: the returning claim (`sql::returning_claim`),
//! whose `FOR UPDATE SKIP LOCKED` lets concurrent instances split the due
//! rows instead of queueing on each other's locks, run in one transaction
//! with the read of the contents kept apart and the quarantine of the rows
//! that cannot be read: the row locks keep other claimers off until the
//! lease (or the quarantine) is written. A check-back lease is worked out
//! from the row's producer with a plain read (PostgreSQL locks no row it
//! only reads). Messages (sends and check-backs), alerts and waiting
//! commits are claimed here.

use std::time::Duration;

use sqlx::postgres::PgRow;
use sqlx::Postgres;

use crate::store::sql::{self, MessageClaim, ReturningClaim};
use crate::store::{Claimed, StoreResult};

use super::{PgStore, MS, NOW};

impl ReturningClaim for Postgres {
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    const LEAST: &'static str = "LEAST";

    fn now_plus_ms(ms: &str) -> String {
        format!("{NOW} + {ms}{MS}")
    }
}

impl PgStore {
    /// [`sql::claim_due_rows`] on the pool: the alert outbox and waiting
    /// commits are claimed this way.
    pub(super) async fn claim_due_rows(
        &self,
        what: (&str, &str, &str),
        limit: u32,
        lease: Duration,
    ) -> StoreResult<Vec<PgRow>> {
        sql::claim_due_rows(&self.pool, what, limit, lease).await
    }

    /// Takes the due rows, then reads the contents kept apart and
    /// quarantines the rows that cannot be read, all in one transaction.
    pub(super) async fn claim_due(&self, claim: MessageClaim) -> StoreResult<Claimed> {
        let kind = claim.kind;
        let mut tx = self.pool.begin().await?;
        let rows = claim.query::<Postgres>().fetch_all(&mut *tx).await?;
        let out_of_room = claim.out_of_room(&mut *tx, rows.len()).await?;
        let (claimed_at, mut decoded) = sql::decode_returned(rows)?;
        let apart = std::mem::take(&mut decoded.apart);
        let more = sql::fill_apart(&mut *tx, &mut decoded.messages, &apart).await?;
        let (messages, unreadable) = decoded.in_id_order(more);
        let (quarantined, raised) = if unreadable.is_empty() {
            Default::default()
        } else {
            sql::quarantine::<Postgres>(&mut tx, kind, unreadable).await?
        };
        tx.commit().await?;
        raised.announce();
        Ok(Claimed {
            messages,
            quarantined,
            claimed_at,
            out_of_room,
        })
    }
}
