use serde_json::json;

use trustmsg_tests::{TestApp, ADMIN_TOKEN};

/// `PUT /v1/producers/orders` with `body`: the status and the producer.
async fn put_orders(app: &TestApp, body: &serde_json::Value) -> (u16, serde_json::Value) {
    super::admin_put(app, "/v1/producers/orders", body).await
}

/// `DELETE /v1/producers/orders`: the status.
async fn delete_orders(app: &TestApp) -> u16 {
    let res = app
        .http
        .delete(app.url("/v1/producers/orders"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    res.status().as_u16()
}

#[tokio::test]
async fn register_shows_token_once_then_update_keeps_it() {
    let app = TestApp::spawn(&[]).await;
    let (status, created) = put_orders(
        &app,
        &json!({"verify_url": "http://127.0.0.1:9/check", "max_verify_attempts": 3}),
    )
    .await;
    assert_eq!(status, 201);
    assert!(created["token"].as_str().unwrap().starts_with("tm_"));
    assert!(created["signing_secret"]
        .as_str()
        .unwrap()
        .starts_with("whsec_"));
    assert_eq!(created["max_verify_attempts"], 3);
    assert_eq!(created["first_verify_after_ms"], 30_000, "default applies");

    let (status, updated) = put_orders(
        &app,
        &json!({"verify_url": "http://127.0.0.1:9/other", "verify_timeout_ms": 1500}),
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        updated.get("token").is_none(),
        "an update never shows a token"
    );
    assert!(
        updated.get("signing_secret").is_none(),
        "an update never shows the signing secret"
    );
    assert_eq!(updated["verify_url"], "http://127.0.0.1:9/other");
    assert_eq!(updated["verify_timeout_ms"], 1500);

    let (s, got) = app.get("/v1/producers/orders", Some(ADMIN_TOKEN)).await;
    assert_eq!(s, 200);
    assert!(got.get("token").is_none());
    assert!(got.get("signing_secret").is_none());
    let (s, revealed) = app
        .post(
            "/v1/producers/orders/reveal-signing-secret",
            Some(ADMIN_TOKEN),
            &serde_json::Value::Null,
        )
        .await;
    assert_eq!(s, 200, "{revealed}");
    assert_eq!(revealed["signing_secret"], created["signing_secret"]);
    assert_eq!(got["verify_url"], "http://127.0.0.1:9/other");

    // The original token still works after the update.
    let token = created["token"].as_str().unwrap();
    let (s, _) = app
        .prepare(Some(token), &trustmsg_tests::prepare_body("orders", "k"))
        .await;
    assert_eq!(s, 201);
    app.finish().await;
}

#[tokio::test]
async fn deleting_a_producer_revokes_its_token() {
    let app = TestApp::spawn(&[]).await;
    let token = app.register("orders", "http://127.0.0.1:9/check").await;
    assert_eq!(delete_orders(&app).await, 204);
    let (s, _) = app.get("/v1/producers/orders", Some(ADMIN_TOKEN)).await;
    assert_eq!(s, 404);
    let (s, _) = app
        .prepare(Some(&token), &trustmsg_tests::prepare_body("orders", "k"))
        .await;
    assert_eq!(s, 401);
    assert_eq!(delete_orders(&app).await, 404);
    app.finish().await;
}

#[tokio::test]
async fn bad_registrations_are_refused_with_a_reason() {
    let app = TestApp::spawn(&[]).await;
    for (body, code) in [
        (json!({"verify_url": "not a url"}), "invalid_verify_url"),
        (
            json!({"verify_url": "ftp://127.0.0.1/check"}),
            "invalid_verify_url",
        ),
        (
            json!({"verify_url": "http://127.0.0.1:9/c", "max_verify_attempts": 0}),
            "invalid_producer",
        ),
        (
            json!({"verify_url": "http://127.0.0.1:9/c", "verify_timeout_ms": 999999}),
            "invalid_producer",
        ),
        (json!({}), "invalid_body"),
        (
            json!({"verify_url": "http://127.0.0.1:9/c", "ordered": "yes"}),
            "invalid_body",
        ),
    ] {
        let (status, err) = put_orders(&app, &body).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(err["error"]["code"], code, "{body}: {err}");
        if body.get("ordered").is_some() {
            let message = err["error"]["message"].as_str().unwrap();
            assert!(message.contains("ordered"), "names the field: {err}");
        }
    }
    let res = app
        .http
        .put(app.url("/v1/producers/bad%20id"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"verify_url": "http://127.0.0.1:9/c"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let (s, _) = app.get("/v1/producers/orders", Some(ADMIN_TOKEN)).await;
    assert_eq!(s, 404, "nothing was written");
    app.finish().await;
}

#[tokio::test]
async fn a_check_back_timeout_over_verify_timeout_max_is_refused_naming_the_limit() {
    let app =
        TestApp::spawn_sqlite(&["--verify-timeout", "1s", "--verify-timeout-max", "2s"]).await;
    let (status, body) = app
        .put_producer(
            "orders",
            &json!({"verify_url": "http://127.0.0.1:9/c", "verify_timeout_ms": 2001}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "invalid_producer");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("verify_timeout_ms must be between 10 and 2000 (got 2001)"),
        "{msg}"
    );
    let (status, body) = app
        .put_producer(
            "orders",
            &json!({"verify_url": "http://127.0.0.1:9/c", "verify_timeout_ms": 2000}),
        )
        .await;
    assert_eq!(status, 201, "the limit itself is allowed: {body}");
    app.finish().await;
}
