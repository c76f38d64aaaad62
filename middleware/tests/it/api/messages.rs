use serde_json::{json, Value};

use trustmsg_tests::{decision_body, prepare_body, TestApp};

const VERIFY: &str = "http://127.0.0.1:9/check";

async fn audit_count(app: &TestApp, id: u64) -> usize {
    app.store().audit_trail(id).await.unwrap().len()
}

#[tokio::test]
async fn prepare_then_commit_is_committed_and_claimed_for_sending() {
    let app = TestApp::spawn(&[]).await;
    let token = app.register("orders", VERIFY).await;

    let (status, view) = app
        .prepare(Some(&token), &prepare_body("orders", "o-1"))
        .await;
    assert_eq!(status, 201, "{view}");
    assert_eq!(view["status"], "PREPARED");
    assert_eq!(view["send_status"], Value::Null);
    assert_eq!(view["topic"], "orders");
    assert_eq!(view["key"], "order-1");
    assert_eq!(view["payload_size"], 13);
    let id = view["id"].as_u64().unwrap();

    let (status, view) = app
        .commit(Some(&token), &decision_body("orders", "o-1"))
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["status"], "COMMITTED");
    assert_eq!(view["send_status"], "PENDING");
    assert!(
        view["next_send_at"].is_string(),
        "commit claims the row: {view}"
    );
    assert!(view["next_verify_at"].is_null());

    let (status, got) = app.get("/v1/messages/orders/o-1", Some(&token)).await;
    assert_eq!(status, 200);
    assert_eq!(got["status"], "COMMITTED");

    let trail = app.store().audit_trail(id).await.unwrap();
    assert_eq!(trail.len(), 1);
    assert_eq!(trail[0].actor, "producer:orders");
    assert_eq!(trail[0].from_status.as_deref(), Some("PREPARED"));
    assert_eq!(trail[0].to_status.as_deref(), Some("COMMITTED"));
    app.finish().await;
}

#[tokio::test]
async fn repeated_identical_prepare_is_idempotent() {
    let app = TestApp::spawn(&[]).await;
    let token = app.register("orders", VERIFY).await;
    let (s1, v1) = app
        .prepare(Some(&token), &prepare_body("orders", "o-1"))
        .await;
    let (s2, v2) = app
        .prepare(Some(&token), &prepare_body("orders", "o-1"))
        .await;
    assert_eq!((s1, s2), (201, 200));
    assert_eq!(v1, v2);
    app.finish().await;
}

#[tokio::test]
async fn prepare_with_different_content_is_a_conflict() {
    let app = TestApp::spawn(&[]).await;
    let token = app.register("orders", VERIFY).await;
    app.prepare(Some(&token), &prepare_body("orders", "o-1"))
        .await;
    for change in [
        json!({"payload": "other"}),
        json!({"topic": "other"}),
        json!({"key": "other"}),
        json!({"headers": {}}),
    ] {
        let mut body = prepare_body("orders", "o-1");
        for (k, v) in change.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (status, err) = app.prepare(Some(&token), &body).await;
        assert_eq!(status, 409, "{change}: {err}");
        assert_eq!(err["error"]["code"], "prepare_conflict");
    }
    app.finish().await;
}

#[tokio::test]
async fn commit_after_rollback_is_a_conflict() {
    let app = TestApp::spawn(&[]).await;
    let token = app.register("orders", VERIFY).await;
    app.prepare(Some(&token), &prepare_body("orders", "o-1"))
        .await;
    let (s, v) = app
        .rollback(Some(&token), &decision_body("orders", "o-1"))
        .await;
    assert_eq!((s, v["status"].as_str()), (200, Some("ROLLED_BACK")));
    let (s, err) = app
        .commit(Some(&token), &decision_body("orders", "o-1"))
        .await;
    assert_eq!(s, 409);
    assert_eq!(err["error"]["code"], "already_rolled_back");
    let (_, got) = app.get("/v1/messages/orders/o-1", Some(&token)).await;
    assert_eq!(got["status"], "ROLLED_BACK");
    assert_eq!(audit_count(&app, got["id"].as_u64().unwrap()).await, 1);
    app.finish().await;
}

/// Issue 58: a producer that retries a request whose message it rolled
/// back (its business step failed, it died before answering) must be told
/// before it runs its local transaction again: prepare refuses, whatever
/// the content, and a committed message's prepare says COMMITTED.
#[tokio::test]
async fn prepare_after_rollback_is_refused_and_after_commit_says_committed() {
    let app = TestApp::spawn(&[]).await;
    let token = app.register("orders", VERIFY).await;
    let body = prepare_body("orders", "o-1");
    let (s, _) = app.prepare(Some(&token), &body).await;
    assert_eq!(s, 201);
    app.rollback(Some(&token), &decision_body("orders", "o-1"))
        .await;
    let (s, err) = app.prepare(Some(&token), &body).await;
    assert_eq!(s, 409, "{err}");
    assert_eq!(err["error"]["code"], "already_rolled_back");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("do not run the local transaction again"),
        "{err}"
    );
    let mut other = prepare_body("orders", "o-1");
    other["payload"] = "{\"amount\":43}".into();
    let (s, err) = app.prepare(Some(&token), &other).await;
    assert_eq!(s, 409);
    assert_eq!(
        err["error"]["code"], "already_rolled_back",
        "whatever the content"
    );
    let (_, got) = app.get("/v1/messages/orders/o-1", Some(&token)).await;
    assert_eq!(got["status"], "ROLLED_BACK");
    assert_eq!(audit_count(&app, got["id"].as_u64().unwrap()).await, 1);

    let body = prepare_body("orders", "o-2");
    app.prepare(Some(&token), &body).await;
    app.commit(Some(&token), &decision_body("orders", "o-2"))
        .await;
    let (s, v) = app.prepare(Some(&token), &body).await;
    assert_eq!((s, v["status"].as_str()), (200, Some("COMMITTED")));
    app.finish().await;
}

#[tokio::test]
async fn rollback_after_commit_is_a_conflict_and_repeats_are_idempotent() {
    let app = TestApp::spawn(&[]).await;
    let token = app.register("orders", VERIFY).await;
    app.prepare(Some(&token), &prepare_body("orders", "o-1"))
        .await;
    let (s1, v1) = app
        .commit(Some(&token), &decision_body("orders", "o-1"))
        .await;
    let (s2, v2) = app
        .commit(Some(&token), &decision_body("orders", "o-1"))
        .await;
    assert_eq!((s1, s2), (200, 200));
    assert_eq!(
        v1["updated_at"], v2["updated_at"],
        "a repeat changes nothing"
    );
    let (s, err) = app
        .rollback(Some(&token), &decision_body("orders", "o-1"))
        .await;
    assert_eq!(s, 409);
    assert_eq!(err["error"]["code"], "already_committed");
    assert_eq!(audit_count(&app, v1["id"].as_u64().unwrap()).await, 1);
    app.finish().await;
}

#[tokio::test]
async fn commit_of_an_unknown_message_is_404_and_creates_nothing() {
    let app = TestApp::spawn(&[]).await;
    let token = app.register("orders", VERIFY).await;
    let (s, err) = app
        .commit(Some(&token), &decision_body("orders", "nope"))
        .await;
    assert_eq!(s, 404);
    assert_eq!(err["error"]["code"], "message_not_found");
    let pool = app.db.pool().await;
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM messages")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 0);
    let (s, _) = app.get("/v1/messages/orders/nope", Some(&token)).await;
    assert_eq!(s, 404);
    app.finish().await;
}

#[tokio::test]
async fn rollback_of_an_unknown_message_leaves_a_tombstone_that_refuses_a_late_prepare() {
    let app = TestApp::spawn(&[]).await;
    let token = app.register("orders", VERIFY).await;
    let (s, v) = app
        .rollback(Some(&token), &decision_body("orders", "late"))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "ROLLED_BACK");
    assert_eq!(v["topic"], Value::Null);
    let (s, err) = app
        .prepare(Some(&token), &prepare_body("orders", "late"))
        .await;
    assert_eq!(s, 409);
    assert_eq!(err["error"]["code"], "rolled_back");
    // The tombstone is never chased by check-back.
    let (_, got) = app.get("/v1/messages/orders/late", Some(&token)).await;
    assert_eq!(got["next_verify_at"], Value::Null);
    let (s, _) = app
        .rollback(Some(&token), &decision_body("orders", "late"))
        .await;
    assert_eq!(s, 200, "repeating the rollback is fine");
    app.finish().await;
}

#[tokio::test]
async fn base64_payloads_are_stored_as_their_bytes() {
    let app = TestApp::spawn(&[]).await;
    let token = app.register("orders", VERIFY).await;
    let mut body = prepare_body("orders", "bin");
    body["payload"] = json!("AP8BAg==");
    body["payload_encoding"] = json!("base64");
    let (s, v) = app.prepare(Some(&token), &body).await;
    assert_eq!(s, 201, "{v}");
    let m = app
        .store()
        .find_message("orders", "bin")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.payload, vec![0x00, 0xff, 0x01, 0x02]);
    app.finish().await;
}

#[tokio::test]
async fn prepare_schedules_the_first_check_back_after_the_producers_delay() {
    let app = TestApp::spawn(&[]).await;
    let token = app.register("orders", VERIFY).await;
    app.http
        .put(app.url("/v1/producers/orders"))
        .bearer_auth(trustmsg_tests::ADMIN_TOKEN)
        .json(&json!({"verify_url": VERIFY, "first_verify_after_ms": 120000}))
        .send()
        .await
        .unwrap();
    let (_, v) = app
        .prepare(Some(&token), &prepare_body("orders", "o-1"))
        .await;
    let created = chrono::DateTime::parse_from_rfc3339(v["created_at"].as_str().unwrap()).unwrap();
    let due = chrono::DateTime::parse_from_rfc3339(v["next_verify_at"].as_str().unwrap()).unwrap();
    let delay = (due - created).num_milliseconds();
    assert!((119_900..=120_100).contains(&delay), "delay {delay} ms");
    app.finish().await;
}
