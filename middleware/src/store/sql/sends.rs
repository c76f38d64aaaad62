//! A message's send, the statements both backends share: a claim given
//! back, a send given up (SEND_FAILED with its audit row and alerts), and
//! an operator's "send now".

use sqlx::{Executor, QueryBuilder};
use trustmsg_verify_api::admin::AlertKind;

use super::alerts::raise_alerts;
use super::audit::{insert_audits, AuditRow};
use super::effects::clip_error;
use super::ordering::blocked_alert;
use super::row::{message_from_row, SqlRow, MESSAGE_COLUMNS};
use super::{stmt, Bind, Dialect};
use crate::store::{Actor, Message, NewAlert, Reschedule, SendOwner, StoreError, StoreResult};

/// What [`crate::store::OperatorStore::send_now`] sets (`now` is the dialect's
/// clock) on a committed, PENDING row (`id`, `version`) whose `deliver_at`
/// is still ahead: its delivery time now (so its wait counts from now),
/// version bumped, and due now, unless it is an ordered message waiting
/// behind its key's head (`next_send_at` NULL): that one keeps waiting for
/// the head, and then goes at once.
pub(in crate::store) fn send_now_update(now: &str) -> String {
    format!(
        "UPDATE messages SET \
         next_send_at = CASE WHEN next_send_at IS NULL THEN NULL ELSE {now} END, \
         deliver_at = {now}, claimed_by = NULL, \
         version = version + 1, updated_at = {now} \
         WHERE id = ? AND version = ? AND status = 'COMMITTED' AND send_status = 'PENDING' \
         AND deliver_at > {now}"
    )
}

/// [`crate::store::SendStore::release_sends`]: one guarded UPDATE for the lot.
pub(in crate::store) async fn release_sends<D>(
    pool: &sqlx::Pool<D>,
    claims: &[(u64, u64)],
) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    release_guarded(pool, claims, None).await
}

/// [`crate::store::SendStore::release_claims_of`]: the guarded UPDATE of
/// [`release_sends`], only where `owner` still holds the claim, versions
/// bumped.
pub(in crate::store) async fn release_claims_of<D>(
    pool: &sqlx::Pool<D>,
    owner: &SendOwner,
    claims: &[(u64, u64)],
) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    release_guarded(pool, claims, Some(owner)).await
}

/// The claims `(id, version)` given back, due at once and nobody's; with
/// an owner, only its own, and their versions bumped (whatever it was
/// doing under them is over: it has been fenced). The ids alone come first
/// so MariaDB finds the rows by the primary key.
async fn release_guarded<D>(
    pool: &sqlx::Pool<D>,
    claims: &[(u64, u64)],
    fenced: Option<&SendOwner>,
) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    if claims.is_empty() {
        return Ok(0);
    }
    let (bump, owned) = match fenced {
        Some(owner) => (
            ", version = version + 1".to_string(),
            format!(" AND claimed_by = {}", owner.literal()),
        ),
        None => (String::new(), String::new()),
    };
    let mut q = QueryBuilder::<D>::new(format!(
        "UPDATE messages SET next_send_at = {}, claimed_by = NULL{bump} \
         WHERE status = 'COMMITTED' AND send_status = 'PENDING'{owned} AND id IN (",
        D::NOW
    ));
    let mut ids = q.separated(", ");
    for (id, _) in claims {
        ids.push_bind(D::int(*id));
    }
    q.push(") AND (");
    let mut guards = q.separated(" OR ");
    for (id, version) in claims {
        guards
            .push("(id = ")
            .push_bind_unseparated(D::int(*id))
            .push_unseparated(" AND version = ")
            .push_bind_unseparated(D::int(*version))
            .push_unseparated(")");
    }
    q.push(")");
    Ok(D::rows_affected(&q.build().execute(pool).await?))
}

/// [`crate::store::SendStore::lapsed_owners`]: the owners, other than
/// `me`, of send claims that ran out. Due rows only, which the due index
/// finds.
pub(in crate::store) async fn lapsed_owners<D>(
    pool: &sqlx::Pool<D>,
    me: &SendOwner,
) -> StoreResult<Vec<SendOwner>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    for<'r> String: sqlx::Decode<'r, D> + sqlx::Type<D>,
    usize: sqlx::ColumnIndex<D::Row>,
{
    let sql = format!(
        "SELECT DISTINCT claimed_by FROM messages WHERE next_send_at <= {now} \
         AND status = 'COMMITTED' AND send_status = 'PENDING' \
         AND claimed_by IS NOT NULL AND claimed_by <> {me}",
        now = D::NOW,
        me = me.literal(),
    );
    let names: Vec<(String,)> = sqlx::query_as(stmt::<D>(sql)).fetch_all(pool).await?;
    // A name the column holds that is not one is nobody's to fence: an
    // operator's hand, which the claim passes over until it is cleared.
    Ok(names
        .into_iter()
        .filter_map(|(n,)| SendOwner::new(&n).ok())
        .collect())
}

/// [`crate::store::SendStore::release_owner`]: every send claim `owner`
/// holds, due at once and nobody's, versions bumped (whatever `owner`
/// was doing under them is over: it has been fenced).
pub(in crate::store) async fn release_owner<D>(
    pool: &sqlx::Pool<D>,
    owner: &SendOwner,
) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    let sql = format!(
        "UPDATE messages SET next_send_at = {now}, claimed_by = NULL, version = version + 1 \
         WHERE claimed_by = {owner} AND status = 'COMMITTED' AND send_status = 'PENDING' \
         AND next_send_at IS NOT NULL",
        now = D::NOW,
        owner = owner.literal(),
    );
    Ok(D::rows_affected(
        &sqlx::query(stmt::<D>(sql)).execute(pool).await?,
    ))
}

/// Which of an owner's send claims [`held_claims`] reads.
pub(in crate::store) enum HeldClaims<'a> {
    /// Those of these ids.
    Of(&'a [u64]),
    /// Those that ran out.
    Lapsed,
}

/// [`crate::store::SendStore::held_claims`] and
/// [`crate::store::SendStore::lapsed_claims`]: one SELECT.
pub(in crate::store) async fn held_claims<D>(
    pool: &sqlx::Pool<D>,
    owner: &SendOwner,
    which: HeldClaims<'_>,
) -> StoreResult<Vec<(u64, u64)>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    let mut q = QueryBuilder::<D>::new(format!(
        "SELECT id, version FROM messages WHERE claimed_by = {} \
         AND status = 'COMMITTED' AND send_status = 'PENDING' AND ",
        owner.literal()
    ));
    match which {
        HeldClaims::Of([]) => return Ok(Vec::new()),
        HeldClaims::Of(ids) => {
            q.push("id IN (");
            let mut sep = q.separated(", ");
            for id in ids {
                sep.push_bind(D::int(*id));
            }
            q.push(")");
        }
        HeldClaims::Lapsed => {
            q.push(format!("next_send_at <= {}", D::NOW));
        }
    }
    let rows = q.build().fetch_all(pool).await?;
    rows.iter()
        .map(|r| Ok((r.unsigned("id")?, r.unsigned("version")?)))
        .collect()
}

/// [`crate::store::SendStore::mark_send_failed`] in `tx`, the backend's
/// transaction (begun its way: SQLite's takes the write lock at once): the
/// guarded UPDATE to SEND_FAILED (a counted attempt, the error kept, no
/// longer due), its audit row, and its alerts in the same transaction:
/// `send_failed`, and `key_blocked` when an ordered head leaves later
/// messages of its key waiting (their key row read with `lock` appended,
/// see [`blocked_alert`]). Committed, then the alerts announced. None when
/// the guard matched nothing: nothing was written, and the transaction is
/// rolled back at once so its locks go with it.
pub(in crate::store) async fn mark_send_failed<D>(
    mut tx: sqlx::Transaction<'_, D>,
    lock: &str,
    (id, version): (u64, u64),
    error: &str,
    actor: &Actor,
) -> StoreResult<Option<Message>>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    Vec<u8>: Bind<D>,
    String: Bind<D>,
    Option<String>: Bind<D>,
    &'static str: Bind<D>,
    Option<&'static str>: Bind<D>,
    i64: Bind<D>,
{
    let done = sqlx::query(stmt::<D>(format!(
        "UPDATE messages SET send_status = 'SEND_FAILED', send_attempts = send_attempts + 1, \
         last_error = ?, next_send_at = NULL, version = version + 1, updated_at = {now} \
         WHERE id = ? AND version = ? AND status = 'COMMITTED' AND send_status = 'PENDING'",
        now = D::NOW
    )))
    .bind(clip_error(error).to_string())
    .bind(D::int(id))
    .bind(D::int(version))
    .execute(&mut *tx)
    .await?;
    if D::rows_affected(&done) != 1 {
        tx.rollback().await?;
        return Ok(None);
    }
    insert_audits(&mut *tx, &[AuditRow::send_failed(id, actor, error)]).await?;
    let row = sqlx::query(stmt::<D>(format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?"
    )))
    .bind(D::int(id))
    .fetch_optional(&mut *tx)
    .await?
    .as_ref()
    .map(message_from_row)
    .transpose()?
    .ok_or(StoreError::Vanished("a row just marked SEND_FAILED"))?;
    let mut alerts = vec![NewAlert::failed(AlertKind::SendFailed, &row)];
    alerts.extend(blocked_alert::<D>(&mut tx, lock, &row).await?);
    let raised = raise_alerts::<D>(&mut tx, alerts).await?;
    tx.commit().await?;
    raised.announce();
    Ok(Some(row))
}

/// Pushes a claimed message's next attempt `r.delay` out, recording
/// `r.error`, under the claim's guard (`r.id`, `r.version`) and `state` (the
/// row's state the claim was taken in): a send rescheduled or postponed
/// (`attempts` the column counting them and `counted` 0 or 1 added to it),
/// or a check-back rescheduled. Whether the guard matched.
pub(in crate::store) async fn retry_later<D>(
    pool: &sqlx::Pool<D>,
    retry: Retry,
    r: &Reschedule,
) -> StoreResult<bool>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    i64: Bind<D>,
    String: Bind<D>,
{
    // A send's retry is nobody's claim: an exactly-once owner's name left
    // on a row due again would look like a lapsed claim, and have its
    // owner fenced for nothing.
    let (attempts, due, state, owner) = match retry {
        Retry::Send { .. } => (
            "send_attempts",
            "next_send_at",
            "status = 'COMMITTED' AND send_status = 'PENDING'",
            ", claimed_by = NULL",
        ),
        Retry::Verify => (
            "verify_attempts",
            "next_verify_at",
            "status = 'PREPARED'",
            "",
        ),
    };
    let counted: i64 = match retry {
        Retry::Send { counted } => i64::from(counted),
        Retry::Verify => 1,
    };
    let done = sqlx::query(stmt::<D>(format!(
        "UPDATE messages SET {attempts} = {attempts} + ?, last_error = ?, \
         {due} = {now}{plus}{owner}, version = version + 1, updated_at = {now} \
         WHERE id = ? AND version = ? AND {state}",
        now = D::NOW,
        plus = D::PLUS_SPAN,
    )))
    .bind(counted)
    .bind(clip_error(&r.error).to_string())
    .bind(D::span(r.delay))
    .bind(D::int(r.id))
    .bind(D::int(r.version))
    .execute(pool)
    .await?;
    Ok(D::rows_affected(&done) == 1)
}

/// What [`retry_later`] pushes out.
#[derive(Debug, Clone, Copy)]
pub(in crate::store) enum Retry {
    /// A send: counted as an attempt (a failure) or not (a postponement).
    Send {
        /// Whether the attempt counts.
        counted: bool,
    },
    /// A check-back, always counted.
    Verify,
}

/// Gives check-back claims back one guarded UPDATE each, in `conn`'s
/// transaction (one commit for the batch), due again `delay` from now; how
/// many matched. (MySQL matches the lot with one `(id, version) IN`.)
pub(in crate::store) async fn release_verifies_each<D>(
    conn: &mut D::Connection,
    claims: &[(u64, u64)],
    delay: std::time::Duration,
) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
{
    let sql = format!(
        "UPDATE messages SET next_verify_at = {now}{plus}, version = version + 1 \
         WHERE id = ? AND version = ? AND status = 'PREPARED'",
        now = D::NOW,
        plus = D::PLUS_SPAN,
    );
    let mut matched = 0;
    for (id, version) in claims {
        let done = sqlx::query(stmt::<D>(sql.clone()))
            .bind(D::span(delay))
            .bind(D::int(*id))
            .bind(D::int(*version))
            .execute(&mut *conn)
            .await?;
        matched += D::rows_affected(&done);
    }
    Ok(matched)
}
