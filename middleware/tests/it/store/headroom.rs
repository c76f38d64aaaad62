//! MariaDB/MySQL only (migration 0015): a message row is written with room
//! for what its state changes fill in, and each change gives some back, so
//! a commit and a SENT mark never make the InnoDB record longer (which
//! would move it on its page and log the page: docs/performance.md).

use std::time::Duration;

use trustmsg::store::{self, DecideRequest, SentMark, Target};

use crate::store::harness::*;

/// `LENGTH(headroom)` of the row `id` (None: NULL).
async fn headroom(b: &Backend, id: u64) -> Option<i64> {
    let sql = "SELECT LENGTH(headroom) FROM messages WHERE id = ?";
    let n = b
        .raw_count(&format!("SELECT COALESCE(({sql}), -1)"), id)
        .await;
    (n >= 0).then_some(n)
}

#[tokio::test]
async fn a_row_is_prepared_with_room_a_decision_and_its_sent_mark_give_back() {
    let b = Backend::mysql().await;
    let s = b.store.as_ref();
    // One alone, two in a batch: both ways of preparing leave 40 bytes.
    let alone = prepare(s, "room-alone", Due::Later).await;
    let batch = s
        .insert_prepared_batch(&[
            new_message("room-a", Duration::from_secs(600)),
            new_message("room-b", Duration::from_secs(600)),
        ])
        .await
        .unwrap();
    let rows: Vec<_> = batch
        .into_iter()
        .map(|i| match i {
            store::Inserted::Created(m) => m,
            other => panic!("{other:?}"),
        })
        .collect();
    for m in std::iter::once(&alone).chain(&rows) {
        assert_eq!(headroom(&b, m.id).await, Some(40), "{}", m.message_key);
    }
    // A commit with the rows at hand (one UPDATE) and a rollback read first
    // (the transaction) each leave 16.
    let reqs: Vec<DecideRequest<'_>> = ["room-a", "room-b"]
        .iter()
        .map(|key| DecideRequest {
            target: Target::Key {
                biz_id: "shop",
                message_key: key,
            },
            commit: true,
            actor: producer(),
            reason: store::producer_reason(true),
            send_lease: Duration::ZERO,
            verify_attempt: false,
        })
        .collect();
    let known: Vec<_> = rows.iter().map(Some).collect();
    let committed = store::decide_batch_known(s, &reqs, &known).await.unwrap();
    assert_eq!(committed.len(), 2);
    decided(decide_key(s, "room-alone", false, producer(), Duration::ZERO).await);
    for m in std::iter::once(&alone).chain(&rows) {
        assert_eq!(headroom(&b, m.id).await, Some(16), "{}", m.message_key);
    }
    // The SENT mark gives back the rest.
    let claimed = s
        .claim_due_sends(10, ROOM, Duration::from_secs(30))
        .await
        .unwrap()
        .messages;
    assert_eq!(claimed.len(), 2);
    let marks: Vec<SentMark> = claimed
        .iter()
        .map(|m| SentMark {
            id: m.id,
            version: m.version,
            partition: 0,
            offset: 1,
            order: None,
        })
        .collect();
    assert_eq!(s.mark_sent(&marks).await.unwrap(), 2);
    for m in &rows {
        assert_eq!(headroom(&b, m.id).await, None, "{}", m.message_key);
    }
    b.finish().await;
}
