use serde_json::{json, Value};

use trustmsg_tests::{prepare_body, TestApp};

async fn count_rows(app: &TestApp) -> i64 {
    let pool = app.db.pool().await;
    sqlx::query_scalar("SELECT COUNT(*) FROM messages")
        .fetch_one(&pool)
        .await
        .unwrap()
}

fn with(field: &str, value: Value) -> Value {
    let mut b = prepare_body("orders", "o-1");
    b[field] = value;
    b
}

#[tokio::test]
async fn every_bad_prepare_is_refused_with_its_code_and_nothing_is_written() {
    let app = TestApp::spawn(&["--max-payload-bytes", "1000"]).await;
    let token = app.register("orders", "http://127.0.0.1:9/check").await;
    let mut no_topic = prepare_body("orders", "o-1");
    no_topic.as_object_mut().unwrap().remove("topic");
    let many_headers: serde_json::Map<String, Value> =
        (0..65).map(|i| (format!("h{i}"), json!("v"))).collect();
    let cases: Vec<(Value, u16, &str)> = vec![
        (no_topic, 400, "invalid_body"),
        (with("topic", json!("")), 400, "invalid_topic"),
        (with("topic", json!("bad topic")), 400, "invalid_topic"),
        (with("topic", json!("..")), 400, "invalid_topic"),
        (with("topic", json!("a".repeat(250))), 400, "invalid_topic"),
        (with("message_key", json!("")), 400, "invalid_message_key"),
        (
            with("message_key", json!("k".repeat(129))),
            400,
            "invalid_message_key",
        ),
        (with("key", json!("k".repeat(1025))), 400, "invalid_key"),
        (
            with("payload", json!("x".repeat(1001))),
            413,
            "payload_too_large",
        ),
        (with("payload", json!(12)), 400, "invalid_body"),
        (
            {
                let mut b = with("payload", json!("%%%not-base64"));
                b["payload_encoding"] = json!("base64");
                b
            },
            400,
            "invalid_payload",
        ),
        (
            with("payload_encoding", json!("rot13")),
            400,
            "invalid_body",
        ),
        (
            with("headers", json!({"trustmsg-message-id": "x"})),
            400,
            "invalid_headers",
        ),
        (
            with("headers", Value::Object(many_headers)),
            400,
            "invalid_headers",
        ),
        (
            with("headers", json!({"big": "v".repeat(16 * 1024)})),
            400,
            "invalid_headers",
        ),
    ];
    for (body, status, code) in cases {
        let (s, err) = app.prepare(Some(&token), &body).await;
        assert_eq!(s, status, "{body:.200}: {err}");
        assert_eq!(err["error"]["code"], code, "{err}");
        assert!(
            err["error"]["message"].as_str().unwrap().len() > 10,
            "a message a person can act on: {err}"
        );
    }
    assert_eq!(count_rows(&app).await, 0, "nothing half-written");
    app.finish().await;
}

#[tokio::test]
async fn header_values_with_control_characters_are_refused_naming_the_header() {
    let app = TestApp::spawn(&[]).await;
    let token = app.register("orders", "http://127.0.0.1:9/check").await;
    // Within the raw 16 KiB limit, but six times that once JSON-escaped for storage.
    let escapes_to_96k = "\u{1}".repeat(16_000);
    for (name, value) in [
        ("trace-id", "abc\u{0}def".to_string()),
        ("note", "line one\nline two".to_string()),
        ("blob", escapes_to_96k),
        ("bell\u{7}", "v".to_string()),
    ] {
        let (s, err) = app
            .prepare(Some(&token), &with("headers", json!({ name: value })))
            .await;
        assert_eq!(s, 400, "{name:?}: {err}");
        assert_eq!(err["error"]["code"], "invalid_headers", "{err}");
        let message = err["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("{name:?}")),
            "names the header: {message}"
        );
    }
    assert_eq!(count_rows(&app).await, 0, "nothing half-written");
    // Printable text in any script is still a header value.
    let (s, err) = app
        .prepare(
            Some(&token),
            &with("headers", json!({"note": "déjà vu, 東京 ✓"})),
        )
        .await;
    assert_eq!(s, 201, "{err}");
    app.finish().await;
}

#[tokio::test]
async fn bad_biz_id_and_malformed_json_are_refused() {
    let app = TestApp::spawn(&["--insecure-no-auth"]).await;
    let (s, err) = app.prepare(None, &prepare_body("bad biz", "o-1")).await;
    assert_eq!(
        (s, err["error"]["code"].as_str()),
        (400, Some("invalid_biz_id"))
    );
    let (s, err) = app
        .prepare(None, &prepare_body(&"b".repeat(65), "o-1"))
        .await;
    assert_eq!(
        (s, err["error"]["code"].as_str()),
        (400, Some("invalid_biz_id"))
    );

    let res = app
        .http
        .post(app.url("/v1/messages/prepare"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let err: Value = res.json().await.unwrap();
    assert_eq!(err["error"]["code"], "invalid_json");

    let res = app
        .http
        .post(app.url("/v1/messages/prepare"))
        .body(prepare_body("orders", "o-1").to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 415, "JSON without its content type");
    assert_eq!(count_rows(&app).await, 0);
    app.finish().await;
}

#[tokio::test]
async fn an_oversized_body_is_refused_before_it_is_buffered_whole() {
    let app = TestApp::spawn(&["--insecure-no-auth", "--max-payload-bytes", "1000"]).await;
    // Far over the body limit (6 × payload limit + 64 KiB).
    let body = with("payload", json!("x".repeat(2 * 1024 * 1024)));
    let (s, err) = app.prepare(None, &body).await;
    assert_eq!(s, 413);
    assert_eq!(err["error"]["code"], "payload_too_large");
    assert_eq!(count_rows(&app).await, 0);
    app.finish().await;
}
