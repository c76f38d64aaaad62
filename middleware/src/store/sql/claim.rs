//! Claimed rows: which rows a claim takes, how long it holds each, decoding
//! them one by one, and setting aside (quarantining) those this version
//! cannot read, so that one bad row never fails every claim that reaches it.

use std::time::Duration;

use sqlx::Executor;
use trustmsg_verify_api::{MessageStatus, SendStatus};

use super::alerts::{raise_alerts, Raised};
use super::audit::{insert_audits, AuditRow};
use super::effects::clip_error;
use super::row::{lossy_text, message_from_row, SqlRow, STATE_COLUMNS, STORED_COLUMNS};
use super::{stmt, Bind, Dialect};
use crate::store::{
    Actor, Message, NewAlert, PayloadRoom, Quarantined, SendOwner, StoreError, StoreResult,
    VerifyLease,
};

/// Which due rows a claim takes; it says what a quarantine of one of them
/// writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::store) enum ClaimKind {
    /// COMMITTED + PENDING rows, due by `next_send_at` (the forwarder).
    Sends,
    /// PREPARED rows, due by `next_verify_at` (the verifier).
    Verifies,
}

impl ClaimKind {
    /// The column that makes a row due.
    pub(in crate::store) fn due_column(self) -> &'static str {
        match self {
            Self::Sends => "next_send_at",
            Self::Verifies => "next_verify_at",
        }
    }

    /// Who claims such rows, and the state they are claimed in.
    fn claimer(self) -> (Actor, MessageStatus, Option<SendStatus>) {
        match self {
            Self::Sends => (
                Actor::Forwarder,
                MessageStatus::Committed,
                Some(SendStatus::Pending),
            ),
            Self::Verifies => (Actor::Verifier, MessageStatus::Prepared, None),
        }
    }

    /// The columns a claim reads, as [`message_from_row`] decodes them,
    /// and `payload_apart`. A send claim reads the content as the row
    /// stores it, so that it reads no other table while it locks its rows;
    /// the content of rows apart is filled in after ([`Decoded::apart`],
    /// [`super::fill_apart`]). Check-back never looks at a payload, so
    /// its claims read none: a batch of large payloads would otherwise be
    /// read, and held for the calls, for nothing. They read the headers the
    /// row holds (none for a content apart), so that a row whose headers
    /// cannot be read is set aside by the claim, not found out by the
    /// decision that reads it back. (A check-back commit reads its row back
    /// whole for the forwarder, see `crate::verifier::writes`.)
    pub(in crate::store) fn columns<D: Dialect>(self) -> String {
        match self {
            Self::Sends => STORED_COLUMNS.to_string(),
            Self::Verifies => format!(
                "{STATE_COLUMNS}, {} AS payload, headers, FALSE AS payload_apart",
                D::NO_BYTES
            ),
        }
    }

    /// The state a row must be in to be taken, as SQL.
    pub(in crate::store) fn state(self) -> &'static str {
        match self {
            Self::Sends => "status = 'COMMITTED' AND send_status = 'PENDING'",
            Self::Verifies => "status = 'PREPARED'",
        }
    }
}

/// The columns of a send claim that reads the payloads' lengths first, and
/// then the payloads of the rows that fit its room ([`ClaimedRows`],
/// [`super::fill_payloads`], [`super::fill_apart`]).
pub(in crate::store) fn sized_columns<D: Dialect>() -> String {
    format!(
        "{STATE_COLUMNS}, {} AS payload, headers, payload_apart, payload_bytes",
        D::NO_BYTES
    )
}

/// A claim's rows as they are read, decoded one by one; for a claim read
/// with [`sized_columns`], each readable row's payload length too, in due
/// order, to cut the claim where its room runs out
/// ([`crate::store::PayloadRoom::prefix`]).
#[derive(Debug, Default)]
pub(in crate::store) struct ClaimedRows {
    pub(in crate::store) rows: Decoded,
    /// None: the claim does not read the lengths (it is not cut).
    lengths: Option<Vec<Option<u64>>>,
}

impl ClaimedRows {
    /// Rows of a claim read with [`sized_columns`] (`sized`) or not.
    pub(in crate::store) fn new(sized: bool) -> Self {
        Self {
            rows: Decoded::default(),
            lengths: sized.then(Vec::new),
        }
    }

    /// Decodes `row`.
    pub(in crate::store) fn push<R: SqlRow>(&mut self, row: &R) -> StoreResult<()> {
        let readable = self.rows.messages.len();
        self.rows.push(row)?;
        if let Some(lengths) = &mut self.lengths {
            if self.rows.messages.len() > readable {
                lengths.push(row.opt_u64("payload_bytes")?);
            }
        }
        Ok(())
    }

    /// Keeps the readable rows whose payloads fit `room`, in due order, and
    /// every unreadable one (quarantined without its payload); returns
    /// whether the room cut the claim short (never, for a claim that did
    /// not read the lengths).
    pub(in crate::store) fn cut(&mut self, room: crate::store::PayloadRoom) -> bool {
        let Some(lengths) = &self.lengths else {
            return false;
        };
        let fit = room.prefix(lengths.iter().copied());
        let cut = fit < self.rows.messages.len();
        self.rows.messages.truncate(fit);
        cut
    }
}

/// One claim of due messages, as the store was asked for it.
pub(in crate::store) struct MessageClaim {
    pub(in crate::store) kind: ClaimKind,
    pub(in crate::store) limit: u32,
    pub(in crate::store) room: PayloadRoom,
    pub(in crate::store) lease: Lease,
    /// A send claim whose rows might not all fit its room takes, of the
    /// due rows in due order, those whose payloads' running total fits.
    pub(in crate::store) sized: bool,
    /// An exactly-once forwarder's claim: it takes only rows nobody or
    /// this owner claimed last, and writes its name on them.
    pub(in crate::store) owner: Option<SendOwner>,
}

impl MessageClaim {
    pub(in crate::store) fn new(
        kind: ClaimKind,
        limit: u32,
        room: PayloadRoom,
        lease: Lease,
    ) -> Self {
        let sized = kind == ClaimKind::Sends && !room.fits_any(limit);
        Self {
            kind,
            limit,
            room,
            lease,
            sized,
            owner: None,
        }
    }

    /// The same claim made by an exactly-once forwarder named `owner`.
    pub(in crate::store) fn owned_by(self, owner: SendOwner) -> Self {
        Self {
            owner: Some(owner),
            ..self
        }
    }

    /// The state a row must be in to be taken, as SQL: the kind's, and for
    /// an owned claim, nobody's or this owner's last claim.
    pub(in crate::store) fn state(&self) -> String {
        match &self.owner {
            None => self.kind.state().to_string(),
            Some(o) => format!(
                "{} AND (claimed_by IS NULL OR claimed_by = {})",
                self.kind.state(),
                o.literal()
            ),
        }
    }

    /// What the claim's UPDATE writes besides the lease and the version:
    /// the owner's name on an owned claim.
    pub(in crate::store) fn owner_set(&self) -> String {
        match &self.owner {
            None => String::new(),
            Some(o) => format!(", claimed_by = {}", o.literal()),
        }
    }
}

/// How long a claim lasts.
#[derive(Debug, Clone, Copy)]
pub(in crate::store) enum Lease {
    /// The same span for every row (`--send-lease`).
    Every(Duration),
    /// Each row as long as its producer's call may take, plus a margin.
    Verify(VerifyLease),
}

impl Lease {
    /// The claim on a row whose producer is registered with `timeout_ms`
    /// (None: not registered, or a row that cannot be read).
    pub(in crate::store) fn span(self, timeout_ms: Option<u32>) -> Duration {
        match self {
            Self::Every(d) => d,
            Self::Verify(v) => v.covering(timeout_ms),
        }
    }
}

/// What `last_error` of a quarantined row starts with.
pub(in crate::store) const QUARANTINED: &str = "quarantined: ";

/// Claimed rows, decoded one by one as they are read. A row that is
/// [`StoreError::Corrupt`] is kept apart, with what can still be read of it
/// (its id must be readable: without it the row cannot even be set aside,
/// and the claim fails); any other error fails the claim.
#[derive(Debug, Default)]
pub(in crate::store) struct Decoded {
    /// The rows that could be read.
    pub(in crate::store) messages: Vec<Message>,
    /// The rows to quarantine.
    pub(in crate::store) unreadable: Vec<Quarantined>,
    /// The ids of readable rows whose content is apart (read empty): the
    /// claim fills it in.
    pub(in crate::store) apart: Vec<u64>,
}

impl Decoded {
    /// Decodes `row`. A caller that reads rows as a stream and drops each
    /// once decoded holds a claim's payloads about once, not as raw rows
    /// and messages both.
    pub(in crate::store) fn push<R: SqlRow>(&mut self, row: &R) -> StoreResult<()> {
        match message_from_row(row) {
            Ok(m) => {
                if row.flag("payload_apart")? {
                    self.apart.push(m.id);
                }
                self.messages.push(m);
            }
            Err(e @ StoreError::Corrupt(_)) => self.unreadable.push(Quarantined {
                id: row.unsigned("id")?,
                biz_id: lossy_text(row, "biz_id"),
                message_key: lossy_text(row, "message_key"),
                reason: clip_error(&format!("{QUARANTINED}{e}")).to_string(),
            }),
            Err(e) => return Err(e),
        }
        Ok(())
    }
}

impl Decoded {
    /// The readable rows and the unreadable ones (with `more` of them,
    /// found filling in the contents apart), each in id order: RETURNING
    /// comes in no defined order, and MySQL's claim reads in id order.
    pub(in crate::store) fn in_id_order(
        self,
        more: Vec<Quarantined>,
    ) -> (Vec<Message>, Vec<Quarantined>) {
        let (mut messages, mut unreadable) = (self.messages, self.unreadable);
        unreadable.extend(more);
        messages.sort_by_key(|m| m.id);
        unreadable.sort_by_key(|q| q.id);
        (messages, unreadable)
    }
}

/// [`Decoded`] of `rows`, each dropped once decoded.
pub(in crate::store) fn decode_claimed<R: SqlRow>(rows: Vec<R>) -> StoreResult<Decoded> {
    let mut decoded = Decoded::default();
    for row in rows {
        decoded.push(&row)?;
    }
    Ok(decoded)
}

/// Sets aside claimed rows the claim could not read: their due column
/// becomes NULL (so no scan takes them again), `last_error` the reason,
/// `version` is bumped, and an audit row records it. Each UPDATE is guarded
/// by the claim's state, so a row that changed meanwhile is left alone.
/// Each row this call quarantined gets its `quarantined` alert in the
/// outbox, in the same transaction. Returns those rows and their alerts, to
/// announce once the caller has committed.
pub(in crate::store) async fn quarantine<D>(
    conn: &mut D::Connection,
    kind: ClaimKind,
    rows: Vec<Quarantined>,
) -> StoreResult<(Vec<Quarantined>, Raised)>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    String: Bind<D>,
    &'static str: Bind<D>,
    Option<&'static str>: Bind<D>,
    Option<String>: Bind<D>,
    i64: Bind<D>,
{
    let mut done = Vec::with_capacity(rows.len());
    for q in rows {
        let matched = sqlx::query(stmt::<D>(format!(
            "UPDATE messages SET {due} = NULL, last_error = ?, version = version + 1,              updated_at = {now} WHERE id = ? AND {state}",
            due = kind.due_column(),
            now = D::NOW,
            state = kind.state(),
        )))
        .bind(q.reason.clone())
        .bind(D::int(q.id))
        .execute(&mut *conn)
        .await?;
        if D::rows_affected(&matched) == 1 {
            done.push(q);
        }
    }
    let audits: Vec<AuditRow> = done
        .iter()
        .map(|q| {
            let (claimer, status, send_status) = kind.claimer();
            AuditRow::quarantine(q.id, claimer, status, send_status, &q.reason)
        })
        .collect();
    insert_audits(&mut *conn, &audits).await?;
    let alerts = done.iter().map(NewAlert::quarantined).collect();
    let raised = raise_alerts::<D>(&mut *conn, alerts).await?;
    Ok((done, raised))
}
