//! The producer API over the embedded SQLite store: the same service, one smoke
//! test of the whole message life cycle (the store itself is covered by the
//! conformance suite).

use serde_json::Value;
use trustmsg_tests::{decision_body, prepare_body, TestApp};

#[tokio::test]
async fn the_message_life_cycle_works_over_sqlite() {
    let app = TestApp::spawn_sqlite(&[]).await;
    let token = app.register("orders", "http://127.0.0.1:9/check").await;

    let body = prepare_body("orders", "o-1");
    let (status, first) = app.prepare(Some(&token), &body).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(first["status"], "PREPARED");
    let (status, again) = app.prepare(Some(&token), &body).await;
    assert_eq!(
        (status, &again),
        (200, &first),
        "identical prepare is idempotent"
    );
    let mut changed = body.clone();
    changed["payload"] = Value::from("{\"amount\":43}");
    let (status, err) = app.prepare(Some(&token), &changed).await;
    assert_eq!(status, 409, "{err}");

    let decision = decision_body("orders", "o-1");
    let (status, view) = app.commit(Some(&token), &decision).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["status"], "COMMITTED");
    assert_eq!(view["send_status"], "PENDING");
    let (status, err) = app.rollback(Some(&token), &decision).await;
    assert_eq!(status, 409, "{err}");

    let (status, view) = app
        .commit(Some(&token), &decision_body("orders", "never-prepared"))
        .await;
    assert_eq!(status, 404, "{view}");
    let (status, view) = app
        .rollback(Some(&token), &decision_body("orders", "never-prepared"))
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["status"], "ROLLED_BACK");

    let (status, got) = app.get("/v1/messages/orders/o-1", Some(&token)).await;
    assert_eq!(status, 200);
    assert_eq!(got["status"], "COMMITTED");
    let id = got["id"].as_u64().unwrap();
    let trail = app.store().audit_trail(id).await.unwrap();
    assert_eq!(trail.len(), 1);
    assert_eq!(trail[0].to_status.as_deref(), Some("COMMITTED"));
    app.finish().await;
}
