//! The core the SQL backends share, so that what a row holds, what a
//! transition sets and what the audit log records are each written once.
//!
//! Everything here is dialect-free: the column lists, the effects of each
//! transition, the audit row of each kind of change, error clipping, row
//! decoding, and the statements whose SQL is the same on MySQL, PostgreSQL
//! and SQLite (written with `?` placeholders, numbered for PostgreSQL by
//! [`stmt`]). Where the dialects differ, a backend says so through two
//! small traits:
//! [`SqlRow`] (how a column is read: MySQL text columns are binary and read as
//! bytes checked as UTF-8, times are `DATETIME(3)` and counters unsigned;
//! SQLite times are INTEGER milliseconds and every integer is an i64;
//! PostgreSQL decodes a value only as its own type, so its integers are
//! read by their width) and [`Dialect`] (the clock expression, how an id is
//! bound, how many rows a write matched, how an INSERT gives its id back,
//! placeholders). Everything else that is a dialect (SQL text, locking,
//! due-time arithmetic) stays in the backend's own file.
//!
//! One file per job: [`alerts`] the alert outbox (raising an alert in a
//! state change's transaction, announcing it after the commit, and the
//! delivery statements both backends share); [`row`] what a row holds (the
//! column lists, decoding a row, binding a prepare or a registration);
//! [`claim`] how long a claim holds each row, decoding claimed rows one by
//! one and quarantining the unreadable; [`content`] where a message's
//! payload and headers are stored (in its row, or apart when long) and the
//! move of old rows' long contents; [`audit`] the audit row
//! of each kind of change, its INSERT and its read-back; [`effects`] what a
//! transition sets and errors clipped to their column; [`requeue`] an
//! operator's redeliver and re-verify, one or in bulk; [`waiting`] submitted
//! commits waiting for their prepare; [`ledger`] the consumption ledger
//! (consumer groups, begin and finish under the row lock, its alerts and
//! counts); [`ordering`] in
//! order per key (seqs at commit, a key's head, moving it on); [`flow`] the
//! flow per minute the instances add up. The statements whose SQL is the
//! same on both backends, one file per concern: [`messages`] a message by
//! its key and the ping; [`sends`] a send given back, marked SEND_FAILED
//! or sent now; [`listing`] the operators' list and its filter;
//! [`summary`](mod@summary) the per-producer summary; [`backlog`](mod@backlog) the backlog for
//! `/metrics`; [`checks`] the record of check-back calls; [`overdue`] the
//! overdue watch; [`retention`] the purge of what is finished;
//! [`producers`] the producer registry; [`outbox`] what is kept about
//! the producers' own outbox tables (failures with their alert, operators'
//! actions). This file holds [`Dialect`] and
//! what it builds on ([`Bind`], [`Query`]).

mod alerts;
mod audit;
mod backend;
mod backlog;
mod checks;
mod claim;
mod content;
mod effects;
mod flow;
mod ledger;
mod listing;
mod messages;
mod ordering;
mod outbox;
mod overdue;
mod partitions;
mod producers;
mod requeue;
mod retention;
mod returning;
mod returning_claim;
mod row;
mod sends;
mod sizes;
mod summary;
mod waiting;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use chrono::{DateTime, Utc};
use sqlx::{AssertSqlSafe, Database, Encode, IntoArguments, Type};

pub(super) use alerts::{
    alert_from_row, list_alerts, mark_alert_delivered, raise_alerts, retry_alert_later,
    settle_alerts_without_webhook, ALERT_COLUMNS,
};
pub(super) use audit::{
    audit_insert, audit_trail, audit_trails, insert_audits, producer_decides, AuditRow,
};
pub(super) use backend::{
    alert_store, guarded_update, housekeeping_store, ledger_store, operator_store, outbox_store,
    registry_store, retrying_deadlocks, send_store, verify_release, verify_store, waiting_store,
};
pub(super) use backlog::backlog;
pub(super) use checks::{check_attempts, check_attempts_of, record_check_attempts};
pub(super) use claim::{
    quarantine, sized_columns, ClaimKind, ClaimedRows, Decoded, Lease, MessageClaim,
};
pub(super) use content::{
    fill_apart, fill_payloads, insert_apart, move_chunk, with_content, Content,
};
pub(super) use effects::{clip_error, one_update, same_update, transition_effects};
pub(super) use flow::{add_flow, flow_since, purge_flow};
pub(super) use ledger::{
    begin as begin_consumption, consumer_group_counts, consumptions_in, consumptions_of,
    delete_consumer_group, find_consumer_group, finish as finish_consumption,
    flag_stuck as flag_stuck_consumptions, list_consumer_groups, set_consumer_group_token,
};
pub(super) use listing::list_messages;
pub(super) use messages::{distinct_keys, find_message, free_stale_key, ping, select_by_keys};
pub(super) use ordering::{
    blocked_by, mark_sent_ordered, order_commit_batch, order_commits, promoted_due, skip,
};
pub(super) use outbox::{outbox_actions, record_outbox_action, record_outbox_failure};
pub(super) use overdue::flag_overdue;
pub(super) use partitions::{
    first_id, held_below, make_ready, mark_archived, oldest_partition, partitions_migrated,
    period_of, periods, upkeep, PartitionDdl, AHEAD,
};
pub(super) use producers::{
    delete_producer, find_producer, list_producers, set_producer_token, upsert_consumer_group,
    upsert_producer,
};
pub(super) use requeue::{count_requeueable, redeliver_update, requeue_chunk};
pub(super) use retention::{
    delete_archived, finished_messages, purge_finished, purge_settled_alerts, raise_archive_failed,
};
pub(super) use returning::{insert_tombstone, operator_update};
pub(super) use returning_claim::{claim_due_rows, decode_returned, ReturningClaim};
pub(super) use row::{
    bind_prepare, column_error, deliver_binds, message_from_row, payload_bytes, SqlRow,
    MESSAGE_COLUMNS, PREPARE_COLUMNS, STORED_COLUMNS,
};
pub(super) use sends::{
    held_claims, lapsed_owners, mark_send_failed, release_claims_of, release_owner, release_sends,
    release_verifies_each, retry_later, send_now_update, HeldClaims, Retry,
};
pub(super) use sizes::storage;
pub(super) use summary::summary;
pub(super) use waiting::{
    count_waiting_commits, list_waiting_commits, park_commit, retry_waiting_commit, unpark_commit,
    waiting_from_row, WAITING_COLUMNS,
};

/// A value both backends can bind.
pub(in crate::store) trait Bind<D: Database>:
    for<'q> Encode<'q, D> + Type<D> + Send
{
}

impl<D: Database, T: for<'q> Encode<'q, D> + Type<D> + Send> Bind<D> for T {}

/// What a shared statement needs to know about its backend's dialect.
pub(in crate::store) trait Dialect:
    Database<Row: SqlRow, Arguments: IntoArguments<Self>>
{
    /// The database clock as an SQL expression of the type times are stored as.
    const NOW: &'static str;
    /// How an id or version is bound.
    type Int: Bind<Self>;
    /// `v` as this dialect binds it.
    fn int(v: u64) -> Self::Int;
    /// How many rows a write matched.
    fn rows_affected(done: &Self::QueryResult) -> u64;
    /// The id an INSERT of one row gave it, where the database reports it
    /// with the INSERT's result; where it does not (PostgreSQL), the INSERT
    /// ends with [`Dialect::RETURNING_ID`] and its row says.
    fn last_insert_id(done: &Self::QueryResult) -> u64;
    /// Appended to an INSERT of one row whose id the caller needs: empty
    /// where [`Dialect::last_insert_id`] tells it, ` RETURNING id` where
    /// the database has no such thing (PostgreSQL).
    const RETURNING_ID: &'static str;
    /// Whether statements number their placeholders (`$1`, `$2`: PostgreSQL)
    /// instead of taking `?` (MySQL, SQLite). The SQL is written with `?`
    /// (and SQLite's `?N`) once for every backend; [`stmt`] numbers it.
    const NUMBERED_PLACEHOLDERS: bool;
    /// An INSERT that skips a row whose unique key exists already (then
    /// matching no row), with [`Dialect::IGNORED`] at its end: `INSERT
    /// IGNORE`, `INSERT OR IGNORE`, or a plain `INSERT`.
    const INSERT_IGNORE: &'static str;
    /// The end of an [`Dialect::INSERT_IGNORE`] statement: empty, or `ON
    /// CONFLICT DO NOTHING`.
    const IGNORED: &'static str;
    /// An empty binary value, as a literal (a claim's or a listing's
    /// payload left unread).
    const NO_BYTES: &'static str;
    /// The type `CAST(… AS <this>)` names for a signed 64-bit integer.
    const SIGNED: &'static str;
    /// Appended to [`Dialect::NOW`]: the time one bound span ago.
    const MINUS_SPAN: &'static str;
    /// Appended to [`Dialect::NOW`]: the time one bound span from now.
    const PLUS_SPAN: &'static str;
    /// `d` as [`Dialect::MINUS_SPAN`] and [`Dialect::PLUS_SPAN`] bind it.
    fn span(d: std::time::Duration) -> i64;
    /// The scalar function that picks the latest of its arguments.
    const GREATEST: &'static str;
    /// What follows an INSERT's VALUES to update the row whose unique
    /// `key` exists already: `ON DUPLICATE KEY UPDATE` (MySQL, the key
    /// left unnamed), or by default `ON CONFLICT (key) DO UPDATE SET`.
    fn on_duplicate(key: &str) -> String {
        format!("ON CONFLICT ({key}) DO UPDATE SET")
    }
    /// How that update names the value the INSERT proposed for column
    /// `c`: `VALUES(c)` (MySQL), or by default `excluded.c`.
    fn proposed(c: &str) -> String {
        format!("excluded.{c}")
    }
    /// Whether an upsert can end with `RETURNING` its row (PostgreSQL,
    /// SQLite: the default); where not (MySQL), the row is read back.
    const UPSERT_RETURNS: bool = true;
    /// The statement that reads the sizes of `tables` (a list of quoted
    /// names, `'messages', 'audit_log'`) from the catalog, one row per
    /// table that exists: `name`, `row_estimate` and `bytes` (data and
    /// indexes), a partitioned table's summed over its partitions
    /// ([`crate::store::HousekeepingStore::storage`]).
    fn table_sizes(tables: &str) -> String;
    /// How a time is bound, compared with stored times.
    type Time: Bind<Self>;
    /// `t` as this dialect binds it.
    fn time(t: DateTime<Utc>) -> Self::Time;
}

/// `sql`, written with `?` placeholders, as backend `D` takes it: itself
/// on MySQL and SQLite, numbered (`$1`, `$2`, …) on PostgreSQL. Every
/// statement the shared code (or a backend written the same way) hands to
/// `sqlx::query` goes through here. A literal statement is numbered once
/// and kept for the life of the process (there are a few dozen of them); a
/// formatted one is numbered each time it is made.
/// A span in whole milliseconds, as the dialects that store times as
/// milliseconds or multiply a bound count by a millisecond bind it (a span
/// past `i64` is the longest there is).
pub(in crate::store) fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

pub(in crate::store) fn stmt<D: Dialect>(
    sql: impl Into<Cow<'static, str>>,
) -> AssertSqlSafe<Cow<'static, str>> {
    let sql = sql.into();
    if !D::NUMBERED_PLACEHOLDERS {
        return AssertSqlSafe(sql);
    }
    AssertSqlSafe(match sql {
        Cow::Borrowed(literal) => Cow::Borrowed(numbered_literal(literal)),
        Cow::Owned(made) => Cow::Owned(numbered(&made)),
    })
}

/// [`numbered`] of a literal statement, from the cache after its first use.
fn numbered_literal(sql: &'static str) -> &'static str {
    static DONE: LazyLock<Mutex<HashMap<&'static str, &'static str>>> =
        LazyLock::new(Default::default);
    let mut done = DONE.lock().expect("placeholder cache lock");
    done.entry(sql)
        .or_insert_with(|| Box::leak(numbered(sql).into_boxed_str()))
}

/// `sql` with its placeholders numbered as PostgreSQL takes them: `?N`
/// becomes `$N`, and a bare `?` the number after the largest one so far
/// (SQLite's rule, so a statement mixing both means the same on both).
/// A `?` inside a string literal, a quoted name or a comment is left alone.
fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut largest = 0u32;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                out.push(c);
                for inner in chars.by_ref() {
                    out.push(inner);
                    // A doubled quote closes and reopens: the same either way.
                    if inner == c {
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                out.push(c);
                for inner in chars.by_ref() {
                    out.push(inner);
                    if inner == '\n' {
                        break;
                    }
                }
            }
            '?' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                let n = match digits.parse::<u32>() {
                    Ok(n) => n,
                    Err(_) => largest + 1,
                };
                largest = largest.max(n);
                out.push('$');
                out.push_str(&n.to_string());
            }
            _ => out.push(c),
        }
    }
    out
}

/// A statement with its arguments, as [`sqlx::query`] makes it.
pub(in crate::store) type Query<'q, D> = sqlx::query::Query<'q, D, <D as Database>::Arguments>;

#[cfg(test)]
mod tests {
    use super::numbered;

    #[test]
    fn placeholders_are_numbered_outside_literals_names_and_comments() {
        assert_eq!(
            numbered("SELECT a FROM t WHERE b = ? AND c IN (?, ?) LIMIT ?"),
            "SELECT a FROM t WHERE b = $1 AND c IN ($2, $3) LIMIT $4"
        );
        assert_eq!(
            numbered("SELECT '?', \"a?\", 'it''s ?' FROM t WHERE x = ? -- why?\nAND y = ?"),
            "SELECT '?', \"a?\", 'it''s ?' FROM t WHERE x = $1 -- why?\nAND y = $2"
        );
    }

    #[test]
    fn numbered_placeholders_keep_their_number_and_bare_ones_follow_the_largest() {
        assert_eq!(
            numbered("UPDATE t SET a = ?1, b = ?2 WHERE c = ?1 AND d = ? AND e = ?10 OR f = ?"),
            "UPDATE t SET a = $1, b = $2 WHERE c = $1 AND d = $3 AND e = $10 OR f = $11"
        );
    }
}
