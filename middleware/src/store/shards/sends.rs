//! [`SendStore`] over the shards: the send claim spread over the shards
//! (shard after shard when a payload room bounds it), marks and retries
//! on the shard each id names.

use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;

use crate::store::mysql::MySqlStore;
use crate::store::{
    Actor, Claimed, Message, PayloadRoom, Reschedule, SendOwner, SendStore, SentMark, StoreResult,
};

use super::fanout::merge;
use super::ShardedStore;

impl ShardedStore {
    /// The answers of the shards that gave one (each other one noted as
    /// left out), or the first error when none did.
    fn answered<T>(&self, what: &str, results: Vec<StoreResult<T>>) -> StoreResult<Vec<T>> {
        let mut answers = Vec::new();
        let mut first_error = None;
        for (i, r) in results.into_iter().enumerate() {
            match r {
                Ok(t) => answers.push(t),
                Err(e) => {
                    self.left_out(i, what, &e);
                    first_error.get_or_insert(e);
                }
            }
        }
        match (answers.is_empty(), first_error) {
            (true, Some(e)) => Err(e),
            _ => Ok(answers),
        }
    }

    /// A send claim (`claim(shard, limit, room)`) spread over the shards.
    async fn claim_sends<'a, F, Fut>(
        &'a self,
        limit: u32,
        room: PayloadRoom,
        claim: F,
    ) -> StoreResult<Claimed>
    where
        F: Fn(&'a MySqlStore, u32, PayloadRoom) -> Fut,
        Fut: std::future::Future<Output = StoreResult<Claimed>> + 'a,
    {
        if room.fits_any(limit) {
            return self
                .spread("claiming sends", limit, |s, share| claim(s, share, room))
                .await;
        }
        // The room bounds what the claims read together: one shard after
        // another, each with the room the ones before it left, starting
        // from a different shard each time.
        let first = self.turn.fetch_add(1, Ordering::Relaxed);
        let mut merged = Claimed::default();
        let mut left = room;
        let mut first_error = None;
        let mut answered = false;
        for k in 0..self.shards.len() {
            let i = (first + k) % self.shards.len();
            let taken = u32::try_from(merged.messages.len()).unwrap_or(u32::MAX);
            if taken >= limit {
                break;
            }
            if !self.is_up(i) {
                continue;
            }
            match claim(&self.shards[i].store, limit - taken, left).await {
                Ok(c) => {
                    answered = true;
                    let read: u64 = c.messages.iter().map(|m| m.payload.len() as u64).sum();
                    left.bytes = left.bytes.saturating_sub(read);
                    merge(&mut merged, c);
                }
                Err(e) => {
                    self.left_out(i, "claiming sends", &e);
                    first_error.get_or_insert(e);
                }
            }
        }
        match (answered, first_error) {
            (true, _) => Ok(merged),
            (false, Some(e)) => Err(e),
            (false, None) => Err(Self::none_up()),
        }
    }
}

#[async_trait]
impl SendStore for ShardedStore {
    async fn claim_due_sends(
        &self,
        limit: u32,
        room: PayloadRoom,
        lease: Duration,
    ) -> StoreResult<Claimed> {
        self.claim_sends(limit, room, |s, limit, room| {
            s.claim_due_sends(limit, room, lease)
        })
        .await
    }

    async fn claim_owned_sends(
        &self,
        owner: &SendOwner,
        limit: u32,
        room: PayloadRoom,
        lease: Duration,
    ) -> StoreResult<Claimed> {
        self.claim_sends(limit, room, |s, limit, room| {
            s.claim_owned_sends(owner, limit, room, lease)
        })
        .await
    }

    /// The shards that answer: a shard that is down holds its lapsed
    /// claims until it is back, and the others' are not kept waiting.
    async fn lapsed_owners(&self, me: &SendOwner) -> StoreResult<Vec<SendOwner>> {
        let mut owners = Vec::new();
        for names in self.answered("lapsed owners", self.each(|_, s| s.lapsed_owners(me)).await)? {
            owners.extend(names);
        }
        owners.sort();
        owners.dedup();
        Ok(owners)
    }

    /// On the shards that answer; a shard that is down gives its claims
    /// back at a later round, when the owner is found lapsed there again.
    async fn release_owner(&self, owner: &SendOwner) -> StoreResult<u64> {
        let released = self.answered(
            "releasing an owner",
            self.each(|_, s| s.release_owner(owner)).await,
        )?;
        Ok(released.into_iter().sum())
    }

    /// Asked of every shard (a row may have moved), each answering for the
    /// rows it holds; whole or an error.
    async fn held_claims(&self, owner: &SendOwner, ids: &[u64]) -> StoreResult<Vec<(u64, u64)>> {
        let held = Self::all(self.each(|_, s| s.held_claims(owner, ids)).await)?;
        Ok(held.concat())
    }

    /// Asked of every shard; whole or an error.
    async fn lapsed_claims(&self, owner: &SendOwner) -> StoreResult<Vec<(u64, u64)>> {
        let lapsed = Self::all(self.each(|_, s| s.lapsed_claims(owner)).await)?;
        Ok(lapsed.concat())
    }

    /// On every shard (each guard matches where its row is); whole or an
    /// error.
    async fn release_claims_of(
        &self,
        owner: &SendOwner,
        claims: &[(u64, u64)],
    ) -> StoreResult<u64> {
        let released = Self::all(self.each(|_, s| s.release_claims_of(owner, claims)).await)?;
        Ok(released.into_iter().sum())
    }

    async fn mark_sent(&self, marks: &[SentMark]) -> StoreResult<u64> {
        self.counted_by_ids(
            marks,
            |m| m.id,
            |s, part| async move { s.mark_sent(&part).await },
        )
        .await
    }

    async fn reschedule_send(&self, r: &Reschedule) -> StoreResult<bool> {
        self.by_id(r.id, |s| s.reschedule_send(r), |done| !done)
            .await
    }

    async fn postpone_send(&self, r: &Reschedule) -> StoreResult<bool> {
        self.by_id(r.id, |s| s.postpone_send(r), |done| !done).await
    }

    async fn release_sends(&self, claims: &[(u64, u64)]) -> StoreResult<u64> {
        self.counted_by_ids(
            claims,
            |c| c.0,
            |s, part| async move { s.release_sends(&part).await },
        )
        .await
    }

    async fn mark_send_failed(
        &self,
        id: u64,
        version: u64,
        error: &str,
        actor: &Actor,
    ) -> StoreResult<Option<Message>> {
        self.by_id(
            id,
            |s| s.mark_send_failed(id, version, error, actor),
            Option::is_none,
        )
        .await
    }
}
