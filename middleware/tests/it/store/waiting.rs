//! Submitted commits waiting for their prepare (the Kafka way in,
//! `submit_waiting`): parked once per message (a replayed record changes
//! nothing), claimed by one caller at a time for a lease, retried later
//! with an attempt counted, listed and counted for operators, and gone once
//! settled.

use std::time::Duration;

use trustmsg::store::{DynStore, NewWaitingCommit};

fn waiting(key: &str, wait: Duration) -> NewWaitingCommit {
    NewWaitingCommit {
        biz_id: "shop".into(),
        message_key: key.into(),
        partition: 2,
        offset: 41,
        record_key: Some(vec![0, 255, b'k']),
        headers: vec![
            ("trustmsg-op".into(), "commit".into()),
            ("x-é".into(), "ü=\"quoted\"".into()),
        ],
        wait,
    }
}

pub(crate) async fn a_waiting_commit_is_parked_once_claimed_by_one_retried_and_settled(
    s: &DynStore,
) {
    let s = s.as_ref();
    let w = waiting("early", Duration::from_secs(300));
    assert!(s.park_commit(&w).await.unwrap(), "parked");
    assert!(
        !s.park_commit(&w).await.unwrap(),
        "a replay changes nothing"
    );
    assert!(s
        .park_commit(&waiting("other", Duration::ZERO))
        .await
        .unwrap());
    assert_eq!(s.count_waiting_commits().await.unwrap(), 2);

    let listed = s.list_waiting_commits(10, 0).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed[0].id < listed[1].id, "by id");
    let first = listed.iter().find(|w| w.message_key == "early").unwrap();
    assert_eq!(first.biz_id, "shop");
    assert_eq!((first.partition, first.offset, first.attempts), (2, 41, 0));
    assert_eq!(first.record_key, w.record_key, "the key byte for byte");
    assert_eq!(first.headers, w.headers, "the headers as submitted");
    assert_eq!(
        first.give_up_at - first.received_at,
        chrono::TimeDelta::seconds(300),
        "its bound counts from when it was read, by the database clock"
    );
    let after: Vec<u64> = s
        .list_waiting_commits(10, listed[0].id)
        .await
        .unwrap()
        .iter()
        .map(|w| w.id)
        .collect();
    assert_eq!(after, [listed[1].id], "pages after an id");

    let claimed = s
        .claim_waiting_commits(10, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2, "both due at once");
    let other = claimed.iter().find(|c| c.message_key == "other").unwrap();
    assert!(other.now >= other.give_up_at, "`other` has run out of time");
    let early = claimed.iter().find(|c| c.message_key == "early").unwrap();
    assert!(early.now < early.give_up_at);
    assert!(
        s.claim_waiting_commits(10, Duration::from_secs(60))
            .await
            .unwrap()
            .is_empty(),
        "claimed for the lease: nobody else takes them"
    );

    assert!(s
        .retry_waiting_commit(early.id, Duration::ZERO)
        .await
        .unwrap());
    let again = s
        .claim_waiting_commits(10, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(again.len(), 1, "due again after its delay");
    assert_eq!((again[0].id, again[0].attempts), (early.id, 1));

    assert!(s.unpark_commit(other.id).await.unwrap());
    assert!(!s.unpark_commit(other.id).await.unwrap(), "already gone");
    assert_eq!(s.count_waiting_commits().await.unwrap(), 1);
    assert!(
        s.park_commit(&waiting("other", Duration::ZERO))
            .await
            .unwrap(),
        "settled keys can wait again"
    );
}
