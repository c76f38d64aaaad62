//! Delivery at a chosen time (`docs/architecture.md`, Delivery time): a
//! prepare stores `deliver_at` (an instant, or a delay added to the database
//! clock); a commit before it makes the message due then, unclaimed, and a
//! commit after it claims it for the fast path as always, whether the commit
//! is decided alone or in a batch with the rows at hand. A delayed message
//! is not backlog, its overdue wait counts from its time, and an operator's
//! send-now makes it due at once.

use std::time::Duration;

use chrono::Utc;
use trustmsg::store::{
    self, DecideOutcome, DecideRequest, Delivery, DynStore, Inserted, Message, Store, Target, Wait,
};
use trustmsg_verify_api::SendStatus;

use crate::store::harness::*;

async fn prepare_delivered(s: &dyn Store, key: &str, deliver: Delivery) -> Message {
    let mut m = new_message(key, LATER);
    m.deliver = Some(deliver);
    match s.insert_prepared(&m).await.unwrap() {
        Inserted::Created(m) => m,
        other => panic!("prepare of {key} did not create a row: {other:?}"),
    }
}

async fn commit(s: &dyn Store, key: &str) -> Message {
    decided(decide_key(s, key, true, producer(), LATER).await)
}

fn ids(claimed: &[Message]) -> Vec<u64> {
    claimed.iter().map(|m| m.id).collect()
}

pub(crate) async fn a_commit_before_deliver_at_makes_it_due_then_unclaimed_and_after_it_at_once(
    s: &DynStore,
) {
    let s = s.as_ref();
    let later = prepare_delivered(s, "later", Delivery::After(Duration::from_millis(1500))).await;
    assert_eq!(
        later.deliver_at,
        Some(later.created_at + chrono::TimeDelta::milliseconds(1500)),
        "a delay is added to the database clock of the prepare"
    );
    let past_at = Utc::now() - chrono::TimeDelta::hours(1);
    let past_at = chrono::DateTime::from_timestamp_millis(past_at.timestamp_millis()).unwrap();
    let past = prepare_delivered(s, "past", Delivery::At(past_at)).await;
    assert_eq!(
        past.deliver_at,
        Some(past_at),
        "an instant is stored as given"
    );
    let plain = prepare(s, "plain", Due::Later).await;
    assert_eq!(plain.deliver_at, None);

    let later = commit(s, "later").await;
    assert_eq!(later.send_status, Some(SendStatus::Pending));
    assert_eq!(later.next_send_at, later.deliver_at, "due at its time");
    assert!(later.scheduled_by_commit(), "not claimed for the fast path");
    for key in ["past", "plain"] {
        let m = commit(s, key).await;
        assert!(!m.scheduled_by_commit(), "{key}");
        assert_eq!(
            m.next_send_at,
            Some(m.decided_at.unwrap() + chrono::TimeDelta::seconds(3600)),
            "{key}: claimed for the fast path for one lease"
        );
    }
    assert_eq!(
        s.find_message_by_id(later.id).await.unwrap().as_ref(),
        Some(&later),
        "the row is as the commit returned it"
    );

    // Not backlog while it waits for its time.
    let b = s.backlog().await.unwrap();
    assert_eq!(b.scheduled, 1, "{b:?}");
    let pending: u64 = b
        .counts
        .iter()
        .filter(|(st, ss, _)| st == "COMMITTED" && ss.as_deref() == Some("PENDING"))
        .map(|(_, _, n)| n)
        .sum();
    assert_eq!(pending, 2, "the two claimed ones only: {b:?}");
    let summary = s.summary(Duration::from_secs(60)).await.unwrap();
    assert_eq!(summary[0].scheduled, 1, "{summary:?}");
    assert_eq!(
        summary[0].by_send_status.get("PENDING"),
        Some(&2),
        "{summary:?}"
    );

    assert_eq!(
        s.claim_due_sends(10, ROOM, LATER).await.unwrap().messages,
        []
    );
    let claimed =
        claim_eventually(|| async { s.claim_due_sends(10, ROOM, LATER).await.unwrap() }).await;
    assert_eq!(ids(&claimed.messages), [later.id], "due at its time");
    assert!(claimed.claimed_at.unwrap() >= later.deliver_at.unwrap());
    assert_eq!(s.backlog().await.unwrap().scheduled, 0);
}

/// The same rule when the commits are decided in one batch with the rows
/// at hand (the producer API's write path), which on MySQL computes the
/// result from the rows instead of reading them back.
pub(crate) async fn a_batch_of_commits_with_the_rows_at_hand_follows_the_same_rule(s: &DynStore) {
    let s = s.as_ref();
    let later = prepare_delivered(s, "later", Delivery::After(Duration::from_secs(3600))).await;
    let past = prepare_delivered(s, "past", Delivery::After(Duration::ZERO)).await;
    let reqs: Vec<DecideRequest<'_>> = ["later", "past"]
        .iter()
        .map(|key| DecideRequest {
            target: Target::Key {
                biz_id: BIZ,
                message_key: key,
            },
            commit: true,
            actor: producer(),
            reason: "batch".into(),
            send_lease: LATER,
            verify_attempt: false,
        })
        .collect();
    let outcomes = store::decide_batch_known(s, &reqs, &[Some(&later), Some(&past)])
        .await
        .unwrap();
    let rows: Vec<Message> = outcomes
        .into_iter()
        .map(|o| match o {
            DecideOutcome::Decided(m) => m,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(rows[0].next_send_at, later.deliver_at);
    assert!(rows[0].scheduled_by_commit());
    assert!(!rows[1].scheduled_by_commit());
    assert_eq!(
        rows[1].next_send_at,
        Some(rows[1].decided_at.unwrap() + chrono::TimeDelta::seconds(3600))
    );
    for m in &rows {
        assert_eq!(
            s.find_message_by_id(m.id).await.unwrap().as_ref(),
            Some(m),
            "the batch's result is the row as stored"
        );
    }
}

pub(crate) async fn a_delayed_send_is_overdue_counted_from_its_deliver_at(s: &DynStore) {
    let threshold = Duration::from_millis(300);
    let s = s.as_ref();
    let m = prepare_delivered(s, "later", Delivery::After(Duration::from_millis(900))).await;
    commit(s, "later").await;
    // Past the threshold since the commit, but its time has not come.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(s.flag_overdue(Wait::Send, threshold, 10).await.unwrap(), []);
    // Past the threshold since its time (no forwarder here sends it).
    tokio::time::sleep(Duration::from_millis(900)).await;
    let flagged = s.flag_overdue(Wait::Send, threshold, 10).await.unwrap();
    assert_eq!(flagged.len(), 1);
    assert_eq!((flagged[0].id, flagged[0].since), (m.id, m.deliver_at));
}

pub(crate) async fn send_now_applies_only_to_a_committed_send_waiting_for_its_time(s: &DynStore) {
    let s = s.as_ref();
    let alice = trustmsg::store::Actor::Operator("alice".into());
    let m = prepare_delivered(s, "later", Delivery::After(Duration::from_secs(3600))).await;
    assert_eq!(
        s.send_now(m.id, m.version, &alice, "why").await.unwrap(),
        None,
        "not committed"
    );
    let m = commit(s, "later").await;
    assert_eq!(
        s.send_now(m.id, m.version + 1, &alice, "why")
            .await
            .unwrap(),
        None,
        "a stale version"
    );
    let done = s
        .send_now(m.id, m.version, &alice, "customer asked")
        .await
        .unwrap()
        .expect("a committed send waiting for its time");
    assert_eq!(done.version, m.version + 1);
    assert_eq!(done.send_status, Some(SendStatus::Pending));
    assert_eq!(done.next_send_at, Some(done.updated_at), "due now");
    assert_eq!(done.deliver_at, Some(done.updated_at), "its time is now");
    assert_eq!(
        audit_lines(s, m.id).await.last().map(String::as_str),
        Some("operator:alice send_now COMMITTED=>COMMITTED send PENDING=>PENDING")
    );
    assert_eq!(
        s.send_now(done.id, done.version, &alice, "again")
            .await
            .unwrap(),
        None,
        "its time has come"
    );
    let claimed = s.claim_due_sends(10, ROOM, LATER).await.unwrap().messages;
    assert_eq!(ids(&claimed), [m.id], "due at once");

    prepare(s, "plain", Due::Later).await;
    let plain = commit(s, "plain").await;
    assert_eq!(
        s.send_now(plain.id, plain.version, &alice, "why")
            .await
            .unwrap(),
        None,
        "never delayed"
    );
}

/// Prepares written together (one multi-row INSERT, with or without
/// `RETURNING`) store each message's own delivery time, and a replay with
/// the same delay is the same message (same digest, the time stored first).
pub(crate) async fn a_prepare_batch_stores_each_delivery_time(s: &DynStore) {
    let s = s.as_ref();
    let at =
        chrono::DateTime::from_timestamp_millis(Utc::now().timestamp_millis() + 60_000).unwrap();
    let mut batch = vec![
        new_message("none", LATER),
        new_message("at", LATER),
        new_message("after", LATER),
    ];
    batch[1].deliver = Some(Delivery::At(at));
    batch[2].deliver = Some(Delivery::After(Duration::from_secs(30)));
    let rows: Vec<Message> = s
        .insert_prepared_batch(&batch)
        .await
        .unwrap()
        .into_iter()
        .map(|i| match i {
            Inserted::Created(m) => m,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(rows[0].deliver_at, None);
    assert_eq!(rows[1].deliver_at, Some(at));
    assert_eq!(
        rows[2].deliver_at,
        Some(rows[2].created_at + chrono::TimeDelta::seconds(30))
    );
    for (m, new) in rows.iter().zip(&batch) {
        assert_eq!(m.content_digest.as_deref(), Some(new.digest().as_slice()));
        assert_eq!(
            s.find_message_by_id(m.id).await.unwrap().as_ref(),
            Some(m),
            "returned as stored"
        );
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    match s.insert_prepared(&batch[2]).await.unwrap() {
        Inserted::Existing(m) => {
            assert_eq!(m, rows[2], "the replay finds the row, its time unchanged")
        }
        other => panic!("{other:?}"),
    }
}
