//! The prepare's statements on MySQL: the multi-row INSERT (with the
//! `headroom` a decision and the SENT mark give back), its fast path with
//! `INSERT … RETURNING` (MariaDB), the contents kept apart written in the
//! same transaction, and reading rows back by key.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use sqlx::mysql::MySqlRow;
use sqlx::{MySql, QueryBuilder};
use trustmsg_verify_api::SendStatus;

use crate::store::sql::{self, message_from_row, MESSAGE_COLUMNS, PREPARE_COLUMNS, STORED_COLUMNS};
use crate::store::{Inserted, Message, NewMessage, StoreError, StoreResult};

use super::{is_lock_conflict, is_unique_violation, micros, MySqlStore};

/// What a prepare writes to `headroom` (migration 0015): 40 bytes, which a
/// decision ([`transition_update`](super::transitions::transition_update))
/// cuts to 16 and the SENT mark (`mark_sent_statement` in `sends.rs`) to
/// none. Each of those changes fills in more than it empties (a commit:
/// `send_status`, `next_send_at`, `decided_at`, 16 bytes net; with an
/// ordered message's seq, 24; the SENT mark: `sent_at`, the partition and
/// offset, 9), so with the room given back the record never grows, and
/// InnoDB rewrites it in its own place instead of moving it and
/// reorganising its page (3–7 KB of redo per change).
pub(super) const HEADROOM: &str = "REPEAT(X'00', 40)";

/// `headroom` after a decision (see [`HEADROOM`]): at most 16 bytes, and
/// none where there was none (a row from before migration 0015).
pub(super) const HEADROOM_DECIDED: &str = "LEFT(headroom, 16)";

/// `headroom` of a row created decided: what [`HEADROOM_DECIDED`] leaves.
const HEADROOM_CREATED_DECIDED: &str = "REPEAT(X'00', 16)";

impl MySqlStore {
    /// The fast path of a prepare on a server with `INSERT … RETURNING`: one
    /// statement creates every row of the batch and returns them (autocommit,
    /// so all rows or none; in a transaction with the INSERT of their
    /// contents when some are apart). None when it does not apply: no
    /// RETURNING, a key twice in the batch, or a key that exists already (a
    /// producer's retry), which the caller then sorts out with a read first.
    pub(super) async fn insert_all_returning(
        &self,
        batch: &[NewMessage],
        keys: &[(&str, &str)],
    ) -> StoreResult<Option<Vec<Inserted>>> {
        let distinct: HashSet<&(&str, &str)> = keys.iter().collect();
        if !self.returning || distinct.len() != keys.len() {
            return Ok(None);
        }
        let contents: Vec<sql::Content<'_>> = batch.iter().map(sql::Content::of).collect();
        let creates: Vec<(&NewMessage, &sql::Content<'_>)> = batch.iter().zip(&contents).collect();
        let mut q = insert_prepared_rows(&creates);
        q.push(format!(" RETURNING {STORED_COLUMNS}"));
        let mut tx = if contents.iter().any(sql::Content::apart) {
            Some(self.pool.begin().await?)
        } else {
            None
        };
        let inserted = match &mut tx {
            Some(tx) => q.build().fetch_all(&mut **tx).await,
            None => q.build().fetch_all(&self.pool).await,
        };
        let rows = match inserted {
            Ok(rows) => rows,
            Err(e) if is_unique_violation(&e) || is_lock_conflict(&e) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut by_key = rows_by_key(&rows)?;
        if let Some(mut tx) = tx {
            created_apart(&mut tx, &mut by_key, &creates).await?;
            tx.commit().await?;
        }
        keys.iter()
            .map(|(b, k)| {
                by_key
                    .remove(&(b.to_string(), k.to_string()))
                    .map(Inserted::Created)
                    .ok_or(StoreError::Vanished("a row INSERT … RETURNING wrote"))
            })
            .collect::<StoreResult<Vec<_>>>()
            .map(Some)
    }
}

/// `INSERT INTO messages … VALUES (…), (…)` for `creates`, each with where
/// its content goes, without a terminator.
pub(super) fn insert_prepared_rows(
    creates: &[(&NewMessage, &sql::Content<'_>)],
) -> QueryBuilder<MySql> {
    insert_rows(creates, None)
}

/// What a row created COMMITTED (its producer's own transaction decided it)
/// has besides a prepared row's columns, which then hold `'COMMITTED'` and no
/// check-back time: a decided row's headroom (see [`HEADROOM`]), the send
/// pending, decided now, and due as a commit makes it (`next_send_at`, the
/// last column, after `deliver_at`, which it reads).
const COMMITTED_COLUMNS: &str = "headroom, send_status, decided_at, next_send_at";

/// [`insert_prepared_rows`], or with `committed` (the send lease a commit
/// claims) rows created COMMITTED ([`COMMITTED_COLUMNS`]).
pub(super) fn insert_rows(
    creates: &[(&NewMessage, &sql::Content<'_>)],
    committed: Option<Duration>,
) -> QueryBuilder<MySql> {
    let mut q = QueryBuilder::<MySql>::new(match committed {
        None => format!("INSERT INTO messages ({PREPARE_COLUMNS}, headroom) "),
        Some(_) => format!("INSERT INTO messages ({PREPARE_COLUMNS}, {COMMITTED_COLUMNS}) "),
    });
    q.push_values(creates, |mut b, (m, content)| {
        b.push_bind(m.biz_id.as_str())
            .push_bind(m.message_key.as_str())
            .push_bind(m.topic.as_str())
            .push_bind(m.key.as_deref())
            .push_bind(content.row_payload())
            .push_bind(content.row_headers())
            .push_bind(m.digest())
            .push_bind(m.order_key.as_deref())
            .push_bind(m.traceparent.as_deref())
            .push_bind(m.tracestate.as_deref());
        match committed {
            None => b
                .push("'PREPARED'")
                .push("UTC_TIMESTAMP(3) + INTERVAL ")
                .push_bind_unseparated(micros(m.first_verify_after))
                .push_unseparated(" MICROSECOND"),
            Some(_) => b.push("'COMMITTED'").push("NULL"),
        };
        b.push("UTC_TIMESTAMP(3)").push("UTC_TIMESTAMP(3)");
        let (at, after) = sql::deliver_binds::<MySql>(m);
        b.push("COALESCE(")
            .push_bind_unseparated(at)
            .push_unseparated(", UTC_TIMESTAMP(3) + INTERVAL ")
            .push_bind_unseparated(after)
            .push_unseparated(" MICROSECOND)")
            .push_bind(sql::payload_bytes(m))
            .push_bind(content.apart());
        match committed {
            None => b.push(HEADROOM),
            // A value list may read a column it set before: `deliver_at`.
            Some(lease) => b
                .push(HEADROOM_CREATED_DECIDED)
                .push_bind(SendStatus::Pending.as_str())
                .push("UTC_TIMESTAMP(3)")
                .push("IF(deliver_at > UTC_TIMESTAMP(3), deliver_at, UTC_TIMESTAMP(3) + INTERVAL ")
                .push_bind_unseparated(micros(lease))
                .push_unseparated(" MICROSECOND)"),
        };
    });
    q
}

/// Rows a prepare created, read as they are stored ([`STORED_COLUMNS`]),
/// by (biz_id, message_key).
pub(super) fn rows_by_key(rows: &[MySqlRow]) -> StoreResult<HashMap<(String, String), Message>> {
    let mut by_key = HashMap::with_capacity(rows.len());
    for row in rows {
        let m = message_from_row(row)?;
        by_key.insert((m.biz_id.clone(), m.message_key.clone()), m);
    }
    Ok(by_key)
}

/// On the transaction that created the rows `by_key` from `creates`:
/// writes the contents that are apart, and puts each such content into its
/// row as read (which holds none of it).
pub(super) async fn created_apart(
    tx: &mut sqlx::MySqlConnection,
    by_key: &mut HashMap<(String, String), Message>,
    creates: &[(&NewMessage, &sql::Content<'_>)],
) -> StoreResult<()> {
    let mut apart = Vec::new();
    for (m, content) in creates.iter().filter(|(_, c)| c.apart()) {
        let key = (m.biz_id.clone(), m.message_key.clone());
        let row = by_key
            .remove(&key)
            .ok_or(StoreError::Vanished("a row a batched prepare wrote"))?;
        apart.push((row.id, *content));
        by_key.insert(key, sql::with_content(row, m));
    }
    sql::insert_apart::<MySql>(tx, &apart).await
}

/// The rows holding these keys ([`sql::select_by_keys`] of every column).
pub(super) async fn select_messages_by_keys<'e, E>(
    exec: E,
    keys: &[(&str, &str)],
) -> StoreResult<Vec<Message>>
where
    E: sqlx::Executor<'e, Database = MySql>,
{
    sql::select_by_keys(exec, MESSAGE_COLUMNS, keys).await
}
