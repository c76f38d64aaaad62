//! Prepare: a new key creates a PREPARED row; a repeated key returns the
//! row already there, whatever its state, so the API can tell an idempotent
//! repeat (same digest) from a conflict (another digest). Keys are unique
//! byte for byte.

use std::collections::BTreeSet;
use std::time::Duration;

use trustmsg::store::{DynStore, Inserted};
use trustmsg_verify_api::MessageStatus;

use crate::store::harness::*;

pub(crate) async fn prepare_of_a_new_key_creates_a_prepared_row_due_after_the_first_check_delay(
    s: &DynStore,
) {
    let s = s.as_ref();
    let new = new_message("order-17", Duration::from_secs(30));
    let Inserted::Created(m) = s.insert_prepared(&new).await.unwrap() else {
        panic!("a new key must create a row");
    };
    assert_eq!(m.biz_id, BIZ);
    assert_eq!(m.message_key, "order-17");
    assert_eq!(m.topic.as_deref(), Some("orders"));
    assert_eq!(m.key.as_deref(), Some("order-1"));
    assert_eq!(m.payload, new.payload);
    assert_eq!(m.headers, new.headers);
    assert_eq!(m.content_digest, Some(new.digest()));
    assert_eq!(m.status, MessageStatus::Prepared);
    assert_eq!(m.send_status, None);
    assert!(!m.tombstone);
    assert_eq!(m.version, 0);
    assert_eq!((m.verify_attempts, m.send_attempts), (0, 0));
    assert_eq!(m.last_error, None);
    assert_eq!(
        m.next_verify_at,
        Some(m.created_at + chrono::Duration::seconds(30))
    );
    assert_eq!(m.next_send_at, None);
    assert_eq!(m.updated_at, m.created_at);
    assert_eq!((m.decided_at, m.sent_at), (None, None));
    assert_eq!((m.kafka_partition, m.kafka_offset), (None, None));
    assert_eq!(
        s.find_message(BIZ, "order-17").await.unwrap().as_ref(),
        Some(&m)
    );
    assert_eq!(s.find_message_by_id(m.id).await.unwrap().as_ref(), Some(&m));
    assert!(
        s.audit_trail(m.id).await.unwrap().is_empty(),
        "a prepare is not a decision and writes no audit row"
    );
}

pub(crate) async fn prepare_again_with_the_same_content_returns_the_stored_row_unchanged_in_every_state(
    s: &DynStore,
) {
    let s = s.as_ref();
    for state in STATES.into_iter().filter(|st| *st != State::Missing) {
        let before = arrange(s, state, Due::Later).await;
        let audit = audit_len(s, &before).await;
        let again = new_message(&key_of(state), Duration::ZERO);
        let got = s.insert_prepared(&again).await.unwrap();
        assert_eq!(
            got,
            Inserted::Existing(before.clone().unwrap()),
            "{state:?}"
        );
        let digest = before.as_ref().unwrap().content_digest.clone();
        if state == State::Tombstone {
            assert_eq!(digest, None, "a tombstone has no content to match");
        } else {
            assert_eq!(digest, Some(again.digest()), "{state:?}: same content");
        }
        assert_untouched(s, state, &before, audit).await;
    }
}

pub(crate) async fn prepare_again_with_different_content_returns_the_stored_row_with_another_digest_in_every_state(
    s: &DynStore,
) {
    let s = s.as_ref();
    for state in STATES.into_iter().filter(|st| *st != State::Missing) {
        let before = arrange(s, state, Due::Later).await;
        let audit = audit_len(s, &before).await;
        let mut other = new_message(&key_of(state), Duration::ZERO);
        other.payload = b"{\"amount\":43}".to_vec();
        let got = s.insert_prepared(&other).await.unwrap();
        assert_eq!(
            got,
            Inserted::Existing(before.clone().unwrap()),
            "{state:?}"
        );
        assert_ne!(
            before.as_ref().unwrap().content_digest,
            Some(other.digest()),
            "{state:?}: different content must not look identical"
        );
        assert_untouched(s, state, &before, audit).await;
    }
}

pub(crate) async fn message_keys_are_unique_byte_for_byte(s: &DynStore) {
    let s = s.as_ref();
    // Case, trailing space and Unicode normalisation all make different keys.
    let keys = ["k", "K", "k ", " k", "caf\u{e9}", "cafe\u{301}"];
    let mut ids = BTreeSet::new();
    for key in keys {
        let Inserted::Created(m) = s.insert_prepared(&new_message(key, LATER)).await.unwrap()
        else {
            panic!("{key:?} collided with another key");
        };
        assert_eq!(m.message_key, key);
        ids.insert(m.id);
    }
    assert_eq!(ids.len(), keys.len());
    for key in keys {
        let found = s.find_message(BIZ, key).await.unwrap().unwrap();
        assert_eq!(found.message_key, key, "lookup of {key:?}");
    }
    for biz in ["Shop", "shop "] {
        let mut other_biz = new_message("k", LATER);
        other_biz.biz_id = biz.into();
        assert!(
            matches!(
                s.insert_prepared(&other_biz).await.unwrap(),
                Inserted::Created(_)
            ),
            "biz_id {biz:?} collided with {BIZ:?}"
        );
    }
    assert!(matches!(
        s.insert_prepared(&new_message("k", LATER)).await.unwrap(),
        Inserted::Existing(m) if m.message_key == "k" && m.biz_id == BIZ
    ));
}

pub(crate) async fn a_traced_prepare_keeps_its_trace_context_and_its_alert_copies_the_trace_id(
    s: &DynStore,
) {
    let s = s.as_ref();
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let traced = |key: &str| trustmsg::store::NewMessage {
        traceparent: Some(tp.into()),
        tracestate: Some("shop=1,rojo=2".into()),
        ..new_message(key, Duration::from_secs(30))
    };
    let Inserted::Created(m) = s.insert_prepared(&traced("traced-1")).await.unwrap() else {
        panic!("a new key must create a row");
    };
    assert_eq!(m.traceparent.as_deref(), Some(tp));
    assert_eq!(m.tracestate.as_deref(), Some("shop=1,rojo=2"));
    assert_eq!(
        m.view().trace_id.as_deref(),
        Some("4bf92f3577b34da6a3ce929d0e0e4736")
    );
    // The batched path stores it too; an untraced row stores none.
    let batch = [traced("traced-2"), new_message("plain", Duration::ZERO)];
    let rows = s.insert_prepared_batch(&batch).await.unwrap();
    let rows: Vec<_> = rows
        .into_iter()
        .map(|r| match r {
            Inserted::Created(m) => m,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(rows[0].traceparent.as_deref(), Some(tp));
    assert_eq!(
        (rows[1].traceparent.clone(), rows[1].tracestate.clone()),
        (None, None)
    );
    assert_eq!(rows[1].view().trace_id, None);
    // Its alert carries the trace id; an untraced message's none.
    s.transition(&verify_failed(&m)).await.unwrap().unwrap();
    s.transition(&verify_failed(&rows[1]))
        .await
        .unwrap()
        .unwrap();
    let alerts = s
        .list_alerts(trustmsg::store::AlertFilter::default(), 10, None)
        .await
        .unwrap();
    let of = |id: u64| alerts.iter().find(|a| a.message_id == id).unwrap();
    assert_eq!(
        of(m.id).trace_id.as_deref(),
        Some("4bf92f3577b34da6a3ce929d0e0e4736")
    );
    assert_eq!(of(rows[1].id).trace_id, None);
}
