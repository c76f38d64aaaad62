//! Transitions on MySQL: the guarded UPDATE a transition is (and when a
//! commit makes its message due), and batches of them in one statement:
//! with their audit rows, seqs and alerts in one transaction, or, for
//! producers' own decisions of unordered messages, one autocommit UPDATE
//! whose results are computed from the rows the caller read.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{MySql, QueryBuilder, Row};
use trustmsg_verify_api::admin::AlertKind;
use trustmsg_verify_api::{MessageStatus, SendStatus};

use crate::store::sql::{self, clip_error, transition_effects, AuditRow};
use crate::store::{LifecycleStore, Message, NewAlert, StoreError, StoreResult, Transition};

use super::claims::lease_end;
use super::prepare::HEADROOM_DECIDED;
use super::{is_lock_conflict, micros, select_messages_by_ids, MySqlStore};

/// The upsert clause by which a batch of commits adds its rows to each of
/// their keys' `last_seq` ([`sql::order_commit_batch`]).
pub(super) const BUMP_KEYS: &str =
    " ON DUPLICATE KEY UPDATE last_seq = last_seq + VALUES(last_seq), \
     updated_at = UTC_TIMESTAMP(3)";

/// `UPDATE messages SET …` for a transition like `t` (the caller adds the
/// guard). The times are the database clock at the statement, or `at` (a
/// database clock reading the caller took) when given.
pub(super) fn transition_update(t: &Transition, at: Option<DateTime<Utc>>) -> QueryBuilder<MySql> {
    let push_now = |q: &mut QueryBuilder<MySql>| match at {
        Some(now) => {
            q.push_bind(now);
        }
        None => {
            q.push("UTC_TIMESTAMP(3)");
        }
    };
    let send_status = transition_effects(t.to).send_status;
    let to = t.to.as_str();
    let mut q = QueryBuilder::<MySql>::new("UPDATE messages SET status = ");
    q.push_bind(to)
        .push(", send_status = ")
        .push_bind(send_status)
        .push(", version = version + 1, verify_attempts = IF(")
        .push_bind(to)
        .push(" = 'PREPARED', 0, verify_attempts + ")
        .push_bind(u32::from(t.verify_attempt))
        .push("), last_error = COALESCE(")
        .push_bind(t.error.as_deref().map(clip_error).map(str::to_string))
        .push(", last_error), next_verify_at = IF(")
        .push_bind(to)
        .push(" = 'PREPARED', ");
    push_now(&mut q);
    // A re-verify puts the message back in check-back's queue: its overdue
    // alert is due again, counted from now.
    q.push(", NULL), verify_overdue_alerted = IF(")
        .push_bind(to)
        .push(" = 'PREPARED', FALSE, verify_overdue_alerted), requeued_at = IF(")
        .push_bind(to)
        .push(" = 'PREPARED', ");
    push_now(&mut q);
    q.push(", requeued_at), next_send_at = IF(")
        .push_bind(to)
        .push(" = 'COMMITTED', ");
    push_commit_due(&mut q, at, t.send_lease);
    q.push(", NULL), decided_at = IF(")
        .push_bind(to)
        .push(" IN ('COMMITTED', 'ROLLED_BACK', 'VERIFY_FAILED'), ");
    push_now(&mut q);
    q.push(", decided_at), updated_at = ");
    push_now(&mut q);
    q.push(format!(", headroom = {HEADROOM_DECIDED}"));
    q
}

/// When a commit makes its message due, as SQL (`next_send_at` of the
/// commit's UPDATE; `at` is the clock the caller read, else the
/// statement's): at once, which for this instance's forwarder is a claim of
/// one send lease (the fast path), or at the message's `deliver_at` if that
/// is later (no claim: the sweepers take it then). This and [`commit_due`],
/// its mirror for a row at hand, are the one place this backend says when a
/// committed message is due.
fn push_commit_due(q: &mut QueryBuilder<MySql>, at: Option<DateTime<Utc>>, lease: Duration) {
    match at {
        Some(now) => {
            q.push("IF(deliver_at > ")
                .push_bind(now)
                .push(", deliver_at, ")
                .push_bind(lease_end(now, lease))
                .push(")");
        }
        None => {
            q.push("IF(deliver_at > UTC_TIMESTAMP(3), deliver_at, UTC_TIMESTAMP(3) + INTERVAL ")
                .push_bind(micros(lease))
                .push(" MICROSECOND)");
        }
    }
}

/// [`push_commit_due`] for a row whose `deliver_at` is known, at the clock `now`.
fn commit_due(
    now: DateTime<Utc>,
    deliver_at: Option<DateTime<Utc>>,
    lease: Duration,
) -> DateTime<Utc> {
    match deliver_at {
        Some(at) if at > now => at,
        _ => lease_end(now, lease),
    }
}

/// What [`transition_update`] with the clock `now` makes of `seen`, the row
/// as it was at the transition's guard.
fn transitioned(seen: &Message, t: &Transition, now: DateTime<Utc>) -> Message {
    let mut m = seen.clone();
    m.status = t.to;
    m.send_status = transition_effects(t.to)
        .send_status
        .map(|_| SendStatus::Pending);
    m.version += 1;
    m.verify_attempts = if t.to == MessageStatus::Prepared {
        0
    } else {
        m.verify_attempts + u32::from(t.verify_attempt)
    };
    if let Some(e) = &t.error {
        m.last_error = Some(clip_error(e).to_string());
    }
    m.next_verify_at = (t.to == MessageStatus::Prepared).then_some(now);
    m.next_send_at =
        (t.to == MessageStatus::Committed).then(|| commit_due(now, m.deliver_at, t.send_lease));
    if matches!(
        t.to,
        MessageStatus::Committed | MessageStatus::RolledBack | MessageStatus::VerifyFailed
    ) {
        m.decided_at = Some(now);
    }
    m.updated_at = now;
    m
}

impl MySqlStore {
    /// [`crate::store::MessageStore::transition_batch`] in one transaction when the batch is
    /// uniform (one by one otherwise, or when a guard lost its race). With
    /// `seen` (the rows as read at the guards), the audit rows go first and
    /// their `RETURNING created_at` is the clock the UPDATE binds, so the
    /// results are computed from `seen` instead of read back: one statement
    /// fewer.
    pub(super) async fn transition_together(
        &self,
        ts: &[Transition],
        seen: Option<&[&Message]>,
    ) -> StoreResult<Vec<Option<Message>>> {
        // A lone transition with its row at hand still goes this way: the
        // audit INSERT's RETURNING stands in for the read-back, a round trip
        // fewer than `transition` (a quiet service decides one at a time).
        let lone_unseen = ts.len() < 2 && seen.is_none();
        if lone_unseen || !sql::one_update(ts) {
            return crate::store::transition_each(self, ts).await;
        }
        let audits: Vec<AuditRow> = ts.iter().filter_map(AuditRow::transition).collect();
        let mut tx = self.pool.begin().await?;
        // The clock the UPDATE binds, with the rows it applies to.
        let applied = match seen {
            // Producers' own decisions (of ordered messages) write no audit
            // row to read the clock from.
            Some(seen) if audits.is_empty() => Some((seen, self.decision_time(seen).await?)),
            Some(seen) => {
                let mut q = sql::audit_insert::<MySql>(&audits);
                q.push(" RETURNING created_at");
                let rows = q.build().fetch_all(&mut *tx).await?;
                let first = rows.first().ok_or(StoreError::Vanished(
                    "the audit rows of a decision batch returned nothing",
                ))?;
                Some((seen, first.try_get::<DateTime<Utc>, _>("created_at")?))
            }
            None => None,
        };
        let mut q = transition_update(&ts[0], applied.map(|(_, now)| now));
        push_guards(&mut q, ts);
        match q.build().execute(&mut *tx).await {
            Ok(done) if done.rows_affected() == ts.len() as u64 => {}
            // Some guard lost a race: which one is unknown from the count, so
            // undo and let each transition find out for itself.
            Ok(_) => {
                tx.rollback().await?;
                return crate::store::transition_each(self, ts).await;
            }
            Err(e) if is_lock_conflict(&e) => {
                drop(tx);
                return crate::store::transition_each(self, ts).await;
            }
            Err(e) => return Err(e.into()),
        }
        let mut results: Vec<Option<Message>> = match applied {
            Some((seen, now)) => seen
                .iter()
                .zip(ts)
                .map(|(m, t)| Some(transitioned(m, t, now)))
                .collect(),
            None => {
                sql::insert_audits(&mut *tx, &audits).await?;
                let ids: Vec<u64> = ts.iter().map(|t| t.id).collect();
                let rows = select_messages_by_ids(&mut *tx, &ids).await?;
                let by_id: HashMap<u64, Message> = rows.into_iter().map(|m| (m.id, m)).collect();
                ts.iter().map(|t| by_id.get(&t.id).cloned()).collect()
            }
        };
        let mut alerts = verify_failed_alerts(&results);
        // In order per key: the batch's ordered rows take their seqs
        // together (nothing runs for a batch without one).
        let ordered = sql::order_commit_batch::<MySql>(&mut tx, BUMP_KEYS, &mut results).await;
        match ordered {
            Ok(raised) => alerts.extend(raised),
            // A deadlock on a key row with another batch: undo, and let
            // each commit take its key on its own.
            Err(StoreError::Db(e)) if is_lock_conflict(&e) => {
                drop(tx);
                return crate::store::transition_each(self, ts).await;
            }
            Err(e) => return Err(e),
        }
        let raised = sql::raise_alerts::<MySql>(&mut tx, alerts).await?;
        tx.commit().await?;
        raised.announce();
        Ok(results)
    }

    /// Producers' own decisions over the API of unordered messages, their
    /// rows at hand (`seen`; see [`decide_alone`]): one autocommit UPDATE
    /// and nothing else. Such a decision writes no audit row (the message
    /// row records it), takes no key's seq and raises no alert, so nothing
    /// else has to commit with it; the UPDATE binds the time [`DbClock`](crate::store::db_clock::DbClock)
    /// tells (never earlier than what the rows hold), and the results are
    /// computed from `seen` rather than read back. When a guard lost its
    /// race, the rows this UPDATE changed are read back (each carries the
    /// version after `seen`'s, the new status and this batch's time); the
    /// others come back None, for the caller to decide one by one.
    pub(super) async fn decide_together(
        &self,
        ts: &[Transition],
        seen: &[&Message],
    ) -> StoreResult<Vec<Option<Message>>> {
        let now = self.decision_time(seen).await?;
        let mut q = transition_update(&ts[0], Some(now));
        push_guards(&mut q, ts);
        let changed = match q.build().execute(&self.pool).await {
            Ok(done) => done.rows_affected(),
            // The statement was undone as a whole.
            Err(e) if is_lock_conflict(&e) => 0,
            Err(e) => return Err(e.into()),
        };
        let mine: HashSet<u64> = if changed == ts.len() as u64 {
            ts.iter().map(|t| t.id).collect()
        } else if changed == 0 {
            HashSet::new()
        } else {
            let ids: Vec<u64> = ts.iter().map(|t| t.id).collect();
            let now_rows: HashMap<u64, Message> = select_messages_by_ids(&self.pool, &ids)
                .await?
                .into_iter()
                .map(|m| (m.id, m))
                .collect();
            ts.iter()
                .filter(|t| {
                    now_rows.get(&t.id).is_some_and(|m| {
                        m.version == t.version + 1 && m.status == t.to && m.updated_at == now
                    })
                })
                .map(|t| t.id)
                .collect()
        };
        Ok(ts
            .iter()
            .zip(seen)
            .map(|(t, m)| mine.contains(&t.id).then(|| transitioned(m, t, now)))
            .collect())
    }

    /// The time a batch of producers' own decisions binds, whose rows are
    /// `seen`: the database clock as [`DbClock`](crate::store::db_clock::DbClock) tells it, never earlier
    /// than what the rows hold.
    async fn decision_time(&self, seen: &[&Message]) -> StoreResult<DateTime<Utc>> {
        let read = async { self.now().await };
        Ok(seen
            .iter()
            .map(|m| m.updated_at)
            .fold(self.clock.now(read).await?, DateTime::max))
    }
}

/// Whether `ts`, with their rows `seen`, are decisions that need nothing
/// but their UPDATE ([`MySqlStore::decide_together`]): one UPDATE's worth of
/// producers' own decisions ([`sql::producer_decides`]), none of them the
/// commit of an ordered message (which takes its key's seq in the same
/// transaction).
pub(super) fn decide_alone(ts: &[Transition], seen: &[&Message]) -> bool {
    sql::one_update(ts)
        && ts.iter().zip(seen).all(|(t, m)| {
            sql::producer_decides(t) && !(t.to == MessageStatus::Committed && m.order_key.is_some())
        })
}

/// The guard of a batched [`transition_update`]: each row still at the
/// state and version its transition was made from.
fn push_guards(q: &mut QueryBuilder<MySql>, ts: &[Transition]) {
    // The ids alone first: MariaDB 10.11 scans the whole table for an
    // UPDATE whose only condition is a row IN of a single tuple, and may
    // range over another index for several; `id IN` keeps it on the key.
    q.push(" WHERE id IN (");
    let mut sep = q.separated(", ");
    for t in ts {
        sep.push_bind(t.id);
    }
    q.push(") AND (id, status, version) IN (");
    let mut sep = q.separated(", ");
    for t in ts {
        sep.push("(")
            .push_bind_unseparated(t.id)
            .push_unseparated(", ")
            .push_bind_unseparated(t.from.as_str())
            .push_unseparated(", ")
            .push_bind_unseparated(t.version)
            .push_unseparated(")");
    }
    q.push(")");
}

/// The commit half of in order per key (see `sql/ordering.rs`): seqs for
/// the ordered rows among `rows`, which have just become COMMITTED, in the
/// commit's transaction.
pub(super) async fn order_commits(
    conn: &mut sqlx::MySqlConnection,
    rows: &mut [Message],
) -> StoreResult<Vec<NewAlert>> {
    if !rows.iter().any(|m| m.order_key.is_some()) {
        return Ok(Vec::new());
    }
    sql::order_commits::<MySql>(
        conn,
        "INSERT INTO ordered_keys (order_key, last_seq, sent_through, updated_at) \
         VALUES (?, 1, 0, UTC_TIMESTAMP(3)) \
         ON DUPLICATE KEY UPDATE last_seq = last_seq + 1, updated_at = UTC_TIMESTAMP(3)",
        rows,
    )
    .await
}

/// The alerts of the rows among `rows` that a transition has just made
/// VERIFY_FAILED.
pub(super) fn verify_failed_alerts<'a>(
    rows: impl IntoIterator<Item = &'a Option<Message>>,
) -> Vec<NewAlert> {
    rows.into_iter()
        .flatten()
        .filter(|m| m.status == MessageStatus::VerifyFailed)
        .map(|m| NewAlert::failed(AlertKind::VerifyFailed, m))
        .collect()
}
