//! The client against the real trustmsg service, booted in-process.

use trustmsg_client::{Error, Message, MessageStatus, Producer};
use trustmsg_tests::{fast_retry, TestApp, UNREACHABLE_VERIFY_URL};

fn order(key: &str) -> Message {
    Message::new(key, "orders", r#"{"amount":42}"#)
        .key("customer-7")
        .header("content-type", "application/json")
}

#[tokio::test]
async fn prepare_commit_and_get_round_trip_and_repeat_idempotently() {
    let svc = TestApp::spawn(&[]).await;
    let p = svc.producer("shop").await;

    let prepared = p.prepare(&order("o-1")).await.unwrap();
    assert_eq!(prepared.status, MessageStatus::Prepared);
    assert_eq!(prepared.biz_id, "shop");
    assert_eq!(prepared.message_key, "o-1");
    assert_eq!(prepared.topic.as_deref(), Some("orders"));
    assert_eq!(prepared.key.as_deref(), Some("customer-7"));

    let again = p.prepare(&order("o-1")).await.unwrap();
    assert_eq!(again.id, prepared.id, "identical prepare is idempotent");

    let committed = p.commit("o-1").await.unwrap();
    assert_eq!(committed.id, prepared.id);
    assert_eq!(committed.status, MessageStatus::Committed);
    assert_eq!(
        p.commit("o-1").await.unwrap().status,
        MessageStatus::Committed
    );

    let got = p.get("o-1").await.unwrap();
    assert_eq!(got.id, prepared.id);
    assert_eq!(got.status, MessageStatus::Committed);
    svc.finish().await;
}

#[tokio::test]
async fn rollback_then_commit_is_a_conflict_carrying_the_server_code() {
    let svc = TestApp::spawn(&[]).await;
    let p = svc.producer("shop").await;
    p.prepare(&order("o-2")).await.unwrap();
    assert_eq!(
        p.rollback("o-2").await.unwrap().status,
        MessageStatus::RolledBack
    );

    let err = p.commit("o-2").await.unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    assert_eq!(err.code(), Some("already_rolled_back"));
    assert_eq!(err.status(), Some(409));
    assert_eq!(
        p.get("o-2").await.unwrap().status,
        MessageStatus::RolledBack
    );
    svc.finish().await;
}

#[tokio::test]
async fn commit_then_rollback_is_a_conflict() {
    let svc = TestApp::spawn(&[]).await;
    let p = svc.producer("shop").await;
    p.prepare(&order("o-3")).await.unwrap();
    p.commit("o-3").await.unwrap();
    let err = p.rollback("o-3").await.unwrap_err();
    assert!(
        matches!(err, Error::Conflict { ref code, .. } if code == "already_committed"),
        "{err:?}"
    );
    svc.finish().await;
}

#[tokio::test]
async fn prepare_with_different_content_and_prepare_after_rollback_are_conflicts() {
    let svc = TestApp::spawn(&[]).await;
    let p = svc.producer("shop").await;
    p.prepare(&order("o-4")).await.unwrap();
    let err = p
        .prepare(&Message::new("o-4", "orders", "something else"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("prepare_conflict"), "{err:?}");

    // Rollback of an unknown key leaves a tombstone that refuses a late prepare.
    p.rollback("o-late").await.unwrap();
    let err = p.prepare(&order("o-late")).await.unwrap_err();
    assert!(
        matches!(err, Error::Conflict { ref code, .. } if code == "rolled_back"),
        "{err:?}"
    );
    svc.finish().await;
}

#[tokio::test]
async fn commit_and_get_of_an_unknown_message_are_not_found() {
    let svc = TestApp::spawn(&[]).await;
    let p = svc.producer("shop").await;
    let err = p.commit("never-prepared").await.unwrap_err();
    assert!(
        matches!(err, Error::NotFound { ref code, .. } if code == "message_not_found"),
        "{err:?}"
    );
    let err = p.get("never-prepared").await.unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err:?}");
    svc.finish().await;
}

#[tokio::test]
async fn keys_with_slashes_and_spaces_reach_the_right_message() {
    let svc = TestApp::spawn(&[]).await;
    let p = svc.producer("shop").await;
    let key = "order/42 ü?#";
    let prepared = p.prepare(&order(key)).await.unwrap();
    let got = p.get(key).await.unwrap();
    assert_eq!(got.id, prepared.id);
    assert_eq!(got.message_key, key);
    svc.finish().await;
}

#[tokio::test]
async fn bad_topic_is_invalid_400_and_oversized_payload_is_invalid_413() {
    let svc = TestApp::spawn(&["--max-payload-bytes", "16"]).await;
    let p = svc.producer("shop").await;
    let err = p
        .prepare(&Message::new("o-5", "bad topic!", "{}"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Invalid { status: 400, .. }), "{err:?}");
    assert!(!err.to_string().is_empty());

    let err = p
        .prepare(&Message::new("o-6", "orders", "x".repeat(17)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Invalid { status: 413, .. }), "{err:?}");
    assert!(matches!(p.get("o-6").await, Err(Error::NotFound { .. })));
    svc.finish().await;
}

#[tokio::test]
async fn wrong_token_is_unauthorized_and_another_producers_id_is_forbidden() {
    let svc = TestApp::spawn(&[]).await;
    let shop_token = svc.register("shop", UNREACHABLE_VERIFY_URL).await;
    svc.register("billing", UNREACHABLE_VERIFY_URL).await;

    let wrong = Producer::new(&svc.base_url(), "shop", "not-the-token")
        .unwrap()
        .with_retry(fast_retry(3));
    let err = wrong.prepare(&order("o-7")).await.unwrap_err();
    assert!(matches!(err, Error::Unauthorized { .. }), "{err:?}");

    // shop's token used for billing's messages.
    let trespasser = Producer::new(&svc.base_url(), "billing", shop_token)
        .unwrap()
        .with_retry(fast_retry(3));
    let err = trespasser.prepare(&order("o-8")).await.unwrap_err();
    assert!(matches!(err, Error::Forbidden { .. }), "{err:?}");
    let err = trespasser.commit("o-8").await.unwrap_err();
    assert!(matches!(err, Error::Forbidden { .. }), "{err:?}");
    svc.finish().await;
}

#[tokio::test]
async fn prepare_carries_an_explicit_trace_context_to_the_service() {
    let svc = TestApp::spawn(&[]).await;
    let p = svc.producer("shop").await;
    let traced = order("o-traced").trace_context(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        Some("shop=1"),
    );
    let view = p.prepare(&traced).await.unwrap();
    assert_eq!(
        view.trace_id.as_deref(),
        Some("4bf92f3577b34da6a3ce929d0e0e4736")
    );
    let plain = p.prepare(&order("o-plain")).await.unwrap();
    assert_eq!(plain.trace_id, None, "no trace context, none stored");
    svc.finish().await;
}
