//! The operators' list of messages: the filter's conditions (shared with
//! the bulk actions) and a keyset page, newest first, reading no content.

use sqlx::{Executor, QueryBuilder};
use trustmsg_verify_api::MessageView;

use super::row::{message_from_row, SqlRow, STATE_COLUMNS};
use super::{Bind, Dialect};
use crate::store::{MessageFilter, StoreResult};

/// [`crate::store::OperatorStore::list_messages`]: the filter's conditions, a keyset bound
/// and `ORDER BY id DESC`, reading no content: an empty payload, and its
/// length as the prepare recorded it (read from the payload only for a row
/// from before that record, whose payload is in the row).
pub(in crate::store) async fn list_messages<D>(
    pool: &sqlx::Pool<D>,
    f: &MessageFilter,
    limit: u32,
    before: Option<u64>,
) -> StoreResult<Vec<MessageView>>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
    String: Bind<D>,
    &'static str: Bind<D>,
    i64: Bind<D>,
{
    let mut q = QueryBuilder::<D>::new(format!(
        "SELECT {STATE_COLUMNS}, {none} AS payload, '{{}}' AS headers, \
         CAST(COALESCE(payload_bytes, LENGTH(payload)) AS {signed}) AS payload_size \
         FROM messages WHERE 1 = 1",
        none = D::NO_BYTES,
        signed = D::SIGNED,
    ));
    push_filter(&mut q, f);
    if let Some(id) = before {
        q.push(" AND id < ").push_bind(D::int(id));
    }
    q.push(" ORDER BY id DESC LIMIT ")
        .push_bind(i64::from(limit));
    q.build()
        .fetch_all(pool)
        .await?
        .iter()
        .map(|row| {
            let mut view = message_from_row(row)?.view();
            let size = row.opt_i64("payload_size")?.unwrap_or(0);
            view.payload_size = u64::try_from(size).unwrap_or(0);
            Ok(view)
        })
        .collect()
}

/// Appends ` AND …` for each condition of `f`, for the operators' list and
/// their bulk actions alike.
pub(in crate::store) fn push_filter<D>(q: &mut QueryBuilder<D>, f: &MessageFilter)
where
    D: Dialect,
    String: Bind<D>,
    &'static str: Bind<D>,
{
    if let Some(s) = f.status {
        q.push(" AND status = ").push_bind(s.as_str());
    }
    if let Some(s) = f.send_status {
        q.push(" AND send_status = ").push_bind(s.as_str());
    }
    if let Some(b) = &f.biz_id {
        q.push(" AND biz_id = ").push_bind(b.clone());
    }
    if let Some(t) = &f.topic {
        q.push(" AND topic = ").push_bind(t.clone());
    }
    if let Some(t) = f.created_after {
        q.push(" AND created_at >= ").push_bind(D::time(t));
    }
    if let Some(t) = f.created_before {
        q.push(" AND created_at < ").push_bind(D::time(t));
    }
}
