//! The decision rules (`docs/architecture.md`, States), written once over the [`Store`] trait so
//! every backend decides alike.
//!
//! A decision is read → check the state rules → guarded transition. When the
//! guard loses (another writer changed the row between the read and the
//! write) the decision re-reads and re-decides, so the outcome always reflects
//! the row as it finally is: never two winners, never a silent overwrite of a
//! final state.

use crate::store::Tombstone;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

use trustmsg_verify_api::MessageStatus;

use super::{Actor, Message, Store, StoreError, StoreResult, Transition};

/// What a producer's (or the verifier's, or an operator's) decision did.
#[derive(Debug, Clone, PartialEq)]
pub enum DecideOutcome {
    /// This call changed the row; for a commit the row is now claimed for sending.
    Decided(Message),
    /// The row already held this decision (an idempotent repeat).
    AlreadyDecided(Message),
    /// The row holds the opposite final decision.
    Conflict(Message),
    /// Commit of a message that was never prepared; nothing was created.
    NotFound,
}

/// Why a producer's decision over the API was made, as its audit entry
/// says.
pub fn producer_reason(commit: bool) -> String {
    format!("{} by producer", if commit { "commit" } else { "rollback" })
}

/// Which message a decision is for.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    Key {
        biz_id: &'a str,
        message_key: &'a str,
    },
    Id(u64),
}

/// A commit or rollback request, from whoever makes it.
#[derive(Debug, Clone)]
pub struct DecideRequest<'a> {
    pub target: Target<'a>,
    pub commit: bool,
    pub actor: Actor,
    pub reason: String,
    pub send_lease: Duration,
    /// Count the change as a check-back attempt (the verifier's decisions).
    pub verify_attempt: bool,
}

impl DecideRequest<'_> {
    /// The guarded change this request makes to `m`, currently in a
    /// non-final state, towards `to`.
    fn transition_of(&self, m: &Message, to: MessageStatus) -> Transition {
        Transition {
            id: m.id,
            from: m.status,
            version: m.version,
            to,
            send_lease: self.send_lease,
            verify_attempt: self.verify_attempt,
            error: None,
            actor: self.actor.clone(),
            reason: self.reason.clone(),
        }
    }
}

/// Commits or rolls back a message with the state rules of `docs/architecture.md` (States):
/// PREPARED and VERIFY_FAILED take either decision; a repeat of the final
/// decision is `AlreadyDecided`; the opposite one is `Conflict`; commit of an
/// unknown message is `NotFound`; rollback of an unknown message leaves a
/// tombstone so a late prepare is refused rather than orphaned.
pub async fn decide(store: &dyn Store, req: DecideRequest<'_>) -> StoreResult<DecideOutcome> {
    let to = if req.commit {
        MessageStatus::Committed
    } else {
        MessageStatus::RolledBack
    };
    // A lost race re-reads and re-decides; each loop means another writer made
    // progress, so a small bound is only a guard against a bug.
    for _ in 0..16 {
        let current = match req.target {
            Target::Key {
                biz_id,
                message_key,
            } => store.find_message(biz_id, message_key).await?,
            Target::Id(id) => store.find_message_by_id(id).await?,
        };
        let Some(m) = current else {
            let Target::Key {
                biz_id,
                message_key,
            } = req.target
            else {
                return Ok(DecideOutcome::NotFound);
            };
            if req.commit {
                return Ok(DecideOutcome::NotFound);
            }
            let tombstone = Tombstone {
                biz_id,
                message_key,
                actor: &req.actor,
                reason: &req.reason,
            };
            match store.insert_tombstone(&tombstone).await? {
                Some(t) => return Ok(DecideOutcome::Decided(t)),
                None => continue,
            }
        };
        match m.status {
            s if s == to => return Ok(DecideOutcome::AlreadyDecided(m)),
            s if s.is_final() => return Ok(DecideOutcome::Conflict(m)),
            _ => {
                let t = req.transition_of(&m, to);
                if let Some(updated) = store.transition(&t).await? {
                    return Ok(DecideOutcome::Decided(updated));
                }
            }
        }
    }
    Err(StoreError::Contention(
        "a decision lost its guarded update 16 times in a row",
    ))
}

/// [`decide`] for many producer decisions (by key) at once: one read of all
/// the rows, one batched transition for all that can change, and the plain
/// [`decide`] for whatever needs more (a tombstone, a lost race, a key that
/// appears twice in the batch). Same outcomes as deciding one by one.
pub async fn decide_batch(
    store: &dyn Store,
    reqs: &[DecideRequest<'_>],
) -> StoreResult<Vec<DecideOutcome>> {
    decide_batch_known(store, reqs, &vec![None; reqs.len()]).await
}

/// [`decide_batch`] where the caller already holds some of the rows:
/// `known[i]`, if given, is the row of `reqs[i]` as it was stored at its
/// version (say, just written by this instance's prepare), and is not read
/// again. A known row that has changed since loses its version guard, and
/// that request is decided by the plain [`decide`], which reads the row: the
/// outcomes are the same as with every row read.
pub async fn decide_batch_known(
    store: &dyn Store,
    reqs: &[DecideRequest<'_>],
    known: &[Option<&Message>],
) -> StoreResult<Vec<DecideOutcome>> {
    assert_eq!(
        reqs.len(),
        known.len(),
        "one known row (or None) per request"
    );
    let keys: Vec<(&str, &str)> = reqs
        .iter()
        .filter_map(|r| match r.target {
            Target::Key {
                biz_id,
                message_key,
            } => Some((biz_id, message_key)),
            Target::Id(_) => None,
        })
        .collect();
    if keys.len() != reqs.len() {
        let mut out = Vec::with_capacity(reqs.len());
        for r in reqs {
            out.push(decide(store, r.clone()).await?);
        }
        return Ok(out);
    }
    let unknown: Vec<(&str, &str)> = keys
        .iter()
        .zip(known)
        .filter(|(_, k)| k.is_none())
        .map(|(key, _)| *key)
        .collect();
    let rows = if unknown.is_empty() {
        Vec::new()
    } else {
        store.find_messages(&unknown).await?
    };
    let by_key: HashMap<(&str, &str), &Message> = rows
        .iter()
        .chain(known.iter().flatten().copied())
        .map(|m| ((m.biz_id.as_str(), m.message_key.as_str()), m))
        .collect();
    let mut outcomes: Vec<Option<DecideOutcome>> = vec![None; reqs.len()];
    let mut transitions = Vec::new();
    let mut transition_of = Vec::new();
    let mut seen = HashSet::new();
    for (i, (req, key)) in reqs.iter().zip(&keys).enumerate() {
        if !seen.insert(*key) {
            continue; // decided one by one below, after the first
        }
        let to = if req.commit {
            MessageStatus::Committed
        } else {
            MessageStatus::RolledBack
        };
        match by_key.get(key) {
            None if req.commit => outcomes[i] = Some(DecideOutcome::NotFound),
            None => {} // a tombstone: one by one
            Some(m) if m.status == to => {
                outcomes[i] = Some(DecideOutcome::AlreadyDecided((*m).clone()))
            }
            Some(m) if m.status.is_final() => {
                outcomes[i] = Some(DecideOutcome::Conflict((*m).clone()))
            }
            Some(m) => {
                transitions.push((req.transition_of(m, to), *m));
                transition_of.push(i);
            }
        }
    }
    // One batched UPDATE per target status (commits, rollbacks).
    for to in [MessageStatus::Committed, MessageStatus::RolledBack] {
        let (group, index): (Vec<(Transition, &Message)>, Vec<usize>) = transitions
            .iter()
            .zip(&transition_of)
            .filter(|((t, _), _)| t.to == to)
            .map(|(t, i)| (t.clone(), *i))
            .unzip();
        if group.is_empty() {
            continue;
        }
        let (group, seen): (Vec<Transition>, Vec<&Message>) = group.into_iter().unzip();
        let results = store.transition_batch_seen(&group, &seen).await?;
        for (result, i) in results.into_iter().zip(index) {
            outcomes[i] = result.map(DecideOutcome::Decided);
        }
    }
    let mut out = Vec::with_capacity(reqs.len());
    for (req, outcome) in reqs.iter().zip(outcomes) {
        out.push(match outcome {
            Some(o) => o,
            None => decide(store, req.clone()).await?,
        });
    }
    Ok(out)
}
