//! What operators read (`docs/architecture.md`, Operators): messages listed
//! with filters newest first in keyset pages, the summary per producer, the
//! registrations.

use std::collections::BTreeMap;
use std::time::Duration;

use trustmsg::store::{DynStore, Message, MessageFilter};
use trustmsg_verify_api::{MessageStatus, SendStatus};

use crate::store::harness::*;
use crate::store::producers::producer_record;

/// Every state once (the tombstone and "missing" have no content or row).
async fn arrange_all(s: &dyn trustmsg::store::Store) -> Vec<trustmsg::store::Message> {
    let mut rows = Vec::new();
    for state in STATES {
        if let Some(m) = arrange(s, state, Due::Later).await {
            rows.push(m);
        }
    }
    rows
}

fn ids(views: &[trustmsg_verify_api::MessageView]) -> Vec<u64> {
    views.iter().map(|v| v.id).collect()
}

pub(crate) async fn listed_messages_are_filtered_newest_first_and_paged_without_skips(
    s: &DynStore,
) {
    let s = s.as_ref();
    let rows = arrange_all(s).await;
    let mut all: Vec<u64> = rows.iter().map(|m| m.id).collect();
    all.sort_unstable_by(|a, b| b.cmp(a));

    // Pages of 3, each below the last id seen, cover every row once.
    let none = MessageFilter::default();
    let mut seen = Vec::new();
    let mut before = None;
    loop {
        let page = s.list_messages(&none, 3, before).await.unwrap();
        assert!(page.len() <= 3);
        if page.is_empty() {
            break;
        }
        before = page.last().map(|v| v.id);
        seen.extend(ids(&page));
    }
    assert_eq!(seen, all, "newest first, each row once");

    // A row inserted while paging has a higher id: later pages do not see it.
    let first = s.list_messages(&none, 2, None).await.unwrap();
    let late = arrange_key(s, "late", State::Prepared, Due::Later)
        .await
        .unwrap();
    let rest = s
        .list_messages(&none, 100, first.last().map(|v| v.id))
        .await
        .unwrap();
    assert!(!ids(&rest).contains(&late.id));
    assert_eq!(ids(&first).len() + rest.len(), all.len());

    let by = |f: MessageFilter| async move { ids(&s.list_messages(&f, 100, None).await.unwrap()) };
    let prepared = by(MessageFilter {
        status: Some(MessageStatus::Prepared),
        ..Default::default()
    })
    .await;
    assert_eq!(
        prepared.len(),
        2,
        "the arranged PREPARED row and the late one"
    );
    assert!(prepared.contains(&late.id));
    let sent = rows
        .iter()
        .find(|m| m.send_status == Some(SendStatus::Sent))
        .unwrap();
    assert_eq!(
        by(MessageFilter {
            status: Some(MessageStatus::Committed),
            send_status: Some(SendStatus::Sent),
            biz_id: Some(BIZ.into()),
            topic: Some("orders".into()),
            ..Default::default()
        })
        .await,
        [sent.id]
    );
    assert_eq!(
        by(MessageFilter {
            biz_id: Some("someone-else".into()),
            ..Default::default()
        })
        .await,
        Vec::<u64>::new()
    );
    assert_eq!(
        by(MessageFilter {
            created_after: Some(late.created_at),
            ..Default::default()
        })
        .await
        .first(),
        Some(&late.id)
    );
    assert!(!by(MessageFilter {
        created_before: Some(late.created_at),
        ..Default::default()
    })
    .await
    .contains(&late.id));

    // The views carry the payload's size, not the payload.
    let view = s.list_messages(&none, 1, Some(sent.id + 1)).await.unwrap();
    assert_eq!(view[0].id, sent.id);
    assert_eq!(view[0].payload_size, sent.payload.len() as u64);
    assert_eq!(view[0], {
        let mut v = s.find_message_by_id(sent.id).await.unwrap().unwrap().view();
        v.payload_size = sent.payload.len() as u64;
        v
    });
}

pub(crate) async fn the_summary_counts_each_producers_states_and_names_its_oldest_waits(
    s: &DynStore,
) {
    let s = s.as_ref();
    let rows = arrange_all(s).await;
    let later = arrange_key(s, "prepared-later", State::Prepared, Due::Later)
        .await
        .unwrap();
    let summary = s.summary(Duration::from_secs(3600)).await.unwrap();
    assert_eq!(summary.len(), 1, "{summary:?}");
    let sum = &summary[0];
    assert_eq!(sum.biz_id, BIZ);
    let all: Vec<&Message> = rows.iter().chain([&later]).collect();
    let count = |f: &dyn Fn(&Message) -> bool| all.iter().filter(|m| f(m)).count() as u64;
    // Live states exactly; finished ones (all just made) as recent.
    let expected: BTreeMap<String, u64> = [
        ("PREPARED", count(&|m| m.status == MessageStatus::Prepared)),
        (
            "VERIFY_FAILED",
            count(&|m| m.status == MessageStatus::VerifyFailed),
        ),
        (
            "COMMITTED",
            count(&|m| {
                m.status == MessageStatus::Committed && m.send_status != Some(SendStatus::Sent)
            }),
        ),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_string(), n))
    .collect();
    assert_eq!(sum.by_status, expected);
    assert_eq!(
        sum.by_send_status,
        BTreeMap::from([("PENDING".to_string(), 1), ("SEND_FAILED".to_string(), 1)])
    );
    assert_eq!(
        (sum.sent_recently, sum.rolled_back_recently),
        (
            count(&|m| m.send_status == Some(SendStatus::Sent)),
            count(&|m| m.status == MessageStatus::RolledBack)
        )
    );
    assert!(
        sum.sent_recently > 0 && sum.rolled_back_recently > 0,
        "{sum:?}"
    );
    // Finished before the window: not counted, and the live counts stay.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let narrow = s.summary(Duration::from_millis(10)).await.unwrap();
    assert_eq!(
        (narrow[0].sent_recently, narrow[0].rolled_back_recently),
        (0, 0)
    );
    assert_eq!(narrow[0].by_status, sum.by_status);
    let first_prepared = rows
        .iter()
        .find(|m| m.status == MessageStatus::Prepared)
        .unwrap();
    assert_eq!(sum.oldest_prepared_at, Some(first_prepared.created_at));
    let pending = rows
        .iter()
        .find(|m| m.send_status == Some(SendStatus::Pending))
        .unwrap();
    assert_eq!(sum.oldest_pending_send_at, pending.decided_at);
}

pub(crate) async fn every_registration_is_listed_by_biz_id(s: &DynStore) {
    let s = s.as_ref();
    assert_eq!(s.list_producers().await.unwrap(), []);
    for biz in ["zeta", "alpha", "mid"] {
        s.upsert_producer(&producer_record(biz)).await.unwrap();
    }
    let listed: Vec<String> = s
        .list_producers()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.biz_id)
        .collect();
    assert_eq!(listed, ["alpha", "mid", "zeta"]);
}

pub(crate) async fn redeliver_applies_only_to_a_send_failed_row_and_makes_it_due_with_no_attempts(
    s: &DynStore,
) {
    let s = s.as_ref();
    let operator = trustmsg::store::Actor::Operator("alice".into());
    for state in STATES {
        let Some(before) = arrange(s, state, Due::Later).await else {
            continue;
        };
        let audits = audit_len(s, &Some(before.clone())).await;
        let stale = s
            .redeliver(before.id, before.version + 1, &operator, "topic created")
            .await
            .unwrap();
        assert_eq!(stale, None, "{state:?}: a stale version matches nothing");
        let done = s
            .redeliver(before.id, before.version, &operator, "topic created")
            .await
            .unwrap();
        if state != State::SendFailed {
            assert_eq!(done, None, "{state:?}");
            assert_untouched(s, state, &Some(before), audits).await;
            continue;
        }
        let m = done.expect("a SEND_FAILED row is redelivered");
        assert_eq!(m.send_status, Some(SendStatus::Pending));
        assert_eq!((m.send_attempts, m.version), (0, before.version + 1));
        assert_eq!(
            audit_lines(s, m.id).await.last().map(String::as_str),
            Some("operator:alice redeliver COMMITTED=>COMMITTED send SEND_FAILED=>PENDING")
        );
        let claimed = s.claim_due_sends(10, ROOM, LATER).await.unwrap().messages;
        assert_eq!(
            claimed.iter().map(|c| c.id).collect::<Vec<_>>(),
            [m.id],
            "due at once"
        );
    }
}

pub(crate) async fn check_attempts_are_kept_oldest_first_up_to_the_newest_fifty(s: &DynStore) {
    use trustmsg::store::CheckAttempt;
    let s = s.as_ref();
    let a = arrange_key(s, "a", State::Prepared, Due::Later)
        .await
        .unwrap();
    let b = arrange_key(s, "b", State::Prepared, Due::Later)
        .await
        .unwrap();
    let c = arrange_key(s, "c", State::Prepared, Due::Later)
        .await
        .unwrap();
    let call = |id: u64, attempt: u32| CheckAttempt {
        message_id: id,
        attempt,
        duration_ms: attempt * 10,
        http_status: attempt.is_multiple_of(2).then_some(500),
        outcome: if attempt.is_multiple_of(2) {
            "failed"
        } else {
            "unknown"
        },
        error: attempt
            .is_multiple_of(2)
            .then(|| format!("HTTP 500 #{attempt}")),
    };
    s.record_check_attempts(&[call(b.id, 1)]).await.unwrap();
    // One at a time, then in batches that cross the bound in one call and
    // mix messages.
    for attempt in 1..=45 {
        s.record_check_attempts(&[call(a.id, attempt)])
            .await
            .unwrap();
    }
    s.record_check_attempts(&[call(a.id, 46), call(a.id, 47), call(c.id, 1)])
        .await
        .unwrap();
    let batch: Vec<_> = (48..=55).map(|n| call(a.id, n)).collect();
    s.record_check_attempts(&batch).await.unwrap();
    assert_eq!(s.record_check_attempts(&[]).await.unwrap(), ());
    let kept = s.check_attempts(a.id).await.unwrap();
    assert_eq!(
        kept.iter().map(|e| e.attempt).collect::<Vec<_>>(),
        (6..=55).collect::<Vec<_>>(),
        "the newest 50, oldest first"
    );
    let e = &kept[0];
    assert_eq!(
        (
            e.duration_ms,
            e.http_status,
            e.outcome.as_str(),
            e.error.as_deref()
        ),
        (60, Some(500), "failed", Some("HTTP 500 #6"))
    );
    assert_eq!(
        (kept[1].http_status, kept[1].error.as_deref()),
        (None, None)
    );
    assert!(kept.windows(2).all(|w| w[0].at <= w[1].at));
    assert_eq!(
        s.check_attempts(b.id).await.unwrap().len(),
        1,
        "another message's calls stay"
    );
    assert_eq!(
        s.check_attempts(c.id).await.unwrap().len(),
        1,
        "a call recorded in the same batch as another message's"
    );
    assert_eq!(s.check_attempts(UNKNOWN_ID).await.unwrap(), []);
}

pub(crate) async fn retention_deletes_only_finished_messages_with_their_history(b: &Backend) {
    use trustmsg::store::CheckAttempt;
    let s = b.store.as_ref();
    let mut rows = Vec::new();
    for state in STATES {
        rows.push((state, arrange(s, state, Due::Later).await));
    }
    for (_, m) in &rows {
        if let Some(m) = m {
            s.record_check_attempts(&[CheckAttempt {
                message_id: m.id,
                attempt: 1,
                duration_ms: 1,
                http_status: None,
                outcome: "failed",
                error: None,
            }])
            .await
            .unwrap();
        }
    }
    // Nothing is old enough yet.
    assert_eq!(s.purge_finished(LATER, 100).await.unwrap(), 0);
    let window = std::time::Duration::from_millis(10);
    // Partitioned: the partition is held by the waiting messages, and its
    // finished rows go one by one as on SQLite (a shard that holds none of
    // the waiting ones drops its partition whole instead).
    let round = age_partitions(s, window).await;
    if !round.partitioned || round.dropped.is_empty() {
        assert_eq!(
            s.purge_finished(window, 2).await.unwrap(),
            2,
            "at most the batch"
        );
        assert_eq!(s.purge_finished(window, 100).await.unwrap(), 1, "the rest");
        assert_eq!(s.purge_finished(window, 100).await.unwrap(), 0);
    } else {
        purge_all(s, window).await;
    }
    for (state, m) in &rows {
        let Some(m) = m else { continue };
        let gone = matches!(state, State::Sent | State::RolledBack | State::Tombstone);
        let row = s.find_message_by_id(m.id).await.unwrap();
        assert_eq!(row.is_none(), gone, "{state:?}");
        let history =
            s.audit_trail(m.id).await.unwrap().len() + s.check_attempts(m.id).await.unwrap().len();
        assert_eq!(
            history == 0,
            gone,
            "{state:?}: its audit and check-back rows go with it"
        );
    }
    assert_eq!(
        b.raw_count("SELECT COUNT(*) FROM messages WHERE id > ?", 0)
            .await,
        4,
        "PREPARED, PENDING, SEND_FAILED and VERIFY_FAILED are kept"
    );
}
