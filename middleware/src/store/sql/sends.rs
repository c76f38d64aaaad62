//! A message's send, the statements both backends share: a claim given
//! back, and an operator's "send now".

use sqlx::{Executor, QueryBuilder};

use super::Dialect;
use crate::store::StoreResult;

/// What [`crate::store::Store::send_now`] sets (`now` is the dialect's
/// clock) on a committed, PENDING row (`id`, `version`) whose `deliver_at`
/// is still ahead: its delivery time now (so its wait counts from now),
/// version bumped, and due now, unless it is an ordered message waiting
/// behind its key's head (`next_send_at` NULL): that one keeps waiting for
/// the head, and then goes at once.
pub(in crate::store) fn send_now_update(now: &str) -> String {
    format!(
        "UPDATE messages SET \
         next_send_at = CASE WHEN next_send_at IS NULL THEN NULL ELSE {now} END, \
         deliver_at = {now}, \
         version = version + 1, updated_at = {now} \
         WHERE id = ? AND version = ? AND status = 'COMMITTED' AND send_status = 'PENDING' \
         AND deliver_at > {now}"
    )
}

/// [`crate::store::Store::release_sends`]: one guarded UPDATE for the lot.
/// The ids alone come first so MariaDB finds the rows by the primary key.
pub(in crate::store) async fn release_sends<D>(
    pool: &sqlx::Pool<D>,
    claims: &[(u64, u64)],
) -> StoreResult<u64>
where
    D: Dialect,
    for<'e> &'e sqlx::Pool<D>: Executor<'e, Database = D>,
{
    if claims.is_empty() {
        return Ok(0);
    }
    let mut q = QueryBuilder::<D>::new(format!(
        "UPDATE messages SET next_send_at = {} \
         WHERE status = 'COMMITTED' AND send_status = 'PENDING' AND id IN (",
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
