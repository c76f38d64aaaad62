//! An operator's bulk redeliver and re-verify (`requeue_chunk`): set-based,
//! chunk by chunk in id order, each chunk written whole with one audit row
//! per changed message; only rows in the repaired state (and the filter)
//! change, each once, with its version bumped, and a repeat changes nothing.

use trustmsg::store::{Actor, DynStore, Message, MessageFilter, Requeue, SentMark};

use crate::store::harness::*;

/// Rows copied from one arranged row: more than a few chunks of [`CHUNK`].
const COPIES: u64 = 2_500;
const CHUNK: u32 = 1_000;

fn alice() -> Actor {
    Actor::Operator("alice".into())
}

/// `COPIES` more rows like `m` (same state, times and version), keys
/// `1`…`COPIES` of `biz_id`, written straight with SQL for speed.
async fn copy_rows(b: &Backend, m: &Message, biz_id: &str) {
    let sql = format!(
        "INSERT INTO messages (biz_id, message_key, topic, record_key, payload, headers, \
         content_digest, status, send_status, version, verify_attempts, send_attempts, last_error, \
         created_at, updated_at, decided_at, send_overdue_alerted, verify_overdue_alerted) \
         WITH d(n) AS (SELECT 0 UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 \
         UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 \
         UNION ALL SELECT 8 UNION ALL SELECT 9), \
         s(n) AS (SELECT a.n + 10 * b.n + 100 * c.n + 1000 * e.n + 1 FROM d a, d b, d c, d e) \
         SELECT '{biz_id}', CAST(s.n AS CHAR), topic, record_key, payload, headers, \
         content_digest, status, send_status, version, verify_attempts, send_attempts, last_error, \
         created_at, updated_at, decided_at, TRUE, TRUE FROM s, messages WHERE s.n <= {COPIES} AND id = ?"
    );
    assert_eq!(b.raw_execute(&sql, m.id).await, COPIES);
}

/// Runs a bulk action chunk by chunk as the API does; returns the rows
/// changed and how many chunks changed some.
async fn run(s: &DynStore, requeue: Requeue, filter: &MessageFilter) -> (u64, u32) {
    let (mut changed, mut chunks, mut after) = (0, 0, 0);
    loop {
        let chunk = s
            .requeue_chunk(requeue, filter, after, CHUNK, &alice(), "outage over")
            .await
            .unwrap();
        changed += chunk.changed;
        let Some(last) = chunk.last_id else {
            return (changed, chunks);
        };
        assert!(last > after, "chunks go up by id");
        chunks += 1;
        after = last;
    }
}

/// Every arranged state once, the `state` row copied many times for `shop`
/// and once more for `other`: a bulk action filtered to `shop` changes
/// exactly the `shop` rows in `state`, in chunks, each audited once.
async fn changes_every_matching_row_once(b: &Backend, requeue: Requeue, state: State) {
    let s: &DynStore = b;
    let mut rows = Vec::new();
    for st in STATES {
        rows.push((st, arrange(s.as_ref(), st, Due::Later).await));
    }
    let template = rows
        .iter()
        .find(|(st, _)| *st == state)
        .and_then(|(_, m)| m.clone())
        .unwrap();
    copy_rows(b, &template, BIZ).await;
    copy_rows(b, &template, "other").await;
    let mut audits = Vec::new();
    for (_, m) in &rows {
        audits.push(audit_len(s.as_ref(), m).await);
    }
    let shop = MessageFilter {
        biz_id: Some(BIZ.into()),
        ..Default::default()
    };
    let all = COPIES + 1;
    assert_eq!(s.count_requeueable(requeue, &shop).await.unwrap(), all);

    let (changed, chunks) = run(s, requeue, &shop).await;
    assert_eq!(changed, all);
    assert_eq!(u64::from(chunks), all.div_ceil(u64::from(CHUNK)));
    let (action, is_back, flag) = match requeue {
        Requeue::Redeliver => (
            "redeliver",
            "status = 'COMMITTED' AND send_status = 'PENDING' AND send_attempts = 0 \
             AND next_send_at IS NOT NULL",
            "send_overdue_alerted",
        ),
        Requeue::Reverify => (
            "reverify",
            "status = 'PREPARED' AND send_status IS NULL AND verify_attempts = 0 \
             AND next_verify_at IS NOT NULL",
            "verify_overdue_alerted",
        ),
    };
    let back = format!(
        "SELECT COUNT(*) FROM messages WHERE biz_id = 'shop' AND {is_back} AND version = ? \
         AND {flag} = FALSE AND requeued_at IS NOT NULL"
    );
    assert_eq!(
        b.raw_count(&back, template.version + 1).await,
        all as i64,
        "every row back in its queue, version bumped, its overdue alert due again"
    );
    let audited = format!(
        "SELECT COUNT(DISTINCT message_id) + COUNT(*) FROM audit_log WHERE action = '{action}' \
         AND actor = 'operator:alice' AND reason = 'outage over' AND message_id >= ?"
    );
    assert_eq!(
        b.raw_count(&audited, 0).await,
        2 * all as i64,
        "one audit row per changed message"
    );
    let others = "SELECT COUNT(*) FROM messages WHERE biz_id = 'other' AND version = ?";
    assert_eq!(
        b.raw_count(others, template.version).await,
        COPIES as i64,
        "the filter's other producer untouched"
    );
    for (i, (st, before)) in rows.iter().enumerate() {
        if *st != state {
            assert_untouched(s.as_ref(), *st, before, audits[i]).await;
        }
    }
    assert_eq!(
        audit_lines(s.as_ref(), template.id)
            .await
            .last()
            .map(String::as_str),
        Some(match requeue {
            Requeue::Redeliver =>
                "operator:alice redeliver COMMITTED=>COMMITTED send SEND_FAILED=>PENDING",
            Requeue::Reverify => "operator:alice reverify VERIFY_FAILED=>PREPARED send -=>-",
        })
    );

    assert_eq!(
        run(s, requeue, &shop).await,
        (0, 0),
        "a repeat changes nothing"
    );
    assert_eq!(s.count_requeueable(requeue, &shop).await.unwrap(), 0);
    let everyone = MessageFilter::default();
    assert_eq!(
        s.count_requeueable(requeue, &everyone).await.unwrap(),
        COPIES
    );
}

pub(crate) async fn a_bulk_redeliver_changes_every_send_failed_row_of_the_filter_once_in_chunks(
    b: &Backend,
) {
    changes_every_matching_row_once(b, Requeue::Redeliver, State::SendFailed).await;
}

pub(crate) async fn a_bulk_reverify_changes_every_verify_failed_row_of_the_filter_once_in_chunks(
    b: &Backend,
) {
    changes_every_matching_row_once(b, Requeue::Reverify, State::VerifyFailed).await;
}

pub(crate) async fn a_claim_from_before_a_bulk_redeliver_matches_nothing(s: &DynStore) {
    let s = s.as_ref();
    let failed = arrange(s, State::SendFailed, Due::Later).await.unwrap();
    let everyone = MessageFilter::default();
    let chunk = s
        .requeue_chunk(Requeue::Redeliver, &everyone, 0, CHUNK, &alice(), "again")
        .await
        .unwrap();
    assert_eq!((chunk.changed, chunk.last_id), (1, Some(failed.id)));
    let stale = SentMark {
        id: failed.id,
        version: failed.version,
        partition: 0,
        offset: 7,
        order: None,
    };
    assert_eq!(s.mark_sent(&[stale]).await.unwrap(), 0);
    let claimed = s.claim_due_sends(10, ROOM, LATER).await.unwrap().messages;
    assert_eq!(
        claimed.iter().map(|m| m.id).collect::<Vec<_>>(),
        [failed.id],
        "due at once"
    );
}
