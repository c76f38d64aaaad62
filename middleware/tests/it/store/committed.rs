//! Messages created COMMITTED in one step (the outbox relay's rows, which
//! their producers' own transactions decided): due as a commit makes them,
//! audited once as decided by that transaction, in order per key, and all
//! or nothing: a key that exists already writes nothing and says so.

use std::time::Duration;

use chrono::Utc;
use trustmsg::store::{self, Actor, Delivery, DynStore, Inserted, Message, NewCommitted};
use trustmsg_verify_api::{MessageStatus, SendStatus};

use super::harness::{audit_lines, new_message, BIZ};

const LEASE: Duration = Duration::from_secs(60);

fn committed(key: &str) -> NewCommitted {
    NewCommitted {
        message: new_message(key, Duration::from_secs(3600)),
        actor: Actor::Outbox,
        reason: format!("row of {key}, relayed"),
    }
}

fn ordered(key: &str, record_key: &str) -> NewCommitted {
    let mut c = committed(key);
    c.message.key = Some(record_key.into());
    c.message.order_key = Some(store::order_key(BIZ, &c.message.topic, record_key));
    c
}

async fn create(s: &DynStore, batch: &[NewCommitted]) -> Vec<Message> {
    s.insert_committed_batch(batch, LEASE)
        .await
        .unwrap()
        .expect("a batch of new keys is created in one step")
}

pub(crate) async fn a_committed_batch_is_created_due_at_once_claimed_and_audited_once(
    s: &DynStore,
) {
    let before = s.now().await.unwrap();
    let batch = [committed("c1"), committed("c2"), committed("c3")];
    let created = create(s, &batch).await;
    assert_eq!(created.len(), 3);
    for (m, c) in created.iter().zip(&batch) {
        assert_eq!(m.message_key, c.message.message_key);
        assert_eq!(m.status, MessageStatus::Committed);
        assert_eq!(m.send_status, Some(SendStatus::Pending));
        assert_eq!(m.payload, c.message.payload);
        assert_eq!(m.headers, c.message.headers);
        assert_eq!(m.next_verify_at, None, "nothing to check back");
        let decided = m.decided_at.expect("decided when created");
        assert!(decided >= before, "{decided} before {before}");
        // Claimed for this instance's forwarder, as a commit claims it.
        let due = m.next_send_at.expect("due");
        assert_eq!(due, decided + chrono::Duration::from_std(LEASE).unwrap());
        assert!(!m.scheduled_by_commit());
        // What was returned is what is stored.
        let stored = s.find_message_by_id(m.id).await.unwrap();
        assert_eq!(stored.as_ref(), Some(m));
        assert_eq!(
            audit_lines(s.as_ref(), m.id).await,
            vec!["outbox commit -=>COMMITTED send -=>PENDING".to_string()],
        );
        let trail = s.audit_trail(m.id).await.unwrap();
        assert_eq!(trail[0].reason, c.reason);
    }
    // Claimed: no sweeper takes them before the lease runs out.
    let claimed = s
        .claim_due_sends(100, crate::store::harness::ROOM, LEASE)
        .await
        .unwrap();
    assert!(claimed.messages.is_empty(), "{:?}", claimed.messages);
}

pub(crate) async fn a_committed_batch_with_a_key_that_exists_writes_nothing(s: &DynStore) {
    let existing = match s
        .insert_prepared(&new_message("c2", Duration::from_secs(3600)))
        .await
        .unwrap()
    {
        Inserted::Created(m) => m,
        other => panic!("{other:?}"),
    };
    let batch = [committed("c1"), committed("c2")];
    assert_eq!(s.insert_committed_batch(&batch, LEASE).await.unwrap(), None);
    assert_eq!(s.find_message(BIZ, "c1").await.unwrap(), None, "c1 written");
    assert_eq!(
        s.find_message(BIZ, "c2").await.unwrap(),
        Some(existing),
        "the prepared row changed"
    );
    // A key twice in one batch: nothing either.
    let twice = [committed("c3"), committed("c3")];
    assert_eq!(s.insert_committed_batch(&twice, LEASE).await.unwrap(), None);
    assert_eq!(s.find_message(BIZ, "c3").await.unwrap(), None);
}

pub(crate) async fn committed_rows_of_an_ordered_key_take_their_seqs_in_batch_order(s: &DynStore) {
    let created = create(
        s,
        &[ordered("a1", "a"), ordered("b1", "b"), ordered("a2", "a")],
    )
    .await;
    let seqs: Vec<(String, Option<u64>, bool)> = created
        .iter()
        .map(|m| (m.message_key.clone(), m.order_seq, m.next_send_at.is_some()))
        .collect();
    assert_eq!(
        seqs,
        vec![
            ("a1".to_string(), Some(1), true),
            ("b1".to_string(), Some(1), true),
            ("a2".to_string(), Some(2), false),
        ],
        "each key's head due, the rest behind it"
    );
    for m in &created {
        assert_eq!(s.find_message_by_id(m.id).await.unwrap().as_ref(), Some(m));
    }
    // A later commit of key a comes after them.
    let later = create(s, &[ordered("a3", "a")]).await;
    assert_eq!(later[0].order_seq, Some(3));
    assert_eq!(later[0].next_send_at, None);
}

pub(crate) async fn a_committed_row_with_a_delivery_time_is_due_then_and_claimed_by_nobody(
    s: &DynStore,
) {
    let at = Utc::now() + chrono::Duration::seconds(600);
    let at = at - chrono::Duration::nanoseconds(i64::from(at.timestamp_subsec_nanos() % 1_000_000));
    let mut later = committed("later");
    later.message.deliver = Some(Delivery::At(at));
    let created = create(s, &[later, committed("now")]).await;
    assert_eq!(created[0].deliver_at, Some(at));
    assert_eq!(created[0].next_send_at, Some(at));
    assert!(created[0].scheduled_by_commit());
    assert_ne!(created[1].next_send_at, Some(at));
    assert!(!created[1].scheduled_by_commit());
}
