use serde_json::json;

use trustmsg_tests::{decision_body, prepare_body, TestApp, ADMIN_TOKEN};

const VERIFY: &str = "http://127.0.0.1:9/check";

#[tokio::test]
async fn producer_endpoints_need_a_token() {
    let app = TestApp::spawn(&[]).await;
    app.register("orders", VERIFY).await;
    let (s, err) = app.prepare(None, &prepare_body("orders", "o-1")).await;
    assert_eq!(s, 401);
    assert_eq!(err["error"]["code"], "unauthorized");
    let (s, _) = app
        .commit(Some("tm_b3JkZXJz.forged"), &decision_body("orders", "o-1"))
        .await;
    assert_eq!(s, 401, "a forged token for the right biz_id");
    let (s, _) = app.get("/v1/messages/orders/o-1", Some("nonsense")).await;
    assert_eq!(s, 401);
    app.finish().await;
}

#[tokio::test]
async fn a_producer_cannot_touch_another_producers_messages() {
    let app = TestApp::spawn(&[]).await;
    let orders = app.register("orders", VERIFY).await;
    let billing = app.register("billing", VERIFY).await;
    let (s, _) = app
        .prepare(Some(&orders), &prepare_body("orders", "o-1"))
        .await;
    assert_eq!(s, 201);
    for (path, body) in [
        ("/v1/messages/prepare", prepare_body("orders", "o-2")),
        ("/v1/messages/commit", decision_body("orders", "o-1")),
        ("/v1/messages/rollback", decision_body("orders", "o-1")),
    ] {
        let (s, err) = app.post(path, Some(&billing), &body).await;
        assert_eq!(s, 403, "{path}: {err}");
        assert_eq!(err["error"]["code"], "forbidden");
    }
    let (s, _) = app.get("/v1/messages/orders/o-1", Some(&billing)).await;
    assert_eq!(s, 403);
    let (_, v) = app.get("/v1/messages/orders/o-1", Some(&orders)).await;
    assert_eq!(v["status"], "PREPARED", "nothing changed");
    app.finish().await;
}

/// A well-formed producer token naming `biz_id`, with a made-up secret.
fn token_naming(biz_id: &str) -> String {
    use base64::Engine;
    let biz = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(biz_id);
    format!("tm_{biz}.forged")
}

#[tokio::test]
async fn a_token_naming_an_invalid_biz_id_is_refused_without_asking_the_store() {
    let app = TestApp::spawn(&[]).await;
    let pool = app.db.pool().await;
    // With the registry's table gone, any lookup that reaches the store fails.
    sqlx::query("RENAME TABLE producers TO producers_away")
        .execute(&pool)
        .await
        .unwrap();
    let (s, err) = app
        .get("/v1/messages/ghost/o-1", Some(&token_naming("ghost")))
        .await;
    assert!(
        s >= 500,
        "a valid biz_id is looked up (and fails): {s} {err}"
    );
    for biz_id in [
        "bad biz".to_string(),
        "orders/../admin".to_string(),
        "b".repeat(65),
        "x".repeat(100_000),
    ] {
        let (s, err) = app
            .get("/v1/messages/orders/o-1", Some(&token_naming(&biz_id)))
            .await;
        assert_eq!(s, 401, "{:.80}: {err}", biz_id);
        assert_eq!(err["error"]["code"], "unauthorized");
    }
    sqlx::query("RENAME TABLE producers_away TO producers")
        .execute(&pool)
        .await
        .unwrap();
    app.finish().await;
}

#[tokio::test]
async fn registry_endpoints_are_admin_only() {
    let app = TestApp::spawn(&[]).await;
    let orders = app.register("orders", VERIFY).await;
    let put = |token: Option<&str>| {
        let mut req = app
            .http
            .put(app.url("/v1/producers/billing"))
            .json(&json!({"verify_url": VERIFY}));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    assert_eq!(put(None).await.unwrap().status(), 401);
    assert_eq!(put(Some("wrong-admin")).await.unwrap().status(), 401);
    assert_eq!(put(Some(&orders)).await.unwrap().status(), 403);
    let (s, _) = app.get("/v1/producers/orders", Some(&orders)).await;
    assert_eq!(s, 403);
    let (s, _) = app
        .post(
            "/v1/producers/orders/rotate-token",
            Some(&orders),
            &json!({}),
        )
        .await;
    assert_eq!(s, 403);
    let del = app
        .http
        .delete(app.url("/v1/producers/orders"))
        .bearer_auth(&orders)
        .send()
        .await
        .unwrap();
    assert_eq!(del.status(), 403);
    assert_eq!(put(Some(ADMIN_TOKEN)).await.unwrap().status(), 201);
    app.finish().await;
}

#[tokio::test]
async fn rotating_a_token_revokes_the_old_one_at_once() {
    let app = TestApp::spawn(&[]).await;
    let old = app.register("orders", VERIFY).await;
    let (s, _) = app
        .prepare(Some(&old), &prepare_body("orders", "o-1"))
        .await;
    assert_eq!(s, 201);
    let (s, rotated) = app
        .post(
            "/v1/producers/orders/rotate-token",
            Some(ADMIN_TOKEN),
            &json!({}),
        )
        .await;
    assert_eq!(s, 200);
    let new = rotated["token"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    let (s, _) = app
        .commit(Some(&old), &decision_body("orders", "o-1"))
        .await;
    assert_eq!(s, 401, "the old token is refused right after rotation");
    let (s, _) = app
        .commit(Some(&new), &decision_body("orders", "o-1"))
        .await;
    assert_eq!(s, 200);
    app.finish().await;
}

#[tokio::test]
async fn insecure_mode_accepts_requests_without_tokens() {
    let app = TestApp::spawn(&["--insecure-no-auth"]).await;
    let (s, v) = app.prepare(None, &prepare_body("anyone", "o-1")).await;
    assert_eq!(s, 201, "{v}");
    let (s, _) = app.commit(None, &decision_body("anyone", "o-1")).await;
    assert_eq!(s, 200);
    app.finish().await;
}
