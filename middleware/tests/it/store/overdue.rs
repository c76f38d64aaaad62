//! Overdue messages (`docs/architecture.md`, Alerts): `flag_overdue` finds
//! the messages that have waited longer than a threshold in the state it
//! asks about, returns each once per wait, and changes nothing else about
//! the row (state, version, audit), so a claim in flight stays valid. Each
//! kind of wait has its own flag, and an operator's redeliver or re-verify
//! starts its wait (and its alert) again.

use std::time::Duration;

use trustmsg::store::{Actor, DynStore, Message, Transition, Wait};
use trustmsg_verify_api::MessageStatus;

use crate::store::harness::*;

/// Long enough that a row arranged just now is not overdue by the next
/// few statements on a loaded machine (300 ms was not, once, in CI).
const THRESHOLD: Duration = Duration::from_millis(1_500);

fn ids(flagged: &[trustmsg::store::Overdue]) -> Vec<u64> {
    flagged.iter().map(|o| o.id).collect()
}

/// Every state arranged, then after the threshold one more waiting row of
/// `young` state: only the old row of `old` state is overdue, once; the
/// young one becomes overdue after the threshold has passed for it too.
async fn flags_each_waiting_message_once(s: &DynStore, wait: Wait, state: State) {
    let s = s.as_ref();
    let mut rows = Vec::new();
    for st in STATES {
        rows.push((st, arrange(s, st, Due::Later).await));
    }
    tokio::time::sleep(THRESHOLD + Duration::from_millis(300)).await;
    let young = arrange_key(s, "young", state, Due::Later).await.unwrap();
    let mut audits = Vec::new();
    for (_, m) in &rows {
        audits.push(audit_len(s, m).await);
    }
    let old: &Message = rows
        .iter()
        .find(|(st, _)| *st == state)
        .and_then(|(_, m)| m.as_ref())
        .unwrap();

    let flagged = s.flag_overdue(wait, THRESHOLD, 100).await.unwrap();
    assert_eq!(ids(&flagged), [old.id], "only the old waiting row");
    let o = &flagged[0];
    assert_eq!(
        (o.biz_id.as_str(), o.message_key.as_str()),
        (BIZ, old.message_key.as_str())
    );
    let (since, attempts) = match wait {
        Wait::Send => (old.decided_at, old.send_attempts),
        Wait::Decision => (Some(old.created_at), old.verify_attempts),
    };
    assert_eq!((o.since, o.attempts), (since, attempts));
    assert_eq!(
        s.flag_overdue(wait, THRESHOLD, 100).await.unwrap(),
        [],
        "a message is flagged (and alerted) once"
    );
    for (i, (st, before)) in rows.iter().enumerate() {
        assert_untouched(s, *st, before, audits[i]).await;
    }

    tokio::time::sleep(THRESHOLD + Duration::from_millis(300)).await;
    assert_eq!(
        ids(&s.flag_overdue(wait, THRESHOLD, 100).await.unwrap()),
        [young.id]
    );
    assert_eq!(
        s.find_message_by_id(young.id).await.unwrap().as_ref(),
        Some(&young),
        "flagging leaves the row as it was"
    );
}

pub(crate) async fn flag_overdue_finds_each_pending_send_once_and_touches_nothing_else(
    s: &DynStore,
) {
    flags_each_waiting_message_once(s, Wait::Send, State::SendPending).await;
}

pub(crate) async fn flag_overdue_finds_each_undecided_prepare_once_and_touches_nothing_else(
    s: &DynStore,
) {
    flags_each_waiting_message_once(s, Wait::Decision, State::Prepared).await;
}

pub(crate) async fn flag_overdue_takes_at_most_the_limit_and_the_rest_next_time(s: &DynStore) {
    let s = s.as_ref();
    let a = arrange_key(s, "a", State::SendPending, Due::Later)
        .await
        .unwrap();
    let b = arrange_key(s, "b", State::SendPending, Due::Later)
        .await
        .unwrap();
    tokio::time::sleep(THRESHOLD + Duration::from_millis(300)).await;
    let first = ids(&s.flag_overdue(Wait::Send, THRESHOLD, 1).await.unwrap());
    let second = ids(&s.flag_overdue(Wait::Send, THRESHOLD, 1).await.unwrap());
    assert_eq!([first, second].concat(), [a.id, b.id]);
    assert_eq!(s.flag_overdue(Wait::Send, THRESHOLD, 1).await.unwrap(), []);
    // A claim taken before the flag still holds: the SENT mark matches.
    let mark = trustmsg::store::SentMark {
        id: a.id,
        version: a.version,
        partition: 0,
        offset: 1,
        order: None,
    };
    assert_eq!(s.mark_sent(&[mark]).await.unwrap(), 1);
}

/// Waits out the threshold for what was arranged or changed just before.
async fn wait_past_threshold() {
    tokio::time::sleep(THRESHOLD + Duration::from_millis(300)).await;
}

pub(crate) async fn a_message_alerted_verify_overdue_is_alerted_send_overdue_after_its_commit(
    s: &DynStore,
) {
    let s = s.as_ref();
    let m = arrange_key(s, "late", State::Prepared, Due::Later)
        .await
        .unwrap();
    wait_past_threshold().await;
    let flagged = s
        .flag_overdue(Wait::Decision, THRESHOLD, 100)
        .await
        .unwrap();
    assert_eq!(ids(&flagged), [m.id]);
    decided(decide_key(s, "late", true, producer(), LATER).await);
    assert_eq!(
        s.flag_overdue(Wait::Send, THRESHOLD, 100).await.unwrap(),
        [],
        "its send has only just begun to wait"
    );
    wait_past_threshold().await;
    let flagged = s.flag_overdue(Wait::Send, THRESHOLD, 100).await.unwrap();
    assert_eq!(ids(&flagged), [m.id], "the send's own alert");
    assert_eq!(
        s.flag_overdue(Wait::Send, THRESHOLD, 100).await.unwrap(),
        []
    );
}

pub(crate) async fn a_redelivered_message_is_alerted_send_overdue_again_counted_from_the_redeliver(
    s: &DynStore,
) {
    let s = s.as_ref();
    let operator = Actor::Operator("alice".into());
    let m = arrange_key(s, "stuck", State::SendPending, Due::Later)
        .await
        .unwrap();
    wait_past_threshold().await;
    assert_eq!(
        ids(&s.flag_overdue(Wait::Send, THRESHOLD, 100).await.unwrap()),
        [m.id]
    );
    let failed = s
        .mark_send_failed(m.id, m.version, "topic missing", &Actor::Forwarder)
        .await
        .unwrap()
        .unwrap();
    let again = s
        .redeliver(failed.id, failed.version, &operator, "topic created")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        s.flag_overdue(Wait::Send, THRESHOLD, 100).await.unwrap(),
        [],
        "the wait starts again at the redeliver, not at the commit"
    );
    wait_past_threshold().await;
    let flagged = s.flag_overdue(Wait::Send, THRESHOLD, 100).await.unwrap();
    assert_eq!(ids(&flagged), [m.id], "alerted again");
    assert!(
        flagged[0].since > m.decided_at,
        "since the redeliver: {:?}",
        flagged[0].since
    );
    assert_eq!(
        s.flag_overdue(Wait::Send, THRESHOLD, 100).await.unwrap(),
        []
    );
    assert_eq!(
        s.find_message_by_id(m.id).await.unwrap().unwrap().version,
        again.version,
        "flagging leaves the version"
    );
}

pub(crate) async fn a_re_verified_message_is_alerted_verify_overdue_again_counted_from_the_re_verify(
    s: &DynStore,
) {
    let s = s.as_ref();
    let operator = Actor::Operator("alice".into());
    let m = arrange_key(s, "undecided", State::Prepared, Due::Later)
        .await
        .unwrap();
    wait_past_threshold().await;
    assert_eq!(
        ids(&s
            .flag_overdue(Wait::Decision, THRESHOLD, 100)
            .await
            .unwrap()),
        [m.id]
    );
    let failed = s.transition(&verify_failed(&m)).await.unwrap().unwrap();
    let reverify = Transition {
        id: failed.id,
        from: MessageStatus::VerifyFailed,
        version: failed.version,
        to: MessageStatus::Prepared,
        send_lease: Duration::ZERO,
        verify_attempt: false,
        error: None,
        actor: operator,
        reason: "endpoint fixed".into(),
    };
    s.transition(&reverify).await.unwrap().unwrap();
    assert_eq!(
        s.flag_overdue(Wait::Decision, THRESHOLD, 100)
            .await
            .unwrap(),
        [],
        "the wait starts again at the re-verify, not at the prepare"
    );
    wait_past_threshold().await;
    let flagged = s
        .flag_overdue(Wait::Decision, THRESHOLD, 100)
        .await
        .unwrap();
    assert_eq!(ids(&flagged), [m.id], "alerted again");
    assert!(
        flagged[0].since > Some(m.created_at),
        "{:?}",
        flagged[0].since
    );
}
