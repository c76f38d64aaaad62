//! The audit log: one row per change, each kind of change with its own
//! constructor so both backends record the same event the same way; its
//! multi-row INSERT, stamped with the database clock; and a message's trail.

use std::collections::HashMap;

use sqlx::{Executor, QueryBuilder};
use trustmsg_verify_api::{MessageStatus, SendStatus};

use super::effects::{clip_error, transition_effects};
use super::row::SqlRow;
use super::{stmt, Bind, Dialect};
use crate::store::{producer_reason, Actor, AuditEntry, Message, Requeue, StoreResult, Transition};

/// The columns an [`AuditRow`] writes (the last, `created_at`, is the clock).
const AUDIT_COLUMNS: &str = "message_id, actor, action, from_status, to_status, \
    from_send_status, to_send_status, reason, created_at";

/// One `audit_log` row. Each kind of change has its constructor, so both
/// backends record the same event the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::store) struct AuditRow {
    message_id: u64,
    actor: String,
    action: &'static str,
    from_status: Option<&'static str>,
    to_status: Option<&'static str>,
    from_send_status: Option<&'static str>,
    to_send_status: Option<&'static str>,
    /// Clipped to the column size.
    reason: String,
}

impl AuditRow {
    /// A guarded status change (a decision, VERIFY_FAILED, re-verify); None
    /// for the producer's own decision over the API, which the message row
    /// records by itself (see [`producer_decided`]): the commonest change
    /// costs no audit row, and [`audit_trail`] shows it all the same.
    pub(in crate::store) fn transition(t: &Transition) -> Option<Self> {
        if producer_decides(t) {
            return None;
        }
        let effects = transition_effects(t.to);
        Some(Self {
            message_id: t.id,
            actor: t.actor.to_string(),
            action: effects.action,
            from_status: Some(t.from.as_str()),
            to_status: Some(t.to.as_str()),
            from_send_status: None,
            to_send_status: effects.send_status,
            reason: clip_error(&t.reason).to_string(),
        })
    }

    /// A message created COMMITTED (its producer's own transaction decided
    /// it): there was no state before it.
    pub(in crate::store) fn created_committed(
        message_id: u64,
        actor: &Actor,
        reason: &str,
    ) -> Self {
        let effects = transition_effects(MessageStatus::Committed);
        Self {
            message_id,
            actor: actor.to_string(),
            action: effects.action,
            from_status: None,
            to_status: Some(MessageStatus::Committed.as_str()),
            from_send_status: None,
            to_send_status: effects.send_status,
            reason: clip_error(reason).to_string(),
        }
    }

    /// The rollback of an unknown message, which created a tombstone: there
    /// was no state before it.
    pub(in crate::store) fn tombstone(message_id: u64, actor: &Actor, reason: &str) -> Self {
        Self {
            message_id,
            actor: actor.to_string(),
            action: transition_effects(MessageStatus::RolledBack).action,
            from_status: None,
            to_status: Some(MessageStatus::RolledBack.as_str()),
            from_send_status: None,
            to_send_status: None,
            reason: clip_error(reason).to_string(),
        }
    }

    /// A claimed row set aside because it could not be read: its state
    /// (`status`, `send_status`) stays, the claimer (forwarder or verifier)
    /// is the actor, the reason says why.
    pub(in crate::store) fn quarantine(
        message_id: u64,
        claimer: Actor,
        status: MessageStatus,
        send_status: Option<SendStatus>,
        reason: &str,
    ) -> Self {
        let send_status = send_status.map(SendStatus::as_str);
        Self {
            message_id,
            actor: claimer.to_string(),
            action: "quarantine",
            from_status: Some(status.as_str()),
            to_status: Some(status.as_str()),
            from_send_status: send_status,
            to_send_status: send_status,
            reason: clip_error(reason).to_string(),
        }
    }

    /// An operator's redeliver (COMMITTED stays, SEND_FAILED → PENDING).
    pub(in crate::store) fn redeliver(message_id: u64, actor: &Actor, reason: &str) -> Self {
        let committed = Some(MessageStatus::Committed.as_str());
        Self {
            message_id,
            actor: actor.to_string(),
            action: "redeliver",
            from_status: committed,
            to_status: committed,
            from_send_status: Some(SendStatus::SendFailed.as_str()),
            to_send_status: Some(SendStatus::Pending.as_str()),
            reason: clip_error(reason).to_string(),
        }
    }

    /// An operator's skip of an ordered key's SEND_FAILED head: its state
    /// stays, it leaves its key's order and the next message of the key
    /// may go.
    pub(in crate::store) fn skip(message_id: u64, actor: &Actor, reason: &str) -> Self {
        let committed = Some(MessageStatus::Committed.as_str());
        let failed = Some(SendStatus::SendFailed.as_str());
        Self {
            message_id,
            actor: actor.to_string(),
            action: "skip",
            from_status: committed,
            to_status: committed,
            from_send_status: failed,
            to_send_status: failed,
            reason: clip_error(reason).to_string(),
        }
    }

    /// An operator's send-now of a delayed message (COMMITTED and PENDING
    /// stay; it is due now instead of at its `deliver_at`).
    pub(in crate::store) fn send_now(message_id: u64, actor: &Actor, reason: &str) -> Self {
        let committed = Some(MessageStatus::Committed.as_str());
        let pending = Some(SendStatus::Pending.as_str());
        Self {
            message_id,
            actor: actor.to_string(),
            action: "send_now",
            from_status: committed,
            to_status: committed,
            from_send_status: pending,
            to_send_status: pending,
            reason: clip_error(reason).to_string(),
        }
    }

    /// An operator's repair of `requeue`'s kind: a [`AuditRow::redeliver`],
    /// or a re-verify (VERIFY_FAILED → PREPARED), as a transition records it.
    pub(in crate::store) fn requeue(
        requeue: Requeue,
        message_id: u64,
        actor: &Actor,
        reason: &str,
    ) -> Self {
        match requeue {
            Requeue::Redeliver => Self::redeliver(message_id, actor, reason),
            Requeue::Reverify => {
                let effects = transition_effects(MessageStatus::Prepared);
                Self {
                    message_id,
                    actor: actor.to_string(),
                    action: effects.action,
                    from_status: Some(MessageStatus::VerifyFailed.as_str()),
                    to_status: Some(MessageStatus::Prepared.as_str()),
                    from_send_status: None,
                    to_send_status: effects.send_status,
                    reason: clip_error(reason).to_string(),
                }
            }
        }
    }

    /// A send given up (COMMITTED stays, PENDING → SEND_FAILED); the error is the reason.
    pub(in crate::store) fn send_failed(message_id: u64, actor: &Actor, error: &str) -> Self {
        let committed = Some(MessageStatus::Committed.as_str());
        Self {
            message_id,
            actor: actor.to_string(),
            action: "send_failed",
            from_status: committed,
            to_status: committed,
            from_send_status: Some(SendStatus::Pending.as_str()),
            to_send_status: Some(SendStatus::SendFailed.as_str()),
            reason: clip_error(error).to_string(),
        }
    }
}

/// Writes `rows` in one statement, stamped with the database clock.
pub(in crate::store) async fn insert_audits<'c, D, E>(exec: E, rows: &[AuditRow]) -> StoreResult<()>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
    String: Bind<D>,
    &'static str: Bind<D>,
    Option<&'static str>: Bind<D>,
{
    if rows.is_empty() {
        return Ok(());
    }
    audit_insert::<D>(rows).build().execute(exec).await?;
    Ok(())
}

/// The multi-row INSERT of `rows` (not empty), each stamped with the clock.
pub(in crate::store) fn audit_insert<D>(rows: &[AuditRow]) -> QueryBuilder<D>
where
    D: Dialect,
    String: Bind<D>,
    &'static str: Bind<D>,
    Option<&'static str>: Bind<D>,
{
    let mut q = QueryBuilder::<D>::new(format!("INSERT INTO audit_log ({AUDIT_COLUMNS}) "));
    q.push_values(rows, |mut b, r| {
        b.push_bind(D::int(r.message_id))
            .push_bind(r.actor.clone())
            .push_bind(r.action)
            .push_bind(r.from_status)
            .push_bind(r.to_status)
            .push_bind(r.from_send_status)
            .push_bind(r.to_send_status)
            .push_bind(r.reason.clone())
            .push(D::NOW);
    });
    q
}

/// `INSERT … SELECT` of `row` once for each of the messages `ids` (not
/// empty; `row`'s own message id is not used), stamped with the clock: the
/// audit rows of a bulk change in one statement.
pub(in crate::store) fn audit_insert_select<D>(row: &AuditRow, ids: &[u64]) -> QueryBuilder<D>
where
    D: Dialect,
    String: Bind<D>,
    &'static str: Bind<D>,
    Option<&'static str>: Bind<D>,
{
    let mut q = QueryBuilder::<D>::new(format!(
        "INSERT INTO audit_log ({AUDIT_COLUMNS}) SELECT id, "
    ));
    q.push_bind(row.actor.clone())
        .push(", ")
        .push_bind(row.action)
        .push(", ")
        .push_bind(row.from_status)
        .push(", ")
        .push_bind(row.to_status)
        .push(", ")
        .push_bind(row.from_send_status)
        .push(", ")
        .push_bind(row.to_send_status)
        .push(", ")
        .push_bind(row.reason.clone())
        .push(format!(", {} FROM messages WHERE id IN (", D::NOW));
    let mut sep = q.separated(", ");
    for id in ids {
        sep.push_bind(D::int(*id));
    }
    q.push(")");
    q
}

/// Whether `t` is a producer's own decision over the API (PREPARED →
/// COMMITTED or ROLLED_BACK, actor [`Actor::Producer`]): the one change
/// written without an audit row. Every other way into a decided state (the
/// verifier, an operator, a record submitted through Kafka, a tombstone)
/// writes one in the same transaction, and the only way back to PREPARED (a
/// re-verify) writes one too; so a decided message whose last status-changing
/// audit row left it PREPARED was decided by its producer, at `decided_at`.
pub(in crate::store) fn producer_decides(t: &Transition) -> bool {
    matches!(t.actor, Actor::Producer(_))
        && t.from == MessageStatus::Prepared
        && matches!(t.to, MessageStatus::Committed | MessageStatus::RolledBack)
}

/// A message's audit trail, oldest first: its audit rows, and its
/// producer's own decision over the API where it made one, which the
/// message row records instead of an audit row ([`producer_decides`]).
pub(in crate::store) async fn audit_trail<D>(
    pool: &sqlx::Pool<D>,
    message_id: u64,
) -> StoreResult<Vec<AuditEntry>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    let mut entries = sqlx::query(stmt::<D>(format!(
        "SELECT id, {AUDIT_COLUMNS} FROM audit_log WHERE message_id = ? ORDER BY id"
    )))
    .bind(D::int(message_id))
    .fetch_all(pool)
    .await?
    .iter()
    .map(audit_entry_from_row)
    .collect::<StoreResult<Vec<_>>>()?;
    let row = sqlx::query(stmt::<D>(
        "SELECT biz_id, status, decided_at FROM messages WHERE id = ?",
    ))
    .bind(D::int(message_id))
    .fetch_optional(pool)
    .await?;
    if let Some(row) = row {
        let status = MessageStatus::parse(&row.text("status")?);
        if let (Some(status), Some(at)) = (status, row.opt_time("decided_at")?) {
            add_producer_decision(&mut entries, message_id, &row.text("biz_id")?, status, at);
        }
    }
    Ok(entries)
}

/// The audit trails of `messages` (rows just read), by message id, each as
/// [`audit_trail`] gives one: one statement for the lot. `list` is their
/// ids as an SQL list of numbers.
pub(in crate::store) async fn audit_trails<D>(
    conn: &mut D::Connection,
    list: &str,
    messages: &[Message],
) -> StoreResult<HashMap<u64, Vec<AuditEntry>>>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
{
    let mut trails: HashMap<u64, Vec<AuditEntry>> = HashMap::new();
    for row in sqlx::query(stmt::<D>(format!(
        "SELECT id, {AUDIT_COLUMNS} FROM audit_log WHERE message_id IN ({list}) ORDER BY id"
    )))
    .fetch_all(&mut *conn)
    .await?
    .iter()
    {
        let entry = audit_entry_from_row(row)?;
        trails.entry(entry.message_id).or_default().push(entry);
    }
    for m in messages {
        let entries = trails.entry(m.id).or_default();
        if let Some(at) = m.decided_at {
            add_producer_decision(entries, m.id, &m.biz_id, m.status, at);
        }
    }
    Ok(trails)
}

/// Puts the producer's own decision into `entries` (the audit rows of a
/// message now in `status`, decided at `decided_at`) where the rows imply
/// it: the message is COMMITTED or ROLLED_BACK, yet the last audit row that
/// changed its status left it PREPARED (or none did). It goes right after
/// that row, as the change that followed it.
fn add_producer_decision(
    entries: &mut Vec<AuditEntry>,
    message_id: u64,
    biz_id: &str,
    status: MessageStatus,
    decided_at: chrono::DateTime<chrono::Utc>,
) {
    let commit = match status {
        MessageStatus::Committed => true,
        MessageStatus::RolledBack => false,
        _ => return,
    };
    let last_change = entries
        .iter()
        .rposition(|e| e.to_status.is_some() && e.from_status != e.to_status);
    let left_prepared = last_change
        .is_none_or(|i| entries[i].to_status.as_deref() == Some(MessageStatus::Prepared.as_str()));
    if !left_prepared {
        return;
    }
    let effects = transition_effects(status);
    entries.insert(
        last_change.map_or(0, |i| i + 1),
        AuditEntry {
            id: 0,
            message_id,
            actor: Actor::Producer(biz_id.to_string()).to_string(),
            action: effects.action.to_string(),
            from_status: Some(MessageStatus::Prepared.as_str().to_string()),
            to_status: Some(status.as_str().to_string()),
            from_send_status: None,
            to_send_status: effects.send_status.map(str::to_string),
            reason: producer_reason(commit),
            created_at: decided_at,
        },
    );
}

fn audit_entry_from_row(row: &impl SqlRow) -> StoreResult<AuditEntry> {
    Ok(AuditEntry {
        id: row.unsigned("id")?,
        message_id: row.unsigned("message_id")?,
        actor: row.text("actor")?,
        action: row.text("action")?,
        from_status: row.opt_text("from_status")?,
        to_status: row.opt_text("to_status")?,
        from_send_status: row.opt_text("from_send_status")?,
        to_send_status: row.opt_text("to_send_status")?,
        reason: row.text("reason")?,
        created_at: row.time("created_at")?,
    })
}
