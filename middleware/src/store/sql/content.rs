//! Where a message's content (its payload and headers) is stored, so that
//! no state change reads it (issue 42, migration 0018).
//!
//! InnoDB keeps a value too long for its record's page on pages of its own
//! and reads it whole for every UPDATE of the row, whatever the UPDATE sets:
//! 300 commits or SENT marks of 900 kB messages took 0.7 to 1.8 s, against
//! 0.01 s with 256-byte payloads, so marks of big messages missed their
//! deadline and the messages were sent again and again. (SQLite rewrites a
//! whole row, overflow pages included, on every UPDATE.) So:
//!
//! - A prepare stores a content longer than [`INLINE_CONTENT_MAX`] bytes in
//!   `message_payloads` (keyed by the message id), in the same transaction
//!   as the message row, which then holds an empty payload, `{}` headers
//!   and `payload_apart`. A shorter content stays in the row, on its own
//!   page, where an UPDATE reads it at no extra cost: small messages are
//!   written and read as before, with no second row.
//! - No UPDATE ever names `message_payloads`; the send claim and the views
//!   read it ([`super::MESSAGE_COLUMNS`] reads it only for rows apart; a
//!   locking claim reads the rows alone and then [`fill_apart`]), and
//!   retention deletes from it with the message.
//! - Rows written before the migration keep their content in the row and
//!   are read as before. [`move_chunk`] moves the long ones out, a short
//!   transaction at a time in id order, on every instance
//!   (`crate::workers::payload_move`); the walk's place is in `payload_move`.

use std::collections::{HashMap, HashSet};

use sqlx::{Executor, QueryBuilder};

use super::row::SqlRow;
use super::{clip_error, stmt, Bind, Dialect};
use crate::store::{Message, NewMessage, PayloadMove, Quarantined, StoreError, StoreResult};

/// The longest content (payload bytes plus the headers' JSON) kept in its
/// message row. A message row is at most about 4.2 KB without its content
/// (a 1 KiB record key, a 2,048-character error, a 512-character
/// tracestate), so with 2 KiB of content it stays well within the half page
/// InnoDB keeps in a record; PostgreSQL moves a value out of its row (TOAST)
/// from about the same size.
pub(in crate::store) const INLINE_CONTENT_MAX: usize = 2048;

/// A prepared message's content as it is stored: in its row, or apart.
#[derive(Debug)]
pub(in crate::store) struct Content<'m> {
    payload: &'m [u8],
    headers: String,
    apart: bool,
}

impl<'m> Content<'m> {
    /// Where `m`'s content goes.
    pub(in crate::store) fn of(m: &'m NewMessage) -> Self {
        let headers = serde_json::to_string(&m.headers).expect("a string map serialises");
        let apart = m.payload.len() + headers.len() > INLINE_CONTENT_MAX;
        Self {
            payload: &m.payload,
            headers,
            apart,
        }
    }

    /// Whether it goes to `message_payloads`.
    pub(in crate::store) fn apart(&self) -> bool {
        self.apart
    }

    /// The payload the message row holds.
    pub(in crate::store) fn row_payload(&self) -> &'m [u8] {
        if self.apart {
            b""
        } else {
            self.payload
        }
    }

    /// The headers the message row holds.
    pub(in crate::store) fn row_headers(&self) -> &str {
        if self.apart {
            "{}"
        } else {
            &self.headers
        }
    }
}

/// Writes the content of the created rows `(id, content)` whose content is
/// apart, on the transaction that created them (one INSERT; nothing when
/// none is apart).
pub(in crate::store) async fn insert_apart<D>(
    conn: &mut D::Connection,
    rows: &[(u64, &Content<'_>)],
) -> StoreResult<()>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    for<'a> &'a [u8]: Bind<D>,
    for<'a> &'a str: Bind<D>,
{
    let apart: Vec<&(u64, &Content<'_>)> = rows.iter().filter(|(_, c)| c.apart).collect();
    if apart.is_empty() {
        return Ok(());
    }
    let mut q =
        QueryBuilder::<D>::new("INSERT INTO message_payloads (message_id, payload, headers) ");
    q.push_values(apart, |mut b, (id, c)| {
        b.push_bind(D::int(*id))
            .push_bind(c.payload)
            .push_bind(c.headers.as_str());
    });
    q.build().execute(&mut *conn).await?;
    Ok(())
}

/// A created row read back as its row stores it (empty content when it is
/// apart), with `m`'s content put in, as a read of the message would give.
pub(in crate::store) fn with_content(mut row: Message, m: &NewMessage) -> Message {
    row.payload = m.payload.clone();
    row.headers = m.headers.clone();
    row
}

/// Fills in the payloads of the `messages` named by `ids`, whose content is
/// in their rows, claimed without their payloads (a claim that read the
/// lengths first), with one read of their rows.
pub(in crate::store) async fn fill_payloads<'c, D, E>(
    exec: E,
    messages: &mut [Message],
    ids: &[u64],
) -> StoreResult<()>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
{
    if ids.is_empty() {
        return Ok(());
    }
    let mut q = QueryBuilder::<D>::new("SELECT id, payload FROM messages WHERE id IN (");
    let mut sep = q.separated(", ");
    for id in ids {
        sep.push_bind(D::int(*id));
    }
    q.push(")");
    let mut payloads = HashMap::with_capacity(ids.len());
    {
        let mut rows = q.build().fetch(exec);
        while let Some(row) = futures::TryStreamExt::try_next(&mut rows).await? {
            payloads.insert(row.unsigned::<u64>("id")?, row.bytes("payload")?);
        }
    }
    let named: HashSet<u64> = ids.iter().copied().collect();
    for m in messages.iter_mut().filter(|m| named.contains(&m.id)) {
        m.payload = payloads
            .remove(&m.id)
            .ok_or(StoreError::Vanished("a row the claim holds"))?;
    }
    Ok(())
}

/// Fills in the payload and headers of the `messages` named by `ids`, whose
/// content is apart, with one read of `message_payloads`. A message whose
/// content cannot be read there (missing, headers that are not JSON) is
/// taken out of `messages` and returned, to be quarantined with the claim's
/// other unreadable rows.
pub(in crate::store) async fn fill_apart<'c, D, E>(
    exec: E,
    messages: &mut Vec<Message>,
    ids: &[u64],
) -> StoreResult<Vec<Quarantined>>
where
    D: Dialect,
    E: Executor<'c, Database = D>,
{
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut q = QueryBuilder::<D>::new(
        "SELECT message_id, payload, headers FROM message_payloads WHERE message_id IN (",
    );
    let mut sep = q.separated(", ");
    for id in ids {
        sep.push_bind(D::int(*id));
    }
    q.push(")");
    let mut read: HashMap<u64, StoreResult<(Vec<u8>, String)>> = HashMap::with_capacity(ids.len());
    {
        let mut rows = q.build().fetch(exec);
        while let Some(row) = futures::TryStreamExt::try_next(&mut rows).await? {
            let content = row
                .bytes("payload")
                .and_then(|payload| Ok((payload, row.text("headers")?)));
            read.insert(row.unsigned("message_id")?, content);
        }
    }
    let named: HashSet<u64> = ids.iter().copied().collect();
    let mut unreadable = Vec::new();
    let mut kept = Vec::with_capacity(messages.len());
    for mut m in messages.drain(..) {
        if !named.contains(&m.id) {
            kept.push(m);
            continue;
        }
        let content = read
            .remove(&m.id)
            .unwrap_or_else(|| Err(StoreError::Corrupt("its content apart is missing".into())))
            .and_then(|(payload, headers)| {
                let headers = serde_json::from_str(&headers)
                    .map_err(|e| StoreError::Corrupt(format!("headers: {e}")))?;
                Ok((payload, headers))
            });
        match content {
            Ok((payload, headers)) => {
                m.payload = payload;
                m.headers = headers;
                kept.push(m);
            }
            Err(e @ StoreError::Corrupt(_)) => unreadable.push(Quarantined {
                id: m.id,
                biz_id: m.biz_id,
                message_key: m.message_key,
                reason: clip_error(&format!("{}{e}", super::claim::QUARANTINED)).to_string(),
            }),
            Err(e) => return Err(e),
        }
    }
    *messages = kept;
    Ok(unreadable)
}

/// One chunk of the move of long contents out of rows written before
/// migration 0018, on a transaction: the walk's place read (`lock`, `FOR
/// UPDATE` on MySQL, keeps two instances' chunks apart; SQLite's `BEGIN
/// IMMEDIATE` holds the whole database), the next `limit` rows after it
/// walked in id order, those of them whose content is longer than
/// [`INLINE_CONTENT_MAX`] (a row's recorded `payload_bytes` spares reading
/// its payload for that) locked, copied to `message_payloads` and emptied,
/// and the place moved on. A walk that finds no row past its place is
/// finished for good: rows written since keep their content where their
/// writer put it.
pub(in crate::store) async fn move_chunk<D>(
    conn: &mut D::Connection,
    lock: &str,
    limit: u32,
) -> StoreResult<PayloadMove>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
{
    let place = sqlx::query(stmt::<D>(format!(
        "SELECT moved_through, finished_at FROM payload_move WHERE id = 1{lock}"
    )))
    .fetch_optional(&mut *conn)
    .await?;
    let Some(place) = place else {
        return Ok(PayloadMove::FINISHED);
    };
    if place.opt_time("finished_at")?.is_some() {
        return Ok(PayloadMove::FINISHED);
    }
    let after: u64 = place.unsigned("moved_through")?;
    let walked = sqlx::query(stmt::<D>(
        "SELECT id, payload_apart FROM messages WHERE id > ? ORDER BY id LIMIT ?",
    ))
    .bind(D::int(after))
    .bind(i64::from(limit))
    .fetch_all(&mut *conn)
    .await?;
    let Some(last) = walked.last() else {
        sqlx::query(stmt::<D>(format!(
            "UPDATE payload_move SET finished_at = {} WHERE id = 1",
            D::NOW
        )))
        .execute(&mut *conn)
        .await?;
        return Ok(PayloadMove::FINISHED);
    };
    let last: u64 = last.unsigned("id")?;
    let mut candidates = Vec::new();
    for row in &walked {
        if !row.flag("payload_apart")? {
            candidates.push(row.unsigned::<u64>("id")?);
        }
    }
    let moved = move_long_contents::<D>(&mut *conn, lock, &candidates).await?;
    sqlx::query(stmt::<D>(
        "UPDATE payload_move SET moved_through = ? WHERE id = 1",
    ))
    .bind(D::int(last))
    .execute(&mut *conn)
    .await?;
    Ok(PayloadMove {
        walked: walked.len() as u64,
        moved,
        finished: false,
    })
}

/// Of the rows `candidates` (content in the row), those whose content is
/// longer than [`INLINE_CONTENT_MAX`]: locked, their content copied to
/// `message_payloads`, their row's emptied and marked apart (and the
/// payload's length recorded where it was not). Returns how many.
async fn move_long_contents<D>(
    conn: &mut D::Connection,
    lock: &str,
    candidates: &[u64],
) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e mut D::Connection: Executor<'e, Database = D>,
    i64: Bind<D>,
{
    if candidates.is_empty() {
        return Ok(0);
    }
    let in_list = |q: &mut QueryBuilder<D>, ids: &[u64]| {
        let mut sep = q.separated(", ");
        for id in ids {
            sep.push_bind(D::int(*id));
        }
    };
    let mut q = QueryBuilder::<D>::new("SELECT id FROM messages WHERE id IN (");
    in_list(&mut q, candidates);
    q.push(
        ") AND payload_apart = FALSE AND COALESCE(payload_bytes, LENGTH(payload)) + LENGTH(headers) > ",
    )
    .push_bind(INLINE_CONTENT_MAX as i64)
    .push(lock);
    let long: Vec<u64> = q
        .build()
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|row| row.unsigned("id"))
        .collect::<StoreResult<_>>()?;
    if long.is_empty() {
        return Ok(0);
    }
    let mut q = QueryBuilder::<D>::new(
        "INSERT INTO message_payloads (message_id, payload, headers) \
         SELECT id, payload, headers FROM messages WHERE id IN (",
    );
    in_list(&mut q, &long);
    q.push(")");
    q.build().execute(&mut *conn).await?;
    // (LENGTH counts the headers' characters on SQLite, not their bytes:
    // near enough for where a content is kept.)
    // MySQL applies a SET's assignments left to right, each seeing the ones
    // before: the length is taken before the payload is emptied.
    let mut q = QueryBuilder::<D>::new(format!(
        "UPDATE messages SET payload_bytes = COALESCE(payload_bytes, LENGTH(payload)), \
         payload = {}, headers = '{{}}', payload_apart = TRUE WHERE id IN (",
        D::NO_BYTES
    ));
    in_list(&mut q, &long);
    q.push(")");
    q.build().execute(&mut *conn).await?;
    Ok(long.len() as u64)
}
