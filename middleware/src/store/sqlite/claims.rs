//! Claims on SQLite: the returning claim (`sql::returning_claim`) under
//! the database's single write lock, which is what SKIP LOCKED plus row
//! locks give on MySQL; a check-back lease is worked out in the same
//! statement from the row's producer (SQLite locks no rows, so reading the
//! registration there holds nobody up). Unreadable rows are quarantined in
//! a second transaction; if that fails they keep the claim's lease and the
//! next claim after it tries again. Messages (sends and check-backs),
//! alerts and waiting commits are claimed here.

use std::time::Duration;

use sqlx::sqlite::SqliteRow;
use sqlx::Sqlite;

use crate::store::sql::{self, ClaimKind, MessageClaim, ReturningClaim};
use crate::store::{Claimed, Quarantined, StoreResult};

use super::{SqliteStore, NOW_MS};

impl ReturningClaim for Sqlite {
    const SKIP_LOCKED: &'static str = "";
    const LEAST: &'static str = "MIN";

    fn now_plus_ms(ms: &str) -> String {
        format!("{NOW_MS} + {ms}")
    }
}

impl SqliteStore {
    /// [`sql::claim_due_rows`] on the pool: the alert outbox and waiting
    /// commits are claimed this way.
    pub(super) async fn claim_due_rows(
        &self,
        what: (&str, &str, &str),
        limit: u32,
        lease: Duration,
    ) -> StoreResult<Vec<SqliteRow>> {
        sql::claim_due_rows(&self.pool, what, limit, lease).await
    }

    /// Takes the due rows in one statement, then reads the contents kept
    /// apart (the rows are claimed, so no other claimer takes them, and
    /// their content never changes) and quarantines the rows that cannot be
    /// read, each on its own.
    pub(super) async fn claim_due(&self, claim: MessageClaim) -> StoreResult<Claimed> {
        let kind = claim.kind;
        let rows = claim.query::<Sqlite>().fetch_all(&self.pool).await?;
        let out_of_room = claim.out_of_room(&self.pool, rows.len()).await?;
        let (claimed_at, mut decoded) = sql::decode_returned(rows)?;
        let apart = std::mem::take(&mut decoded.apart);
        let more = sql::fill_apart(&self.pool, &mut decoded.messages, &apart).await?;
        let (messages, unreadable) = decoded.in_id_order(more);
        let quarantined = if unreadable.is_empty() {
            Vec::new()
        } else {
            match self.quarantine(kind, unreadable).await {
                Ok(done) => done,
                Err(e) => {
                    tracing::warn!(error = %e, "could not quarantine unreadable rows; they come back after the lease");
                    Vec::new()
                }
            }
        };
        Ok(Claimed {
            messages,
            quarantined,
            claimed_at,
            out_of_room,
        })
    }

    async fn quarantine(
        &self,
        kind: ClaimKind,
        rows: Vec<Quarantined>,
    ) -> StoreResult<Vec<Quarantined>> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let (done, raised) = sql::quarantine::<Sqlite>(&mut tx, kind, rows).await?;
        tx.commit().await?;
        raised.announce();
        Ok(done)
    }
}
