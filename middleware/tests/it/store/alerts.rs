//! The alert outbox (`docs/operations.md`, Alerts): every state change that
//! needs a person writes its alert in its own transaction, so the alert is
//! there exactly when the change is (a lost guard writes neither); delivery
//! claims due alerts with a lease, skipping rows another claimer holds;
//! marks, retries and settling apply to pending alerts only; retention
//! deletes settled alerts, never a pending one.

use std::time::Duration;

use trustmsg::store::{Actor, AlertFilter, Message, Store, Transition, Wait};
use trustmsg_verify_api::admin::{AlertKind, AlertState, AlertView};
use trustmsg_verify_api::MessageStatus;

use crate::store::harness::*;

/// Every alert of message `id`, newest first.
async fn alerts_of(s: &dyn Store, id: u64) -> Vec<AlertView> {
    let filter = AlertFilter {
        message_id: Some(id),
        ..Default::default()
    };
    s.list_alerts(filter, 100, None).await.unwrap()
}

/// The one alert of message `id`, checked to be a fresh pending one of `kind`.
async fn the_pending_alert(s: &dyn Store, id: u64, kind: AlertKind) -> AlertView {
    let alerts = alerts_of(s, id).await;
    assert_eq!(alerts.len(), 1, "exactly one alert: {alerts:?}");
    let a = alerts.into_iter().next().unwrap();
    assert_eq!(
        (a.kind, a.message_id, a.state),
        (kind, id, AlertState::Pending)
    );
    assert_eq!(
        (a.delivery_attempts, a.last_delivery_error.as_deref()),
        (0, None)
    );
    assert_eq!(a.next_attempt_at, Some(a.created_at), "due at once");
    assert_eq!(a.delivered_at, None);
    a
}

pub(crate) async fn a_verify_failed_transition_writes_its_alert_and_a_lost_one_writes_none(
    b: &Backend,
) {
    let s = b.store.as_ref();
    let m = prepare(s, "k", Due::Later).await;
    let stale = Transition {
        version: m.version + 7,
        ..verify_failed(&m)
    };
    assert_eq!(s.transition(&stale).await.unwrap(), None);
    assert_eq!(alerts_of(s, m.id).await, [], "no change, no alert");

    let failed = s.transition(&verify_failed(&m)).await.unwrap().unwrap();
    let a = the_pending_alert(s, m.id, AlertKind::VerifyFailed).await;
    assert_eq!((a.biz_id.as_str(), a.message_key.as_str()), (BIZ, "k"));
    assert_eq!(a.attempts, failed.verify_attempts);
    assert_eq!(a.last_error, "check-back timed out");
    // Written with the change (MySQL reads its clock per statement).
    assert!(a.created_at >= failed.updated_at, "{a:?}");
    assert!(a.created_at - failed.updated_at < chrono::TimeDelta::seconds(1));

    assert_eq!(s.transition(&verify_failed(&m)).await.unwrap(), None);
    assert_eq!(alerts_of(s, m.id).await.len(), 1, "a repeat raises nothing");
    // A commit (operator or late producer) raises nothing either.
    let commit = Transition {
        from: MessageStatus::VerifyFailed,
        to: MessageStatus::Committed,
        version: failed.version,
        ..verify_failed(&failed)
    };
    assert!(s.transition(&commit).await.unwrap().is_some());
    assert_eq!(alerts_of(s, m.id).await.len(), 1);
}

pub(crate) async fn a_batch_of_verify_failed_transitions_writes_one_alert_per_row(b: &Backend) {
    let s = b.store.as_ref();
    let rows = [
        prepare(s, "a", Due::Later).await,
        prepare(s, "b", Due::Later).await,
        prepare(s, "c", Due::Later).await,
    ];
    let ts: Vec<Transition> = rows.iter().map(verify_failed).collect();
    let seen: Vec<&Message> = rows.iter().collect();
    let got = s.transition_batch_seen(&ts, &seen).await.unwrap();
    assert!(got.iter().all(Option::is_some), "{got:?}");
    for m in &rows {
        the_pending_alert(s, m.id, AlertKind::VerifyFailed).await;
    }
}

pub(crate) async fn mark_send_failed_writes_its_alert_and_a_lost_one_writes_none(b: &Backend) {
    let s = b.store.as_ref();
    let m = arrange_key(s, "k", State::SendPending, Due::Later)
        .await
        .unwrap();
    let none = s
        .mark_send_failed(m.id, m.version + 1, "refused", &Actor::Forwarder)
        .await
        .unwrap();
    assert_eq!(none, None);
    assert_eq!(alerts_of(s, m.id).await, []);
    let failed = s
        .mark_send_failed(m.id, m.version, "record too large", &Actor::Forwarder)
        .await
        .unwrap()
        .unwrap();
    let a = the_pending_alert(s, m.id, AlertKind::SendFailed).await;
    assert_eq!(
        (a.attempts, a.last_error.as_str()),
        (failed.send_attempts, "record too large")
    );
    let again = s
        .mark_send_failed(m.id, m.version, "record too large", &Actor::Forwarder)
        .await
        .unwrap();
    assert_eq!(again, None);
    assert_eq!(alerts_of(s, m.id).await.len(), 1);
}

pub(crate) async fn a_quarantine_and_an_overdue_flag_each_write_one_alert(b: &Backend) {
    let s = b.store.as_ref();
    let bad = arrange_key(s, "bad", State::SendPending, Due::Now)
        .await
        .unwrap();
    assert_eq!(
        b.raw_execute(
            "UPDATE messages SET headers = 'not json' WHERE id = ?",
            bad.id
        )
        .await,
        1
    );
    let claimed = s.claim_due_sends(10, ROOM, LATER).await.unwrap();
    assert_eq!(claimed.quarantined.len(), 1);
    let a = the_pending_alert(s, bad.id, AlertKind::Quarantined).await;
    assert_eq!(
        (a.attempts, a.last_error),
        (0, claimed.quarantined[0].reason.clone())
    );
    assert_eq!(s.claim_due_sends(10, ROOM, LATER).await.unwrap().taken(), 0);
    assert_eq!(alerts_of(s, bad.id).await.len(), 1);

    let waiting = prepare(s, "waiting", Due::Later).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let flagged = s
        .flag_overdue(Wait::Decision, Duration::from_millis(50), 10)
        .await
        .unwrap();
    assert_eq!(flagged.len(), 1);
    let a = the_pending_alert(s, waiting.id, AlertKind::VerifyOverdue).await;
    assert!(
        a.last_error
            .starts_with("prepared and not yet decided for more than 50ms"),
        "{}",
        a.last_error
    );
    let again = s
        .flag_overdue(Wait::Decision, Duration::from_millis(50), 10)
        .await
        .unwrap();
    assert_eq!(again, []);
    assert_eq!(alerts_of(s, waiting.id).await.len(), 1);
}

/// Two pending alerts, of two messages; returns their ids.
async fn two_alerts(s: &dyn Store) -> (u64, u64) {
    let mut ids = Vec::new();
    for key in ["one", "two"] {
        let m = prepare(s, key, Due::Later).await;
        s.transition(&verify_failed(&m)).await.unwrap().unwrap();
        ids.push(alerts_of(s, m.id).await[0].alert_id);
    }
    (ids[0], ids[1])
}

fn alert_ids(alerts: &[AlertView]) -> Vec<u64> {
    alerts.iter().map(|a| a.alert_id).collect()
}

pub(crate) async fn claim_due_alerts_skips_claimed_ones_until_a_short_lease_runs_out(b: &Backend) {
    let s = b.store.as_ref();
    let (one, two) = two_alerts(s).await;
    // Short, but longer than three claims take on a loaded machine (with
    // 300 ms, `one` came back before the third claim in a full run, whose
    // sharded claim took seconds): the lease must outlast the claims that
    // assert it still holds.
    let short = Duration::from_secs(4);
    let first = s.claim_due_alerts(1, short).await.unwrap();
    assert_eq!(
        alert_ids(&first),
        [one],
        "at most the limit, oldest due first"
    );
    let second = s.claim_due_alerts(10, short).await.unwrap();
    assert_eq!(alert_ids(&second), [two], "a claimed alert is not due");
    assert_eq!(s.claim_due_alerts(10, short).await.unwrap(), []);
    // Each comes back when its own lease runs out: `one`, claimed first,
    // may come back a claim before `two` on a slow machine.
    let mut again = Vec::new();
    while again.len() < 2 {
        let back =
            claim_eventually(|| async { s.claim_due_alerts(10, LATER).await.unwrap() }).await;
        again.extend(alert_ids(&back));
    }
    assert_eq!(again, [one, two], "back after the lease");
}

pub(crate) async fn claim_due_alerts_skips_an_alert_another_claimer_holds_locked(b: &Backend) {
    let s = b.store.as_ref();
    let (one, two) = two_alerts(s).await;
    let held = b
        .lock_row("SELECT id FROM alerts WHERE id = ? FOR UPDATE", one)
        .await;
    let claimed = tokio::time::timeout(Duration::from_secs(5), s.claim_due_alerts(10, LATER))
        .await
        .expect("the claim does not wait for the lock")
        .unwrap();
    assert_eq!(alert_ids(&claimed), [two]);
    // Rolled back before the next claim: a dropped transaction's rollback
    // is only queued, and the lock could outlive the drop.
    held.rollback().await.expect("release the lock");
    let claimed = s.claim_due_alerts(10, LATER).await.unwrap();
    assert_eq!(alert_ids(&claimed), [one]);
}

pub(crate) async fn a_delivered_alert_is_settled_and_a_retry_counts_and_waits(b: &Backend) {
    let s = b.store.as_ref();
    let (one, two) = two_alerts(s).await;
    assert!(s
        .retry_alert_later(one, "the webhook answered 500", LATER)
        .await
        .unwrap());
    let a = &s
        .list_alerts(AlertFilter::default(), 10, None)
        .await
        .unwrap()[1];
    assert_eq!(a.alert_id, one);
    assert_eq!(a.state, AlertState::Pending);
    assert_eq!(a.delivery_attempts, 1);
    assert_eq!(
        a.last_delivery_error.as_deref(),
        Some("the webhook answered 500")
    );
    assert!(a.next_attempt_at.unwrap() > a.created_at + chrono::TimeDelta::minutes(59));
    assert_eq!(
        alert_ids(&s.claim_due_alerts(10, LATER).await.unwrap()),
        [two]
    );

    assert!(s.mark_alert_delivered(two).await.unwrap());
    assert!(!s.mark_alert_delivered(two).await.unwrap(), "marked once");
    assert!(!s.retry_alert_later(two, "late", LATER).await.unwrap());
    let delivered = AlertFilter {
        state: Some(AlertState::Delivered),
        ..Default::default()
    };
    let d = s.list_alerts(delivered, 10, None).await.unwrap();
    assert_eq!(alert_ids(&d), [two]);
    assert_eq!((d[0].delivery_attempts, d[0].next_attempt_at), (1, None));
    assert!(d[0].delivered_at.is_some());
    let pending = AlertFilter {
        state: Some(AlertState::Pending),
        ..Default::default()
    };
    assert_eq!(
        alert_ids(&s.list_alerts(pending, 10, None).await.unwrap()),
        [one]
    );
}

pub(crate) async fn without_a_webhook_due_alerts_are_settled_and_never_pile_up(b: &Backend) {
    let s = b.store.as_ref();
    let (one, two) = two_alerts(s).await;
    assert!(s
        .retry_alert_later(two, "claimed elsewhere", LATER)
        .await
        .unwrap());
    assert_eq!(
        s.settle_alerts_without_webhook(10).await.unwrap(),
        1,
        "the due one"
    );
    let all = s
        .list_alerts(AlertFilter::default(), 10, None)
        .await
        .unwrap();
    let state = |id| all.iter().find(|a| a.alert_id == id).unwrap().state;
    assert_eq!(state(one), AlertState::NoWebhook);
    assert_eq!(state(two), AlertState::Pending);
    assert_eq!(s.settle_alerts_without_webhook(10).await.unwrap(), 0);
}

pub(crate) async fn listed_alerts_are_newest_first_and_paged_without_skips(b: &Backend) {
    let s = b.store.as_ref();
    let (one, two) = two_alerts(s).await;
    let (three, four) = two_alerts_more(s).await;
    // Newest is highest id (with shards: the last shard's first, then by
    // id within each shard, the order the ids carry).
    let mut newest_first = [one, two, three, four];
    newest_first.sort_unstable_by(|a, b| b.cmp(a));
    let page = s
        .list_alerts(AlertFilter::default(), 2, None)
        .await
        .unwrap();
    assert_eq!(alert_ids(&page), newest_first[..2]);
    let rest = s
        .list_alerts(AlertFilter::default(), 10, Some(newest_first[1]))
        .await
        .unwrap();
    assert_eq!(alert_ids(&rest), newest_first[2..]);
}

/// Two more alerts after [`two_alerts`]; returns their ids.
async fn two_alerts_more(s: &dyn Store) -> (u64, u64) {
    let mut ids = Vec::new();
    for key in ["three", "four"] {
        let m = prepare(s, key, Due::Later).await;
        s.transition(&verify_failed(&m)).await.unwrap().unwrap();
        ids.push(alerts_of(s, m.id).await[0].alert_id);
    }
    (ids[0], ids[1])
}

pub(crate) async fn retention_deletes_settled_alerts_and_never_a_pending_one(b: &Backend) {
    let s = b.store.as_ref();
    let (one, two) = two_alerts(s).await;
    let (three, _four) = two_alerts_more(s).await;
    assert!(s.mark_alert_delivered(one).await.unwrap());
    assert!(s.retry_alert_later(three, "refused", LATER).await.unwrap());
    assert!(s.retry_alert_later(_four, "refused", LATER).await.unwrap());
    assert_eq!(s.settle_alerts_without_webhook(10).await.unwrap(), 1);
    assert_eq!(
        s.purge_finished(LATER, 100).await.unwrap(),
        0,
        "not old enough"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    let window = Duration::from_millis(10);
    assert_eq!(s.purge_finished(window, 100).await.unwrap(), 2);
    let left = s
        .list_alerts(AlertFilter::default(), 10, None)
        .await
        .unwrap();
    assert!(
        left.iter().all(|a| a.state == AlertState::Pending),
        "{left:?}"
    );
    assert!(!alert_ids(&left).contains(&one) && !alert_ids(&left).contains(&two));
    assert_eq!(left.len(), 2);
}
