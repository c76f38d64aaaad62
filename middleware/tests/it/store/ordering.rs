//! In order per key: a key's commits take gap-free seqs in commit order,
//! only the key's head is due, its SENT mark makes the next one due, a
//! SEND_FAILED head holds its key back (alerted once) until it is skipped.

use std::time::Duration;

use trustmsg::store::{
    self, Actor, AlertFilter, DynStore, Inserted, Message, SentMark, Transition,
};
use trustmsg_verify_api::admin::{AlertKind, AlertView};
use trustmsg_verify_api::SendStatus;

use super::harness::{batched_commit, decide_key, decided, new_message, producer, BIZ};

/// A short lease: the test claims what is due, not what a commit claimed.
const LEASE: Duration = Duration::ZERO;

async fn prepare_ordered(s: &DynStore, message_key: &str, record_key: &str) -> Message {
    let mut m = new_message(message_key, Duration::from_secs(3600));
    m.key = Some(record_key.into());
    m.order_key = Some(store::order_key(BIZ, &m.topic, record_key));
    match s.insert_prepared(&m).await.unwrap() {
        Inserted::Created(m) => m,
        other => panic!("{other:?}"),
    }
}

async fn commit_ordered(s: &DynStore, message_key: &str, record_key: &str) -> Message {
    prepare_ordered(s, message_key, record_key).await;
    decided(decide_key(s.as_ref(), message_key, true, producer(), LEASE).await)
}

/// The ids the sweeper may claim now, claiming them.
async fn due(s: &DynStore) -> Vec<Message> {
    let mut claimed = s
        .claim_due_sends(100, crate::store::harness::ROOM, Duration::from_secs(60))
        .await
        .unwrap()
        .messages;
    claimed.sort_by_key(|m| m.id);
    claimed
}

/// The key-blocked alerts raised about the message `id`.
async fn key_blocked_alerts(s: &DynStore, id: u64) -> Vec<AlertView> {
    let filter = AlertFilter {
        message_id: Some(id),
        ..AlertFilter::default()
    };
    let alerts = s.list_alerts(filter, 100, None).await.unwrap();
    alerts
        .into_iter()
        .filter(|a| a.kind == AlertKind::KeyBlocked)
        .collect()
}

fn sent(m: &Message) -> SentMark {
    SentMark {
        id: m.id,
        version: m.version,
        partition: 0,
        offset: 1,
        order: m.order_pos(),
    }
}

pub(crate) async fn an_ordered_keys_commits_are_sent_one_after_the_other_in_commit_order(
    s: &DynStore,
) {
    let a1 = commit_ordered(s, "a1", "a").await;
    let a2 = commit_ordered(s, "a2", "a").await;
    let a3 = commit_ordered(s, "a3", "a").await;
    let b1 = commit_ordered(s, "b1", "b").await;
    assert_eq!(
        [a1.order_seq, a2.order_seq, a3.order_seq, b1.order_seq],
        [Some(1), Some(2), Some(3), Some(1)]
    );
    // A waiting commit took no claim (the forwarder is not handed it).
    assert!(a1.next_send_at.is_some() && b1.next_send_at.is_some());
    assert_eq!((a2.next_send_at, a3.next_send_at), (None, None));
    assert_eq!(s.blocked_by(&a3).await.unwrap(), Some(a1.id));
    assert_eq!(s.blocked_by(&a1).await.unwrap(), None);

    let heads = due(s).await;
    assert_eq!(
        heads.iter().map(|m| m.id).collect::<Vec<_>>(),
        [a1.id, b1.id]
    );
    assert_eq!(
        s.mark_sent(&[sent(&heads[0]), sent(&heads[1])])
            .await
            .unwrap(),
        2
    );
    let next = due(s).await;
    assert_eq!(next.iter().map(|m| m.id).collect::<Vec<_>>(), [a2.id]);
    assert_eq!(s.blocked_by(&a3).await.unwrap(), Some(a2.id));
    assert_eq!(s.mark_sent(&[sent(&next[0])]).await.unwrap(), 1);
    let last = due(s).await;
    assert_eq!(last.iter().map(|m| m.id).collect::<Vec<_>>(), [a3.id]);
    assert_eq!(s.mark_sent(&[sent(&last[0])]).await.unwrap(), 1);
    assert!(due(s).await.is_empty());

    // A key all sent: its next commit is the head at once.
    let a4 = commit_ordered(s, "a4", "a").await;
    assert_eq!(a4.order_seq, Some(4));
    assert!(a4.next_send_at.is_some());
}

pub(crate) async fn a_send_failed_head_blocks_its_key_alerts_once_and_a_skip_releases_it(
    s: &DynStore,
) {
    let a1 = commit_ordered(s, "a1", "a").await;
    let head = due(s).await.pop().unwrap();
    let failed = s
        .mark_send_failed(head.id, head.version, "record too large", &Actor::Forwarder)
        .await
        .unwrap()
        .unwrap();
    let key_blocked = async || key_blocked_alerts(s, a1.id).await.len();
    assert_eq!(key_blocked().await, 0, "nothing waits yet");
    let a2 = commit_ordered(s, "a2", "a").await;
    let a3 = commit_ordered(s, "a3", "a").await;
    let b1 = commit_ordered(s, "b1", "b").await;
    assert_eq!(key_blocked().await, 1, "the first to wait raised it, once");
    assert_eq!(
        due(s).await.iter().map(|m| m.id).collect::<Vec<_>>(),
        [b1.id],
        "only the other key goes"
    );
    assert_eq!(s.blocked_by(&a3).await.unwrap(), Some(a1.id));

    let skipped = s
        .skip_blocked(&failed, &Actor::Operator("alice".into()), "dropped")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(skipped.send_status, Some(SendStatus::SendFailed));
    assert_eq!(skipped.order_pos(), None, "out of its key's order");
    assert!(s
        .skip_blocked(&skipped, &Actor::Operator("alice".into()), "again")
        .await
        .unwrap()
        .is_none());
    let next = due(s).await;
    assert_eq!(next.iter().map(|m| m.id).collect::<Vec<_>>(), [a2.id]);
    assert_eq!(s.blocked_by(&a3).await.unwrap(), Some(a2.id));
    let audit = s.audit_trail(a1.id).await.unwrap();
    assert!(audit.iter().any(|e| e.action == "skip"), "{audit:?}");
    assert_eq!(key_blocked().await, 1);
}

pub(crate) async fn a_head_that_fails_with_messages_behind_it_alerts_once(s: &DynStore) {
    let a1 = commit_ordered(s, "a1", "a").await;
    commit_ordered(s, "a2", "a").await;
    commit_ordered(s, "a3", "a").await;
    let head = due(s).await.pop().unwrap();
    assert_eq!(head.id, a1.id);
    s.mark_send_failed(head.id, head.version, "record too large", &Actor::Forwarder)
        .await
        .unwrap()
        .unwrap();
    commit_ordered(s, "a4", "a").await;
    let alerts = key_blocked_alerts(s, a1.id).await;
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert!(
        alerts[0].last_error.contains("2 later message(s)"),
        "{alerts:?}"
    );
}

pub(crate) async fn a_commit_batch_gives_a_keys_rows_their_seqs_in_batch_order(s: &DynStore) {
    // Keys interleaved, so the batch's key order is not its own order.
    let rows = [
        prepare_ordered(s, "b1", "b").await,
        prepare_ordered(s, "a1", "a").await,
        prepare_ordered(s, "b2", "b").await,
        prepare_ordered(s, "a2", "a").await,
        prepare_ordered(s, "b3", "b").await,
    ];
    let ts: Vec<Transition> = rows.iter().map(batched_commit).collect();
    let seen: Vec<&Message> = rows.iter().collect();
    let results = s.transition_batch_seen(&ts, &seen).await.unwrap();
    let got: Vec<(u64, Option<u64>, bool)> = results
        .iter()
        .map(|m| {
            let m = m.as_ref().expect("guard held");
            (m.id, m.order_seq, m.next_send_at.is_some())
        })
        .collect();
    let want: Vec<(u64, Option<u64>, bool)> = rows
        .iter()
        .zip([(1, true), (1, true), (2, false), (2, false), (3, false)])
        .map(|(m, (seq, due))| (m.id, Some(seq), due))
        .collect();
    assert_eq!(got, want);
    for (m, result) in rows.iter().zip(&results) {
        let stored = s.find_message_by_id(m.id).await.unwrap().unwrap();
        assert_eq!(
            Some(&stored),
            result.as_ref(),
            "the result is the row as stored"
        );
    }
}

pub(crate) async fn a_batch_of_sent_marks_moves_each_key_on_once(s: &DynStore) {
    let mut firsts = Vec::new();
    let mut seconds = Vec::new();
    for key in ["a", "b", "c", "d"] {
        firsts.push(commit_ordered(s, &format!("{key}1"), key).await.id);
        seconds.push(commit_ordered(s, &format!("{key}2"), key).await.id);
    }
    let heads = due(s).await;
    assert_eq!(heads.iter().map(|m| m.id).collect::<Vec<_>>(), firsts);
    // Three current marks and a stale one (an older claim of the fourth
    // head): the fourth key must not move.
    let mut marks: Vec<SentMark> = heads[..3].iter().map(sent).collect();
    let mut stale = sent(&heads[3]);
    stale.version -= 1;
    marks.push(stale);
    assert_eq!(s.mark_sent(&marks).await.unwrap(), 3);
    let next = due(s).await;
    assert_eq!(
        next.iter().map(|m| m.id).collect::<Vec<_>>(),
        seconds[..3].to_vec(),
        "each moved key's next message is due, the stale mark's key is not moved"
    );
    // The same marks again (a retried batch) change nothing.
    assert_eq!(s.mark_sent(&marks).await.unwrap(), 0);
    assert!(due(s).await.is_empty());
    let fourth = s.find_message_by_id(seconds[3]).await.unwrap().unwrap();
    assert_eq!(s.blocked_by(&fourth).await.unwrap(), Some(firsts[3]));
}
