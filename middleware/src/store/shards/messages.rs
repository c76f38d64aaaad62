//! [`MessageStore`] over the shards: a message written to the shard of its
//! slot, found by id on the shard the id names (or wherever a moved slot
//! put it), batches scattered by shard.

use std::time::Duration;

use async_trait::async_trait;

use crate::store::{
    AuditEntry, Inserted, Message, MessageStore, NewCommitted, NewMessage, StoreResult, Tombstone,
    Transition,
};

use super::{holds, ShardedStore};

#[async_trait]
impl MessageStore for ShardedStore {
    async fn insert_prepared(&self, m: &NewMessage) -> StoreResult<Inserted> {
        let mut answers = self.insert_prepared_batch(std::slice::from_ref(m)).await?;
        Ok(answers.pop().expect("one answer for one message"))
    }

    async fn insert_tombstone(&self, t: &Tombstone<'_>) -> StoreResult<Option<Message>> {
        let home = self.shard_index(t.biz_id, t.message_key.as_bytes());
        self.shards[home].store.insert_tombstone(t).await
    }

    async fn find_message(&self, biz_id: &str, message_key: &str) -> StoreResult<Option<Message>> {
        let home = self.shard_index(biz_id, message_key.as_bytes());
        if let Some(m) = self.shards[home]
            .store
            .find_message(biz_id, message_key)
            .await?
        {
            return Ok(Some(m));
        }
        // An ordered message lives by its order key, a moved slot's
        // elsewhere: the other shards, only when the home has none.
        for other in self.others(home) {
            if let Some(m) = other.find_message(biz_id, message_key).await? {
                return Ok(Some(m));
            }
        }
        Ok(None)
    }

    async fn find_message_by_id(&self, id: u64) -> StoreResult<Option<Message>> {
        self.by_id(id, |s| s.find_message_by_id(id), Option::is_none)
            .await
    }

    async fn transition(&self, t: &Transition) -> StoreResult<Option<Message>> {
        self.by_id(t.id, |s| s.transition(t), Option::is_none).await
    }

    async fn insert_prepared_batch(&self, batch: &[NewMessage]) -> StoreResult<Vec<Inserted>> {
        let mut out: Vec<Option<Inserted>> = (0..batch.len()).map(|_| None).collect();
        // An ordered message lives by its order key. A message of the same
        // key may already live elsewhere (its prepare named another record
        // key): that one is the message, for the caller to compare with
        // what it was asked to prepare, as it would on one database. (Two
        // such prepares at the same moment are not told apart across shards.)
        for (i, m) in batch.iter().enumerate() {
            if m.order_key.is_none() || self.shards.len() == 1 {
                continue;
            }
            for other in self.others(self.home_of_new(m)) {
                if let Some(found) = other.find_message(&m.biz_id, &m.message_key).await? {
                    out[i] = Some(Inserted::Existing(found));
                    break;
                }
            }
        }
        let fresh: Vec<usize> = (0..batch.len()).filter(|&i| out[i].is_none()).collect();
        let answers = self
            .scatter(
                fresh.len(),
                |k| self.home_of_new(&batch[fresh[k]]),
                |store, ks| {
                    let part: Vec<NewMessage> =
                        ks.iter().map(|&k| batch[fresh[k]].clone()).collect();
                    async move { store.insert_prepared_batch(&part).await }
                },
            )
            .await?;
        for (k, answer) in answers.into_iter().enumerate() {
            out[fresh[k]] = Some(answer);
        }
        Ok(out
            .into_iter()
            .map(|a| a.expect("every input answered"))
            .collect())
    }

    /// On the one shard every message of the batch lives on (the writers
    /// batch per shard); None for a batch across shards, or an ordered one
    /// when a message of its key may live on another shard already.
    async fn insert_committed_batch(
        &self,
        batch: &[NewCommitted],
        send_lease: Duration,
    ) -> StoreResult<Option<Vec<Message>>> {
        let Some(first) = batch.first() else {
            return Ok(None);
        };
        let home = self.home_of_new(&first.message);
        let one_shard = batch.iter().all(|c| self.home_of_new(&c.message) == home);
        let ordered = batch.iter().any(|c| c.message.order_key.is_some());
        if !one_shard || (ordered && self.shards.len() > 1) {
            return Ok(None);
        }
        self.shards[home]
            .store
            .insert_committed_batch(batch, send_lease)
            .await
    }

    async fn transition_batch(&self, ts: &[Transition]) -> StoreResult<Vec<Option<Message>>> {
        self.transitions(ts, None).await
    }

    async fn transition_batch_seen(
        &self,
        ts: &[Transition],
        seen: &[&Message],
    ) -> StoreResult<Vec<Option<Message>>> {
        self.transitions(ts, Some(seen)).await
    }

    async fn audit_trail(&self, message_id: u64) -> StoreResult<Vec<AuditEntry>> {
        self.by_id(message_id, |s| s.audit_trail(message_id), Vec::is_empty)
            .await
    }
}

impl ShardedStore {
    /// A batch of transitions, each on the shard its id names (with the
    /// rows the caller read, when it has them), then each that matched
    /// nothing there because its row moved, where the row lives.
    async fn transitions(
        &self,
        ts: &[Transition],
        seen: Option<&[&Message]>,
    ) -> StoreResult<Vec<Option<Message>>> {
        let mut out = self
            .scatter(
                ts.len(),
                |i| self.home_of_id(ts[i].id),
                |store, is| {
                    let part: Vec<Transition> = is.iter().map(|&i| ts[i].clone()).collect();
                    let rows: Option<Vec<&Message>> =
                        seen.map(|seen| is.iter().map(|&i| seen[i]).collect());
                    async move {
                        match rows {
                            Some(rows) => store.transition_batch_seen(&part, &rows).await,
                            None => store.transition_batch(&part).await,
                        }
                    }
                },
            )
            .await?;
        self.transition_moved(ts, &mut out).await?;
        Ok(out)
    }

    /// After a batch of transitions on the rows' home shards: each guard
    /// that matched nothing there because the row lives elsewhere (its slot
    /// moved) is applied by the shard that holds it.
    async fn transition_moved(
        &self,
        ts: &[Transition],
        out: &mut [Option<Message>],
    ) -> StoreResult<()> {
        if self.shards.len() == 1 {
            return Ok(());
        }
        for (i, t) in ts.iter().enumerate() {
            let home = self.home_of_id(t.id);
            if out[i].is_some() || holds(&self.shards[home].store, t.id).await? {
                continue;
            }
            if let Some(holder) = self.elsewhere(home, t.id).await? {
                out[i] = holder.transition(t).await?;
            }
        }
        Ok(())
    }
}
