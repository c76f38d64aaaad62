//! The consumption ledger (`docs/consumers.md`, The consumption ledger):
//! a begin tells exactly one of concurrent deliveries to go, a finish moves
//! the row to done or failed and a repeat of it changes nothing, failures
//! and stuck holds raise their alerts exactly once, the counts and lag are
//! exact, and retention takes ledger rows with their message.

use std::time::Duration;

use trustmsg::store::{
    Began, ConsumerGroup, ConsumerGroupRecord, DynStore, Finished, Message, NewMessage, SentMark,
    Store,
};
use trustmsg_verify_api::admin::{AlertKind, AlertView};
use trustmsg_verify_api::consumers::ConsumptionState;

use crate::store::harness::*;

pub(crate) async fn group(
    s: &dyn Store,
    name: &str,
    topics: &[&str],
    max_failures: u32,
    hold_ms: u32,
) -> ConsumerGroup {
    s.upsert_consumer_group(&ConsumerGroupRecord {
        name: name.into(),
        topics: topics.iter().map(|t| t.to_string()).collect(),
        token_hash: vec![7; 32],
        max_failures,
        in_progress_timeout_ms: hold_ms,
    })
    .await
    .unwrap()
}

/// A message of `topic` taken all the way to SENT.
pub(crate) async fn sent(s: &dyn Store, key: &str, topic: &str) -> Message {
    let mut m: NewMessage = new_message(key, LATER);
    m.topic = topic.into();
    s.insert_prepared(&m).await.unwrap();
    let m = decided(decide_key(s, key, true, producer(), LATER).await);
    let mark = SentMark {
        id: m.id,
        version: m.version,
        partition: 0,
        offset: 1,
        order: None,
    };
    assert_eq!(s.mark_sent(&[mark]).await.unwrap(), 1);
    s.find_message_by_id(m.id).await.unwrap().unwrap()
}

async fn ledger_alerts(s: &dyn Store, id: u64, kind: AlertKind) -> Vec<AlertView> {
    let filter = trustmsg::store::AlertFilter {
        message_id: Some(id),
        ..Default::default()
    };
    s.list_alerts(filter, 100, None)
        .await
        .unwrap()
        .into_iter()
        .filter(|a| a.kind == kind)
        .collect()
}

fn go(b: Began) -> u32 {
    match b {
        Began::Go(c) => c.attempts,
        other => panic!("expected go, got {other:?}"),
    }
}

pub(crate) async fn a_registration_keeps_its_token_on_update_and_is_listed_rotated_and_deleted(
    s: &DynStore,
) {
    let s = s.as_ref();
    let created = group(s, "billing", &["orders"], 5, 300_000).await;
    assert_eq!(created.topics, ["orders"]);
    let updated = s
        .upsert_consumer_group(&ConsumerGroupRecord {
            name: "billing".into(),
            topics: vec!["orders".into(), "shop.*".into()],
            token_hash: vec![9; 32],
            max_failures: 3,
            in_progress_timeout_ms: 1000,
        })
        .await
        .unwrap();
    assert_eq!(updated.token_hash, vec![7; 32], "an update keeps the token");
    assert_eq!(updated.created_at, created.created_at);
    assert_eq!(
        (
            updated.topics.len(),
            updated.max_failures,
            updated.in_progress_timeout_ms
        ),
        (2, 3, 1000)
    );
    group(s, "analytics", &["*"], 5, 300_000).await;
    let names: Vec<String> = s
        .list_consumer_groups()
        .await
        .unwrap()
        .into_iter()
        .map(|g| g.name)
        .collect();
    assert_eq!(names, ["analytics", "billing"]);
    assert!(s
        .set_consumer_group_token("billing", &[1; 32])
        .await
        .unwrap());
    assert_eq!(
        s.find_consumer_group("billing")
            .await
            .unwrap()
            .unwrap()
            .token_hash,
        vec![1; 32]
    );
    assert!(!s
        .set_consumer_group_token("nobody", &[1; 32])
        .await
        .unwrap());
    assert!(s.delete_consumer_group("billing").await.unwrap());
    assert!(!s.delete_consumer_group("billing").await.unwrap());
    assert_eq!(s.find_consumer_group("billing").await.unwrap(), None);
}

pub(crate) async fn a_begin_goes_once_and_a_finished_consumption_is_skipped(s: &DynStore) {
    let s = s.as_ref();
    let g = group(s, "billing", &["orders"], 5, 300_000).await;
    let m = sent(s, "k1", "orders").await;

    assert_eq!(go(s.begin_consumption(&g, m.id).await.unwrap()), 1);
    let Began::InProgress(held) = s.begin_consumption(&g, m.id).await.unwrap() else {
        panic!("a second begin within the hold is told in_progress");
    };
    assert_eq!(
        (held.attempts, held.state),
        (1, ConsumptionState::InProgress)
    );

    let Finished::Recorded { row, changed: true } =
        s.finish_consumption(&g, m.id, true, None).await.unwrap()
    else {
        panic!("finish of a begun consumption is recorded");
    };
    assert_eq!((row.state, row.attempts), (ConsumptionState::Done, 1));
    assert!(row.finished_at.is_some());
    // A repeat (its first answer lost) changes nothing and says the same.
    let again = s.finish_consumption(&g, m.id, true, None).await.unwrap();
    assert_eq!(
        again,
        Finished::Recorded {
            row: row.clone(),
            changed: false
        }
    );
    let Began::Done(done) = s.begin_consumption(&g, m.id).await.unwrap() else {
        panic!("a done consumption is skipped");
    };
    assert_eq!(done, row);
    // Failing what is done is refused, and changes nothing.
    let Finished::Conflict(c) = s
        .finish_consumption(&g, m.id, false, Some("late"))
        .await
        .unwrap()
    else {
        panic!("failing a done consumption is a conflict");
    };
    assert_eq!(c, row);
    assert_eq!(s.consumptions_of(m.id).await.unwrap(), [row]);
}

pub(crate) async fn an_unknown_message_and_a_finish_without_begin_are_told_apart(s: &DynStore) {
    let s = s.as_ref();
    let g = group(s, "billing", &["orders"], 5, 300_000).await;
    assert_eq!(
        s.begin_consumption(&g, UNKNOWN_ID).await.unwrap(),
        Began::UnknownMessage
    );
    assert_eq!(
        s.finish_consumption(&g, UNKNOWN_ID, true, None)
            .await
            .unwrap(),
        Finished::UnknownMessage
    );
    let m = sent(s, "k1", "orders").await;
    assert_eq!(
        s.finish_consumption(&g, m.id, true, None).await.unwrap(),
        Finished::NotBegun
    );
    assert_eq!(
        s.consumptions_of(m.id).await.unwrap(),
        [],
        "nothing written"
    );
}

pub(crate) async fn concurrent_begins_of_one_message_give_one_go_per_group(s: &DynStore) {
    let billing = group(s.as_ref(), "billing", &["orders"], 5, 300_000).await;
    let analytics = group(s.as_ref(), "analytics", &["orders"], 5, 300_000).await;
    let m = sent(s.as_ref(), "k1", "orders").await;
    let mut tasks = Vec::new();
    for i in 0..12 {
        let s = s.clone();
        let g = if i % 2 == 0 {
            billing.clone()
        } else {
            analytics.clone()
        };
        tasks.push(tokio::spawn(async move {
            (g.name.clone(), s.begin_consumption(&g, m.id).await.unwrap())
        }));
    }
    let mut gos = std::collections::BTreeMap::<String, u32>::new();
    for t in tasks {
        let (name, began) = t.await.unwrap();
        match began {
            Began::Go(_) => *gos.entry(name).or_default() += 1,
            Began::InProgress(c) => assert_eq!(c.attempts, 1),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        gos,
        [("analytics".to_string(), 1), ("billing".to_string(), 1)].into()
    );
    let rows = s.consumptions_of(m.id).await.unwrap();
    assert_eq!(
        rows.iter()
            .map(|c| (c.group.as_str(), c.attempts))
            .collect::<Vec<_>>(),
        [("analytics", 1), ("billing", 1)],
        "sorted by group, one attempt each"
    );
}

pub(crate) async fn failures_are_retried_and_alerted_failing_once_per_message_and_group(
    s: &DynStore,
) {
    let s = s.as_ref();
    let g = group(s, "analytics", &["orders"], 2, 300_000).await;
    let m = sent(s, "k1", "orders").await;
    for (attempt, error) in [(1, "boom 1"), (2, "boom 2"), (3, "boom 3")] {
        assert_eq!(go(s.begin_consumption(&g, m.id).await.unwrap()), attempt);
        let Finished::Recorded { row, changed: true } = s
            .finish_consumption(&g, m.id, false, Some(error))
            .await
            .unwrap()
        else {
            panic!("a failure is recorded");
        };
        assert_eq!(
            (row.state, row.attempts, row.last_error.as_deref()),
            (ConsumptionState::Failed, attempt, Some(error))
        );
        let alerts = ledger_alerts(s, m.id, AlertKind::ConsumptionFailing).await;
        assert_eq!(
            alerts.len(),
            usize::from(attempt >= 2),
            "no alert before max_failures, one from then on (attempt {attempt})"
        );
    }
    let a = &ledger_alerts(s, m.id, AlertKind::ConsumptionFailing).await[0];
    assert_eq!(a.group.as_deref(), Some("analytics"));
    assert_eq!((a.attempts, a.biz_id.as_str()), (2, BIZ));
    assert!(a.last_error.contains("boom 2"), "{}", a.last_error);
    // A repeated failure without a begin changes nothing; success needs a begin.
    assert!(matches!(
        s.finish_consumption(&g, m.id, false, Some("boom 3"))
            .await
            .unwrap(),
        Finished::Recorded { changed: false, .. }
    ));
    assert!(matches!(
        s.finish_consumption(&g, m.id, true, None).await.unwrap(),
        Finished::Conflict(_)
    ));
}

pub(crate) async fn a_hold_that_runs_out_is_alerted_stuck_once_per_begin_and_taken_over(
    s: &DynStore,
) {
    let s = s.as_ref();
    let g = group(s, "billing", &["orders"], 5, 300).await;
    let m = sent(s, "k1", "orders").await;
    assert_eq!(go(s.begin_consumption(&g, m.id).await.unwrap()), 1);
    assert_eq!(s.flag_stuck_consumptions(100).await.unwrap(), []);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stuck = s.flag_stuck_consumptions(100).await.unwrap();
    assert_eq!(
        stuck
            .iter()
            .map(|c| (c.message_id, c.attempts))
            .collect::<Vec<_>>(),
        [(m.id, 1)]
    );
    assert_eq!(s.flag_stuck_consumptions(100).await.unwrap(), [], "once");
    assert_eq!(
        go(s.begin_consumption(&g, m.id).await.unwrap()),
        2,
        "a begin after the hold ran out takes it over"
    );
    assert_eq!(s.flag_stuck_consumptions(100).await.unwrap(), []);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(s.flag_stuck_consumptions(100).await.unwrap().len(), 1);
    let alerts = ledger_alerts(s, m.id, AlertKind::ConsumptionStuck).await;
    assert_eq!(alerts.len(), 2, "one alert per begin");
    assert!(alerts.iter().all(|a| a.group.as_deref() == Some("billing")));
    // A finished consumption is never stuck: a third begin (the second hold
    // ran out too), finished within its hold, is not flagged once that hold
    // would have run out, as the two unfinished ones above were.
    assert_eq!(go(s.begin_consumption(&g, m.id).await.unwrap()), 3);
    let Finished::Recorded { row, changed: true } =
        s.finish_consumption(&g, m.id, true, None).await.unwrap()
    else {
        panic!("the finish of the third begin is recorded");
    };
    assert_eq!((row.state, row.attempts), (ConsumptionState::Done, 3));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(s.flag_stuck_consumptions(100).await.unwrap(), []);
    assert_eq!(
        ledger_alerts(s, m.id, AlertKind::ConsumptionStuck)
            .await
            .len(),
        2,
        "no alert for the finished one"
    );
}

pub(crate) async fn counts_and_lag_follow_each_groups_topics_since_its_registration(s: &DynStore) {
    let s = s.as_ref();
    let before = sent(s, "before", "orders").await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let exact = group(s, "billing", &["orders"], 5, 300_000).await;
    group(s, "shop", &["ord*", "pay_ments"], 5, 300_000).await;
    group(s, "everything", &["*"], 5, 300_000).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let o1 = sent(s, "o1", "orders").await;
    let o2 = sent(s, "o2", "orders").await;
    sent(s, "o3", "orders").await;
    sent(s, "p1", "payments").await;
    sent(s, "p2", "pay_ments").await;
    sent(s, "x1", "order").await;
    // Not yet sent: no lag.
    prepare(s, "unsent", Due::Later).await;

    go(s.begin_consumption(&exact, o1.id).await.unwrap());
    s.finish_consumption(&exact, o1.id, true, None)
        .await
        .unwrap();
    go(s.begin_consumption(&exact, o2.id).await.unwrap());
    s.finish_consumption(&exact, o2.id, false, Some("x"))
        .await
        .unwrap();
    go(s.begin_consumption(&exact, before.id).await.unwrap());

    let counts = s.consumer_group_counts().await.unwrap();
    let got: Vec<(&str, u64, u64, u64, u64)> = counts
        .iter()
        .map(|c| {
            (
                c.group.as_str(),
                c.processed,
                c.failing,
                c.in_progress,
                c.lag,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            // orders: o1 done, o2 failed, o3 → lag 2 (`before` predates the
            // group; its in-progress row counts as in progress all the same).
            ("billing", 1, 1, 1, 2),
            // Sent since registration: o1..o3, p1, p2, x1; none processed.
            ("everything", 0, 0, 0, 6),
            // ord*: o1..o3 and x1 (`order`); pay_ments exactly (not payments).
            ("shop", 0, 0, 0, 5),
        ]
    );
}

pub(crate) async fn retention_takes_ledger_rows_with_their_message(s: &DynStore) {
    let s = s.as_ref();
    let g = group(s, "billing", &["orders"], 5, 300_000).await;
    let m = sent(s, "k1", "orders").await;
    let live = prepare(s, "live", Due::Later).await;
    go(s.begin_consumption(&g, m.id).await.unwrap());
    s.finish_consumption(&g, m.id, true, None).await.unwrap();
    go(s.begin_consumption(&g, live.id).await.unwrap());
    let window = Duration::from_millis(5);
    age_partitions(s, window).await;
    purge_all(s, window).await;
    assert_eq!(s.find_message_by_id(m.id).await.unwrap(), None);
    assert_eq!(s.consumptions_of(m.id).await.unwrap(), []);
    assert_eq!(
        s.consumptions_of(live.id).await.unwrap().len(),
        1,
        "a live message keeps its rows"
    );
}
