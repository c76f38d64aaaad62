//! What a row holds: the column lists, decoding a row the way both
//! backends read it ([`SqlRow`]), and binding what a prepare or a
//! registration stores.

use chrono::{DateTime, Utc};
use trustmsg_verify_api::{MessageStatus, SendStatus};

use super::{Bind, Content, Dialect, Query};
use crate::store::{
    Delivery, Message, NewMessage, Producer, ProducerRecord, StoreError, StoreResult,
};

/// The columns of a message row other than its content (payload and
/// headers): what state changes write, and what a prepare writes once
/// that stays small. A macro so the column lists below are literals.
macro_rules! state_columns {
    () => {
        "id, biz_id, message_key, topic, record_key, content_digest, status, send_status, \
        tombstone, version, verify_attempts, send_attempts, last_error, next_verify_at, \
        next_send_at, kafka_partition, kafka_offset, created_at, updated_at, decided_at, sent_at, \
        order_key, order_seq, deliver_at, traceparent, tracestate"
    };
}

/// [`state_columns`] as a constant, for the column lists of claims.
pub(in crate::store) const STATE_COLUMNS: &str = state_columns!();

/// The content (payload and headers) of a message row wherever it is
/// stored: in the row, or in `message_payloads` when `payload_apart` (see
/// [`super::content`]); the subqueries run only for such rows. Of a
/// statement `FROM messages`, never under another name.
macro_rules! content_columns {
    () => {
        "CASE WHEN payload_apart THEN (SELECT p.payload FROM message_payloads p \
        WHERE p.message_id = messages.id) ELSE payload END AS payload, \
        CASE WHEN payload_apart THEN (SELECT p.headers FROM message_payloads p \
        WHERE p.message_id = messages.id) ELSE headers END AS headers"
    };
}

/// The columns [`message_from_row`] reads, the content wherever it is
/// stored ([`content_columns`]).
pub(in crate::store) const MESSAGE_COLUMNS: &str =
    concat!(state_columns!(), ", ", content_columns!());

/// The columns [`message_from_row`] reads with the content as the row
/// stores it (empty for a row whose content is apart), and `payload_apart`:
/// for a statement that must not read `message_payloads` (a locking claim,
/// an INSERT's RETURNING), whose caller fills the content in.
pub(in crate::store) const STORED_COLUMNS: &str =
    concat!(state_columns!(), ", payload, headers, payload_apart");

/// The columns a prepare writes; [`bind_prepare`] binds the first ten,
/// `deliver_at` (migration 0010) comes from [`deliver_binds`],
/// `payload_bytes` (migration 0016) from [`payload_bytes`] and
/// `payload_apart` (migration 0018) from [`super::Content::apart`].
pub(in crate::store) const PREPARE_COLUMNS: &str =
    "biz_id, message_key, topic, record_key, payload, headers, content_digest, order_key, \
    traceparent, tracestate, status, next_verify_at, created_at, updated_at, deliver_at, \
    payload_bytes, payload_apart";

/// The columns [`producer_from_row`] reads, in table order; [`bind_producer`]
/// binds all but the two times (`topics`, added by migration 0007, last).
pub(in crate::store) const PRODUCER_COLUMNS: &str = "biz_id, verify_url, verify_timeout_ms, \
    first_verify_after_ms, max_verify_attempts, token_hash, signing_secret, created_at, updated_at, \
    topics, ordered";

/// How one backend reads a column: each backend implements the five nullable
/// reads, the rest is written once on top of them. A NULL where the schema
/// forbids one, or a value out of its type's range, is [`StoreError::Corrupt`].
pub(in crate::store) trait SqlRow {
    /// A nullable text column, checked as UTF-8.
    fn opt_text(&self, col: &str) -> StoreResult<Option<String>>;
    /// A nullable binary column.
    fn opt_bytes(&self, col: &str) -> StoreResult<Option<Vec<u8>>>;
    /// A nullable unsigned integer column (ids, versions, counters); by
    /// default a signed one (SQLite's integers, PostgreSQL's BIGINT) that
    /// must not be negative.
    fn opt_u64(&self, col: &str) -> StoreResult<Option<u64>> {
        self.opt_i64(col)?
            .map(|v| {
                u64::try_from(v)
                    .map_err(|_| StoreError::Corrupt(format!("{col} = {v} is out of range")))
            })
            .transpose()
    }
    /// A nullable signed integer column.
    fn opt_i64(&self, col: &str) -> StoreResult<Option<i64>>;
    /// A nullable time column (UTC, millisecond precision).
    fn opt_time(&self, col: &str) -> StoreResult<Option<DateTime<Utc>>>;

    /// A boolean column that is never NULL (both dialects store 0 or 1).
    fn flag(&self, col: &str) -> StoreResult<bool> {
        Ok(not_null(col, self.opt_i64(col)?)? != 0)
    }

    /// A text column that is never NULL.
    fn text(&self, col: &str) -> StoreResult<String> {
        not_null(col, self.opt_text(col)?)
    }

    /// A binary column that is never NULL.
    fn bytes(&self, col: &str) -> StoreResult<Vec<u8>> {
        not_null(col, self.opt_bytes(col)?)
    }

    /// An unsigned integer column that is never NULL, as `T`.
    fn unsigned<T: TryFrom<u64>>(&self, col: &str) -> StoreResult<T> {
        let v = not_null(col, self.opt_u64(col)?)?;
        T::try_from(v).map_err(|_| StoreError::Corrupt(format!("{col} = {v} is out of range")))
    }

    /// A nullable 32-bit signed integer column.
    fn opt_i32(&self, col: &str) -> StoreResult<Option<i32>> {
        self.opt_i64(col)?
            .map(|v| {
                i32::try_from(v)
                    .map_err(|_| StoreError::Corrupt(format!("{col} = {v} is out of range")))
            })
            .transpose()
    }

    /// A time column that is never NULL.
    fn time(&self, col: &str) -> StoreResult<DateTime<Utc>> {
        not_null(col, self.opt_time(col)?)
    }
}

/// A failed column read. A value its type cannot hold (a date out of range, a
/// number too big) is this row's fault, [`StoreError::Corrupt`], like any
/// other unreadable value; anything else (no such column) is the database's
/// or the code's, and fails the whole statement.
pub(in crate::store) fn column_error(col: &str, e: sqlx::Error) -> StoreError {
    match e {
        sqlx::Error::ColumnDecode { source, .. } => StoreError::Corrupt(format!("{col}: {source}")),
        e => StoreError::Db(e),
    }
}

pub(super) fn not_null<T>(col: &str, v: Option<T>) -> StoreResult<T> {
    v.ok_or_else(|| StoreError::Corrupt(format!("{col} is NULL")))
}

/// Decodes a row selected with [`MESSAGE_COLUMNS`].
pub(in crate::store) fn message_from_row(row: &impl SqlRow) -> StoreResult<Message> {
    let status = row.text("status")?;
    let headers = row.text("headers")?;
    Ok(Message {
        id: row.unsigned("id")?,
        biz_id: row.text("biz_id")?,
        message_key: row.text("message_key")?,
        topic: row.opt_text("topic")?,
        key: row.opt_text("record_key")?,
        payload: row.bytes("payload")?,
        headers: serde_json::from_str(&headers)
            .map_err(|e| StoreError::Corrupt(format!("headers: {e}")))?,
        content_digest: row.opt_bytes("content_digest")?,
        status: MessageStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("status {status:?}")))?,
        send_status: row
            .opt_text("send_status")?
            .map(|s| {
                SendStatus::parse(&s)
                    .ok_or_else(|| StoreError::Corrupt(format!("send_status {s:?}")))
            })
            .transpose()?,
        tombstone: row.flag("tombstone")?,
        version: row.unsigned("version")?,
        verify_attempts: row.unsigned("verify_attempts")?,
        send_attempts: row.unsigned("send_attempts")?,
        last_error: row.opt_text("last_error")?,
        next_verify_at: row.opt_time("next_verify_at")?,
        next_send_at: row.opt_time("next_send_at")?,
        kafka_partition: row.opt_i32("kafka_partition")?,
        kafka_offset: row.opt_i64("kafka_offset")?,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
        decided_at: row.opt_time("decided_at")?,
        sent_at: row.opt_time("sent_at")?,
        order_key: row.opt_bytes("order_key")?,
        order_seq: row.opt_u64("order_seq")?,
        deliver_at: row.opt_time("deliver_at")?,
        traceparent: row.opt_text("traceparent")?,
        tracestate: row.opt_text("tracestate")?,
    })
}

/// Decodes a row selected with [`PRODUCER_COLUMNS`].
pub(in crate::store) fn producer_from_row(row: &impl SqlRow) -> StoreResult<Producer> {
    Ok(Producer {
        biz_id: row.text("biz_id")?,
        verify_url: row.text("verify_url")?,
        verify_timeout_ms: row.unsigned("verify_timeout_ms")?,
        first_verify_after_ms: row.unsigned("first_verify_after_ms")?,
        max_verify_attempts: row.unsigned("max_verify_attempts")?,
        token_hash: row.bytes("token_hash")?,
        signing_secret: row.text("signing_secret")?,
        topics: row
            .opt_text("topics")?
            .map(|json| {
                serde_json::from_str(&json).map_err(|e| {
                    StoreError::Corrupt(format!(
                        "producers.topics is not a JSON list of strings: {e}"
                    ))
                })
            })
            .transpose()?,
        ordered: row.flag("ordered")?,
        created_at: row.time("created_at")?,
        updated_at: row.time("updated_at")?,
    })
}

/// A text column of a row that is unreadable anyway: whatever can be shown.
pub(super) fn lossy_text(row: &impl SqlRow, col: &str) -> String {
    match row.opt_bytes(col) {
        Ok(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
        _ => row.opt_text(col).ok().flatten().unwrap_or_default(),
    }
}

/// Binds what a prepare stores, in [`PREPARE_COLUMNS`] order up to
/// `tracestate`, with the row's share of `content` (nothing of a content
/// that goes apart); the status and the times are the backend's SQL.
pub(in crate::store) fn bind_prepare<'q, D>(
    q: Query<'q, D>,
    m: &NewMessage,
    content: &Content<'_>,
) -> Query<'q, D>
where
    D: Dialect,
    for<'a> &'a str: Bind<D>,
    for<'a> &'a [u8]: Bind<D>,
    String: Bind<D>,
    Option<String>: Bind<D>,
    Vec<u8>: Bind<D>,
    Option<Vec<u8>>: Bind<D>,
{
    q.bind(m.biz_id.as_str())
        .bind(m.message_key.as_str())
        .bind(m.topic.as_str())
        .bind(m.key.clone())
        .bind(content.row_payload())
        .bind(content.row_headers())
        .bind(m.digest())
        .bind(m.order_key.clone())
        .bind(m.traceparent.clone())
        .bind(m.tracestate.clone())
}

/// What a prepare binds for `payload_bytes`: the payload's length, which a
/// send claim reads instead of the payload to know what fits its budget.
pub(in crate::store) fn payload_bytes(m: &NewMessage) -> i64 {
    i64::try_from(m.payload.len()).unwrap_or(i64::MAX)
}

/// What a prepare binds for `deliver_at`, as the backend's
/// `COALESCE(?, <now> + <span ?>)`: the instant given, or the delay to add
/// to the database clock (the clock of every due-time, so instances with
/// skewed clocks agree), or neither (NULL: not delayed).
pub(in crate::store) fn deliver_binds<D: Dialect>(
    m: &NewMessage,
) -> (Option<D::Time>, Option<i64>) {
    match m.deliver {
        None => (None, None),
        Some(Delivery::At(t)) => (Some(D::time(t)), None),
        Some(Delivery::After(d)) => (None, Some(D::span(d))),
    }
}

/// Binds a registration in [`PRODUCER_COLUMNS`] order up to `signing_secret`,
/// then `topics` and `ordered` (the statement writes the two times between them).
pub(in crate::store) fn bind_producer<'q, D>(q: Query<'q, D>, p: &ProducerRecord) -> Query<'q, D>
where
    D: Dialect,
    for<'a> &'a str: Bind<D>,
    for<'a> &'a [u8]: Bind<D>,
    Option<String>: Bind<D>,
    bool: Bind<D>,
    i64: Bind<D>,
{
    q.bind(p.biz_id.as_str())
        .bind(p.verify_url.as_str())
        .bind(i64::from(p.verify_timeout_ms))
        .bind(i64::from(p.first_verify_after_ms))
        .bind(i64::from(p.max_verify_attempts))
        .bind(p.token_hash.as_slice())
        .bind(p.signing_secret.as_str())
        .bind(
            p.topics
                .as_ref()
                .map(|t| serde_json::to_string(t).expect("a string list serialises")),
        )
        .bind(p.ordered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_its_type_cannot_hold_is_the_rows_fault_and_a_missing_column_is_not() {
        let bad_value = sqlx::Error::ColumnDecode {
            index: "\"created_at\"".into(),
            source: "year 0 is out of range".into(),
        };
        assert!(matches!(
            column_error("created_at", bad_value),
            StoreError::Corrupt(why) if why == "created_at: year 0 is out of range"
        ));
        let missing = sqlx::Error::ColumnNotFound("created_at".into());
        assert!(matches!(
            column_error("created_at", missing),
            StoreError::Db(_)
        ));
    }
}
