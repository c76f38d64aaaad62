//! The producer registry: create, find, update (keeping token and secret,
//! replacing the topic allow-list), delete, and token rotation.

use std::time::Duration;

use trustmsg::store::{DynStore, ProducerRecord};

pub(crate) fn producer_record(biz_id: &str) -> ProducerRecord {
    ProducerRecord {
        biz_id: biz_id.into(),
        verify_url: "http://127.0.0.1:9000/check".into(),
        verify_timeout_ms: 3_000,
        first_verify_after_ms: 30_000,
        max_verify_attempts: 15,
        token_hash: vec![1; 32],
        signing_secret: "whsec_first".into(),
        topics: Some(vec!["orders".into(), "shop.*".into()]),
        ordered: false,
    }
}

pub(crate) async fn producers_can_be_created_found_updated_and_deleted(s: &DynStore) {
    let s = s.as_ref();
    assert_eq!(s.find_producer("billing").await.unwrap(), None);
    let t0 = s.now().await.unwrap();
    let created = s
        .upsert_producer(&producer_record("billing"))
        .await
        .unwrap();
    let t1 = s.now().await.unwrap();
    assert_eq!(created.biz_id, "billing");
    assert_eq!(created.verify_url, "http://127.0.0.1:9000/check");
    assert_eq!(
        (
            created.verify_timeout_ms,
            created.first_verify_after_ms,
            created.max_verify_attempts
        ),
        (3_000, 30_000, 15)
    );
    assert_eq!(created.token_hash, vec![1; 32]);
    assert_eq!(created.signing_secret, "whsec_first");
    assert_eq!(
        created.topics,
        Some(vec!["orders".to_string(), "shop.*".to_string()])
    );
    assert!(t0 <= created.created_at && created.created_at <= t1);
    assert_eq!(created.updated_at, created.created_at);
    assert_eq!(
        s.find_producer("billing").await.unwrap(),
        Some(created.clone())
    );
    for other in ["Billing", "billing "] {
        assert_eq!(
            s.find_producer(other).await.unwrap(),
            None,
            "{other:?} is another biz_id"
        );
    }

    tokio::time::sleep(Duration::from_millis(5)).await;
    let update = ProducerRecord {
        verify_url: "http://127.0.0.1:9001/v2/check".into(),
        verify_timeout_ms: 1_000,
        first_verify_after_ms: 5_000,
        max_verify_attempts: 3,
        token_hash: vec![2; 32],
        signing_secret: "whsec_second".into(),
        topics: Some(vec!["*".into()]),
        ..producer_record("billing")
    };
    let updated = s.upsert_producer(&update).await.unwrap();
    assert_eq!(updated.verify_url, "http://127.0.0.1:9001/v2/check");
    assert_eq!(
        (
            updated.verify_timeout_ms,
            updated.first_verify_after_ms,
            updated.max_verify_attempts
        ),
        (1_000, 5_000, 3)
    );
    assert_eq!(
        updated.topics,
        Some(vec!["*".to_string()]),
        "an update replaces the list"
    );
    assert_eq!(
        (updated.token_hash.clone(), updated.signing_secret.as_str()),
        (vec![1; 32], "whsec_first"),
        "an update keeps the token and the signing secret"
    );
    assert_eq!(updated.created_at, created.created_at);
    assert!(updated.updated_at > created.updated_at);
    assert_eq!(s.find_producer("billing").await.unwrap(), Some(updated));
    let unlisted = s
        .upsert_producer(&ProducerRecord {
            topics: None,
            ..update
        })
        .await
        .unwrap();
    assert_eq!(unlisted.topics, None, "an update without a list removes it");
    assert_eq!(s.find_producer("billing").await.unwrap(), Some(unlisted));

    assert!(s.delete_producer("billing").await.unwrap());
    assert_eq!(s.find_producer("billing").await.unwrap(), None);
    assert!(!s.delete_producer("billing").await.unwrap());
}

pub(crate) async fn set_producer_token_replaces_the_hash_of_an_existing_producer_only(
    s: &DynStore,
) {
    let s = s.as_ref();
    assert!(!s.set_producer_token("nobody", &[9; 32]).await.unwrap());
    assert_eq!(s.find_producer("nobody").await.unwrap(), None);
    let created = s
        .upsert_producer(&producer_record("billing"))
        .await
        .unwrap();
    let other = s
        .upsert_producer(&producer_record("payments"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(s.set_producer_token("billing", &[9; 32]).await.unwrap());
    let now = s.find_producer("billing").await.unwrap().unwrap();
    assert_eq!(now.token_hash, vec![9; 32]);
    assert_eq!(now.signing_secret, created.signing_secret);
    assert!(now.updated_at > created.updated_at);
    assert_eq!(s.find_producer("payments").await.unwrap(), Some(other));
}
