//! The fan-outs: one call on every shard, a batch scattered by shard and
//! gathered in order, a claim spread over the shards in turning shares, a
//! round that goes shard after shard until its limit is used up, a count
//! by ids, a keyset page across shards; and how the shards' answers add up.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use chrono::{DateTime, Utc};
use futures::future::join_all;

use crate::store::mysql::MySqlStore;
use crate::store::{Claimed, ProducerSummary, StoreError, StoreResult};

use super::route;
use super::{holds, ShardedStore};

impl ShardedStore {
    /// `op` on every shard at once, with the shards' answers in shard order.
    pub(super) async fn each<'a, T, F, Fut>(&'a self, op: F) -> Vec<StoreResult<T>>
    where
        F: Fn(usize, &'a MySqlStore) -> Fut,
        Fut: std::future::Future<Output = StoreResult<T>> + 'a,
    {
        join_all(self.shards.iter().enumerate().map(|(i, s)| op(i, &s.store))).await
    }

    /// Every shard's answer, or the first error: for what must be whole.
    pub(super) fn all<T>(results: Vec<StoreResult<T>>) -> StoreResult<Vec<T>> {
        results.into_iter().collect()
    }

    /// The shares of a fan-out claim of `limit` over `parts` shards,
    /// turned from call to call.
    fn shares(&self, limit: u32, parts: usize) -> Vec<u32> {
        let first = self.turn.fetch_add(1, Ordering::Relaxed) % parts.max(1);
        route::shares(limit, parts, first)
    }

    /// Items grouped by the shard `shard_of` names, each with its index in
    /// `items`.
    pub(super) fn grouped<'i, T>(
        &self,
        items: &'i [T],
        shard_of: impl Fn(&T) -> usize,
    ) -> BTreeMap<usize, Vec<(usize, &'i T)>> {
        let mut groups: BTreeMap<usize, Vec<(usize, &T)>> = BTreeMap::new();
        for (i, item) in items.iter().enumerate() {
            groups.entry(shard_of(item)).or_default().push((i, item));
        }
        groups
    }

    /// The scatter and gather of a batch written shard by shard: `call`
    /// runs on each shard with the positions (in `0..n`) `shard_of` sends
    /// there, all shards at once, and must answer one result per position,
    /// in the order given; the answers come back in position order. The
    /// first shard that fails fails the batch.
    pub(super) async fn scatter<'a, R, F, Fut>(
        &'a self,
        n: usize,
        shard_of: impl Fn(usize) -> usize,
        call: F,
    ) -> StoreResult<Vec<R>>
    where
        F: Fn(&'a MySqlStore, Vec<usize>) -> Fut,
        Fut: std::future::Future<Output = StoreResult<Vec<R>>> + 'a,
    {
        let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for i in 0..n {
            groups.entry(shard_of(i)).or_default().push(i);
        }
        let results = join_all(groups.into_iter().map(|(shard, positions)| {
            let answers = call(&self.shards[shard].store, positions.clone());
            async move { Ok::<_, StoreError>(positions.into_iter().zip(answers.await?)) }
        }))
        .await;
        let mut out: Vec<Option<R>> = (0..n).map(|_| None).collect();
        for part in Self::all(results)? {
            for (i, answer) in part {
                out[i] = Some(answer);
            }
        }
        Ok(out
            .into_iter()
            .map(|a| a.expect("every shard answers each position it was given"))
            .collect())
    }

    /// A claim spread over the shards: each claims its share of `limit`
    /// through `claim`, all at once; then what is left of `limit` goes, one
    /// shard after another, to the shards that filled their share or had
    /// none (they may have more due), so one busy shard is not held to its
    /// share when the others have nothing, and a claim of fewer rows than
    /// there are shards finds what is due. The claims added up.
    pub(super) async fn spread<'a, T, F, Fut>(
        &'a self,
        what: &str,
        limit: u32,
        claim: F,
    ) -> StoreResult<T>
    where
        T: Taken,
        F: Fn(&'a MySqlStore, u32) -> Fut,
        Fut: std::future::Future<Output = StoreResult<T>> + 'a,
    {
        let up: Vec<usize> = (0..self.shards.len()).filter(|&i| self.is_up(i)).collect();
        if up.is_empty() {
            return Err(Self::none_up());
        }
        let shares = self.shares(limit, up.len());
        let results = join_all(up.iter().zip(&shares).map(|(&i, &share)| {
            let claim = &claim;
            async move {
                if share == 0 {
                    return Ok(T::default());
                }
                claim(&self.shards[i].store, share).await
            }
        }))
        .await;
        let mut total = T::default();
        let mut more = Vec::new();
        let mut first_error = None;
        let mut answered = false;
        for ((&i, share), r) in up.iter().zip(shares).zip(results) {
            match r {
                Ok(c) => {
                    answered = true;
                    if c.taken() >= share {
                        more.push(i);
                    }
                    total.add(c);
                }
                Err(e) => {
                    self.left_out(i, what, &e);
                    first_error.get_or_insert(e);
                }
            }
        }
        if let (false, Some(e)) = (answered, first_error) {
            return Err(e);
        }
        for i in more {
            let left = limit.saturating_sub(total.taken());
            if left == 0 {
                break;
            }
            match claim(&self.shards[i].store, left).await {
                Ok(c) => total.add(c),
                Err(e) => self.left_out(i, what, &e),
            }
        }
        Ok(total)
    }

    /// `op` on one shard after another, starting from a different one each
    /// time, each asked for what `limit` has left, until it is used up: for
    /// the rounds whose caller goes on while a round returns `limit` (so
    /// a shard with much to do is not held to a share, and a round that
    /// returns less than `limit` has emptied every shard that answered).
    pub(super) async fn up_to<'a, T, F, Fut>(
        &'a self,
        what: &str,
        limit: u32,
        op: F,
    ) -> StoreResult<T>
    where
        T: Taken,
        F: Fn(&'a MySqlStore, u32) -> Fut,
        Fut: std::future::Future<Output = StoreResult<T>> + 'a,
    {
        let first = self.turn.fetch_add(1, Ordering::Relaxed);
        let mut answers = Vec::with_capacity(self.shards.len());
        let mut taken = 0u32;
        for k in 0..self.shards.len() {
            let i = (first + k) % self.shards.len();
            if taken >= limit {
                break;
            }
            if !self.is_up(i) {
                continue;
            }
            let answer = op(&self.shards[i].store, limit - taken).await;
            if let Ok(t) = &answer {
                taken = taken.saturating_add(t.taken());
            }
            answers.push((i, answer));
        }
        let mut total = T::default();
        let mut first_error = None;
        let mut answered = false;
        for (i, answer) in answers {
            match answer {
                Ok(t) => {
                    answered = true;
                    total.add(t);
                }
                Err(e) => {
                    self.left_out(i, what, &e);
                    first_error.get_or_insert(e);
                }
            }
        }
        match (answered, first_error) {
            (true, _) => Ok(total),
            (false, Some(e)) => Err(e),
            (false, None) if limit == 0 => Ok(total),
            (false, None) => Err(Self::none_up()),
        }
    }

    /// `op` over `items` (each naming a message by `id_of`), one statement
    /// per shard the ids were created on, all at once; how many rows they
    /// matched, added up. When a shard matched fewer than it was given,
    /// the items whose rows it does not hold (a moved slot's) go to the
    /// shard that does, one by one.
    pub(super) async fn counted_by_ids<'a, T, F, Fut>(
        &'a self,
        items: &'a [T],
        id_of: fn(&T) -> u64,
        op: F,
    ) -> StoreResult<u64>
    where
        T: Copy,
        F: Fn(&'a MySqlStore, Vec<T>) -> Fut,
        Fut: std::future::Future<Output = StoreResult<u64>> + 'a,
    {
        let groups = self.grouped(items, |t| self.home_of_id(id_of(t)));
        let results = join_all(groups.into_iter().map(|(shard, part)| {
            let op = &op;
            async move {
                let part: Vec<T> = part.into_iter().map(|(_, t)| *t).collect();
                let store = &self.shards[shard].store;
                let mut matched = op(store, part.clone()).await?;
                if matched < part.len() as u64 && self.shards.len() > 1 {
                    for t in part {
                        if holds(store, id_of(&t)).await? {
                            continue;
                        }
                        if let Some(holder) = self.elsewhere(shard, id_of(&t)).await? {
                            matched += op(holder, vec![t]).await?;
                        }
                    }
                }
                Ok(matched)
            }
        }))
        .await;
        Ok(Self::all(results)?.into_iter().sum())
    }

    /// Up to `limit` rows with ids below `before`, highest id first:
    /// `page(shard, want)` lists one shard's, and the last shard's ids are
    /// the highest, so shard by shard from the one `before` is on down to
    /// the first, until `limit` are found.
    pub(super) async fn newest_first<'a, T, F, Fut>(
        &'a self,
        limit: u32,
        before: Option<u64>,
        page: F,
    ) -> StoreResult<Vec<T>>
    where
        F: Fn(usize, u32) -> Fut,
        Fut: std::future::Future<Output = StoreResult<Vec<T>>> + 'a,
    {
        let mut out = Vec::new();
        let last = before.map_or(self.shards.len() - 1, |b| {
            self.home_of_id(b.saturating_sub(1))
        });
        for shard in (0..=last).rev() {
            let want = limit.saturating_sub(u32::try_from(out.len()).unwrap_or(u32::MAX));
            if want == 0 {
                break;
            }
            out.extend(page(shard, want).await?);
        }
        Ok(out)
    }
}

/// What a round of [`ShardedStore::up_to`] returns: how much it took, and
/// how two shards' answers add up.
pub(super) trait Taken: Default {
    fn taken(&self) -> u32;
    fn add(&mut self, other: Self);
}

impl Taken for u64 {
    fn taken(&self) -> u32 {
        u32::try_from(*self).unwrap_or(u32::MAX)
    }
    fn add(&mut self, other: Self) {
        *self += other;
    }
}

impl Taken for Claimed {
    fn taken(&self) -> u32 {
        u32::try_from(self.messages.len() + self.quarantined.len()).unwrap_or(u32::MAX)
    }
    fn add(&mut self, other: Self) {
        merge(self, other);
    }
}

impl<T> Taken for Vec<T> {
    fn taken(&self) -> u32 {
        u32::try_from(self.len()).unwrap_or(u32::MAX)
    }
    fn add(&mut self, other: Self) {
        self.extend(other);
    }
}

/// Adds claim `c` to `into`.
pub(super) fn merge(into: &mut Claimed, c: Claimed) {
    into.messages.extend(c.messages);
    into.quarantined.extend(c.quarantined);
    into.out_of_room |= c.out_of_room;
    into.claimed_at = into.claimed_at.max(c.claimed_at);
}

/// Adds `b` into `a`: counts summed, the oldest of each kind kept.
pub(super) fn add_summary(a: &mut ProducerSummary, b: ProducerSummary) {
    for (k, v) in b.by_status {
        *a.by_status.entry(k).or_default() += v;
    }
    for (k, v) in b.by_send_status {
        *a.by_send_status.entry(k).or_default() += v;
    }
    a.sent_recently += b.sent_recently;
    a.rolled_back_recently += b.rolled_back_recently;
    a.oldest_prepared_at = earliest(a.oldest_prepared_at, b.oldest_prepared_at);
    a.oldest_pending_send_at = earliest(a.oldest_pending_send_at, b.oldest_pending_send_at);
    a.scheduled += b.scheduled;
}

pub(super) fn earliest(
    a: Option<DateTime<Utc>>,
    b: Option<DateTime<Utc>>,
) -> Option<DateTime<Utc>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
