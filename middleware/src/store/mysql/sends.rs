//! The SENT marks on MySQL: one statement for a batch; ordered messages'
//! marks move their keys on with a few statements for the lot (the rest of
//! [`crate::store::SendStore`] is written once, in
//! [`crate::store::sql::backend`]).

use sqlx::{MySql, QueryBuilder};

use crate::store::sql;
use crate::store::{SentMark, StoreResult};

use super::MySqlStore;

impl MySqlStore {
    /// The SENT marks of `marks` (not empty), the fastest way this
    /// database has.
    pub(super) async fn mark_sent_rows(&self, marks: &[SentMark]) -> StoreResult<u64> {
        // Ordered messages' marks move their keys on, in a transaction of
        // their own; the others take the one statement below.
        let (ordered, plain): (Vec<SentMark>, Vec<SentMark>) =
            marks.iter().cloned().partition(|m| m.order.is_some());
        let mut matched = 0;
        if !ordered.is_empty() {
            let mut tx = self.pool.begin().await?;
            matched += if ordered.len() < ORDERED_MARKS_TOGETHER {
                sql::mark_sent_ordered::<MySql>(&mut tx, &ordered).await?
            } else {
                mark_sent_ordered_together(&mut tx, &ordered).await?
            };
            tx.commit().await?;
        }
        if !plain.is_empty() {
            matched += mark_sent_statement(&plain)
                .build()
                .execute(&self.pool)
                .await?
                .rows_affected();
        }
        Ok(matched)
    }
}

/// From this many ordered SENT marks on, a batch moves its keys on with a
/// few statements for all of them ([`mark_sent_ordered_together`]) instead
/// of four per mark.
const ORDERED_MARKS_TOGETHER: usize = 3;

/// The guarded SENT UPDATE of `marks`, one statement for the lot.
fn mark_sent_statement(marks: &[SentMark]) -> QueryBuilder<MySql> {
    // One statement for the whole batch: the marks become a derived table
    // joined on (id, version), the claim's guard, so each row takes the
    // partition and offset of its own claim's mark (a batch may also hold
    // a stale owner's mark for the same id, which joins nothing). A join
    // costs one primary-key lookup per mark, where a CASE per column
    // compared every row with every mark.
    let mut q = QueryBuilder::<MySql>::new("UPDATE messages m JOIN (");
    for (i, mark) in marks.iter().enumerate() {
        q.push(if i == 0 {
            "SELECT "
        } else {
            " UNION ALL SELECT "
        })
        .push_bind(mark.id)
        .push(if i == 0 { " AS id, " } else { ", " })
        .push_bind(mark.version)
        .push(if i == 0 { " AS version, " } else { ", " })
        .push_bind(mark.partition)
        .push(if i == 0 {
            " AS kafka_partition, "
        } else {
            ", "
        })
        .push_bind(mark.offset)
        .push(if i == 0 { " AS kafka_offset" } else { "" });
    }
    q.push(
        ") s ON m.id = s.id AND m.version = s.version \
         SET m.send_status = 'SENT', m.next_send_at = NULL, m.sent_at = UTC_TIMESTAMP(3), \
         m.updated_at = UTC_TIMESTAMP(3), m.send_attempts = m.send_attempts + 1, \
         m.kafka_partition = s.kafka_partition, m.kafka_offset = s.kafka_offset, \
         m.version = m.version + 1, m.headroom = NULL \
         WHERE m.status = 'COMMITTED' AND m.send_status = 'PENDING'",
    );
    q
}

/// The SENT marks of ordered messages, on `tx`, with five statements
/// whatever their number (see `sql/ordering.rs` for what each mark does):
/// the marks' keys locked in key order; the marks; every key whose head
/// is among the marked and now SENT moved on; those heads' `ordered_seqs`
/// rows deleted; each moved key's next message, if it waits, made due.
async fn mark_sent_ordered_together(
    tx: &mut sqlx::MySqlConnection,
    marks: &[SentMark],
) -> StoreResult<u64> {
    let keys: std::collections::BTreeSet<[u8; 32]> = marks
        .iter()
        .filter_map(|m| m.order.map(|p| p.key))
        .collect();
    let push_keys = |q: &mut QueryBuilder<MySql>| {
        let mut sep = q.separated(", ");
        for key in &keys {
            sep.push_bind(key.to_vec());
        }
    };
    let mut q =
        QueryBuilder::<MySql>::new("SELECT order_key FROM ordered_keys WHERE order_key IN (");
    push_keys(&mut q);
    q.push(") ORDER BY order_key FOR UPDATE");
    q.build().fetch_all(&mut *tx).await?;
    let matched = mark_sent_statement(marks)
        .build()
        .execute(&mut *tx)
        .await?
        .rows_affected();
    let mut q = QueryBuilder::<MySql>::new(
        "UPDATE ordered_keys k JOIN messages m ON m.order_key = k.order_key \
         AND m.order_seq = k.sent_through + 1 \
         SET k.sent_through = m.order_seq, k.updated_at = UTC_TIMESTAMP(3) \
         WHERE m.send_status = 'SENT' AND m.id IN (",
    );
    let mut sep = q.separated(", ");
    for mark in marks {
        sep.push_bind(mark.id);
    }
    q.push(") AND k.order_key IN (");
    push_keys(&mut q);
    q.push(")");
    q.build().execute(&mut *tx).await?;
    let mut q = QueryBuilder::<MySql>::new(
        "DELETE s FROM ordered_seqs s JOIN ordered_keys k \
         ON s.order_key = k.order_key AND s.seq = k.sent_through WHERE k.order_key IN (",
    );
    push_keys(&mut q);
    q.push(")");
    q.build().execute(&mut *tx).await?;
    let mut q = QueryBuilder::<MySql>::new(format!(
        "UPDATE messages m JOIN ordered_seqs s ON s.message_id = m.id \
         JOIN ordered_keys k ON s.order_key = k.order_key AND s.seq = k.sent_through + 1 \
         SET m.{due}, m.version = m.version + 1 \
         WHERE m.status = 'COMMITTED' AND m.send_status = 'PENDING' \
         AND m.next_send_at IS NULL AND k.order_key IN (",
        due = sql::promoted_due::<MySql>(),
    ));
    push_keys(&mut q);
    q.push(")");
    q.build().execute(&mut *tx).await?;
    Ok(matched)
}
