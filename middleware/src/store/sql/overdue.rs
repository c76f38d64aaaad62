//! The overdue watch's statement: flag, once across instances, each
//! message that has waited too long, with its alert.

use sqlx::Executor;

use super::alerts::raise_alerts;
use super::claim::ClaimKind;
use super::row::{lossy_text, SqlRow};
use super::{stmt, Bind, Dialect};
use crate::store::{NewAlert, Overdue, StoreResult, Wait};

/// [`crate::store::HousekeepingStore::flag_overdue`]: reads the candidates, then flags each with
/// an UPDATE guarded by the flag and the state, so of several instances
/// scanning at once exactly one flags (and alerts) each message. Each kind
/// of wait has its own flag (a message alerted `verify_overdue` can still be
/// alerted `send_overdue`), which an operator's redeliver or re-verify
/// clears. The flag and the message's alert are written in one transaction,
/// and the alert is announced after it commits. A quarantined row (its due
/// column NULL) has had its alert already.
pub(in crate::store) async fn flag_overdue<D>(
    pool: &sqlx::Pool<D>,
    wait: Wait,
    older_than: std::time::Duration,
    limit: u32,
) -> StoreResult<Vec<Overdue>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
    String: Bind<D>,
    Option<String>: Bind<D>,
    &'static str: Bind<D>,
{
    let (kind, since, attempts, flag) = match wait {
        Wait::Send => (
            ClaimKind::Sends,
            "decided_at",
            "send_attempts",
            "send_overdue_alerted",
        ),
        Wait::Decision => (
            ClaimKind::Verifies,
            "created_at",
            "verify_attempts",
            "verify_overdue_alerted",
        ),
    };
    let state = kind.state();
    // An operator's redeliver or re-verify starts the wait again; a send
    // delayed to `deliver_at` waits from then, not from its commit.
    let later = match wait {
        Wait::Send => format!(", COALESCE(deliver_at, {since})"),
        Wait::Decision => String::new(),
    };
    let since = format!(
        "{}({since}, COALESCE(requeued_at, {since}){later})",
        D::GREATEST
    );
    let rows = sqlx::query(stmt::<D>(format!(
        "SELECT id, biz_id, message_key, {attempts} AS attempts, {since} AS since, last_error \
         FROM messages WHERE {state} AND {due} IS NOT NULL AND {flag} = FALSE \
         AND {since} < {now}{minus} ORDER BY id LIMIT ?",
        due = kind.due_column(),
        now = D::NOW,
        minus = D::MINUS_SPAN,
    )))
    .bind(D::span(older_than))
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    let mut flagged = Vec::new();
    for row in &rows {
        let id = row.unsigned("id")?;
        let mut tx = pool.begin().await?;
        let done = sqlx::query(stmt::<D>(format!(
            "UPDATE messages SET {flag} = TRUE WHERE id = ? AND {flag} = FALSE AND {state}"
        )))
        .bind(D::int(id))
        .execute(&mut *tx)
        .await?;
        if D::rows_affected(&done) != 1 {
            continue;
        }
        // Read leniently: an alert about a row that is partly unreadable
        // still names it.
        let overdue = Overdue {
            id,
            biz_id: lossy_text(row, "biz_id"),
            message_key: lossy_text(row, "message_key"),
            attempts: row.unsigned("attempts").unwrap_or(0),
            since: row.opt_time("since").ok().flatten(),
            last_error: row.opt_text("last_error").ok().flatten(),
        };
        let alert = NewAlert::overdue(wait, older_than, &overdue);
        let raised = raise_alerts::<D>(&mut tx, vec![alert]).await?;
        tx.commit().await?;
        raised.announce();
        flagged.push(overdue);
    }
    Ok(flagged)
}
