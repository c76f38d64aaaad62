//! The consumer-group registry over HTTP (admin token): a token shown once,
//! updates that keep it, rotation and deletion that revoke it at once on
//! this instance, and group tokens that can do nothing but begin and finish
//! for their own group.

use serde_json::{json, Value};

use trustmsg_tests::{TestApp, ADMIN_TOKEN};

async fn put(app: &TestApp, group: &str, body: &Value) -> (u16, Value) {
    super::admin_put(app, &format!("/v1/consumer-groups/{group}"), body).await
}

async fn begin(app: &TestApp, token: &str, group: &str) -> u16 {
    app.post(
        "/v1/consumptions/begin",
        Some(token),
        &json!({ "group": group, "message_id": 1 }),
    )
    .await
    .0
}

/// A finish of message 1 for `group` with `token`: its status.
async fn finish(app: &TestApp, token: &str, group: &str) -> u16 {
    app.post(
        "/v1/consumptions/finish",
        Some(token),
        &json!({ "group": group, "message_id": 1, "ok": true }),
    )
    .await
    .0
}

#[tokio::test]
async fn a_group_token_is_shown_once_revoked_by_rotation_and_deletion_and_good_only_for_begin_and_finish(
) {
    let app = TestApp::spawn(&[]).await;
    let (s, created) = put(&app, "billing", &json!({ "topics": ["orders"] })).await;
    assert_eq!(s, 201, "{created}");
    let token = created["token"].as_str().unwrap().to_string();
    // No message 1: a valid token gets as far as the message lookup, for
    // a begin and for a finish.
    assert_eq!(begin(&app, &token, "billing").await, 404);
    assert_eq!(finish(&app, &token, "billing").await, 404);

    let (s, updated) = put(
        &app,
        "billing",
        &json!({ "topics": ["orders", "refunds"], "max_failures": 2 }),
    )
    .await;
    assert_eq!(s, 200, "{updated}");
    assert!(updated.get("token").is_none());
    assert_eq!(
        (
            updated["max_failures"].clone(),
            updated["in_progress_timeout_ms"].clone()
        ),
        (json!(2), json!(300000))
    );
    assert_eq!(
        begin(&app, &token, "billing").await,
        404,
        "an update keeps the token"
    );

    // A group token is no admin token, and a producer token is no group token.
    let (s, _) = app.get("/v1/consumer-groups/billing", Some(&token)).await;
    assert_eq!(s, 403);
    let producer = app.register("shop", "http://127.0.0.1:9/check").await;
    assert_eq!(begin(&app, &producer, "billing").await, 401);
    assert_eq!(finish(&app, &producer, "billing").await, 401);

    let (s, rotated) = app
        .post(
            "/v1/consumer-groups/billing/rotate-token",
            Some(ADMIN_TOKEN),
            &Value::Null,
        )
        .await;
    assert_eq!(s, 200, "{rotated}");
    let new_token = rotated["token"].as_str().unwrap().to_string();
    assert_ne!(new_token, token);
    assert_eq!(
        begin(&app, &token, "billing").await,
        401,
        "the old token is revoked"
    );
    assert_eq!(
        finish(&app, &token, "billing").await,
        401,
        "the old token is revoked for a finish too"
    );
    assert_eq!(begin(&app, &new_token, "billing").await, 404);
    assert_eq!(finish(&app, &new_token, "billing").await, 404);

    let (s, list) = app.get("/v1/consumer-groups", Some(ADMIN_TOKEN)).await;
    assert_eq!(s, 200);
    assert_eq!(list["items"][0]["group"], "billing");
    assert!(list["items"][0].get("token").is_none(), "{list}");

    let res = app
        .http
        .delete(app.url("/v1/consumer-groups/billing"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    assert_eq!(
        begin(&app, &new_token, "billing").await,
        401,
        "deleted: revoked"
    );
    assert_eq!(finish(&app, &new_token, "billing").await, 401);
    let (s, gone) = app
        .get("/v1/consumer-groups/billing", Some(ADMIN_TOKEN))
        .await;
    assert_eq!(
        (s, gone["error"]["code"].clone()),
        (404, json!("consumer_group_not_found"))
    );

    for (body, code) in [
        (json!({}), "invalid_body"),
        (json!({ "topics": ["bad topic"] }), "invalid_topics"),
        (
            json!({ "topics": ["a"], "max_failures": 0 }),
            "invalid_consumer_group",
        ),
        (
            json!({ "topics": ["a"], "in_progress_timeout_ms": 999 }),
            "invalid_consumer_group",
        ),
        (json!({ "topics": ["a"], "color": "red" }), "invalid_body"),
    ] {
        let (s, err) = put(&app, "g", &body).await;
        assert_eq!(
            (s, err["error"]["code"].clone()),
            (400, json!(code)),
            "{body}: {err}"
        );
    }
    let (s, err) = put(&app, "bad%20name", &json!({ "topics": ["a"] })).await;
    assert_eq!(
        (s, err["error"]["code"].clone()),
        (400, json!("invalid_group"))
    );
    app.finish().await;
}
