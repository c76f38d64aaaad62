//! The operator API's read side: messages listed with filters in keyset
//! pages, one message in full, the summary, the registrations; an admin
//! token only, and every bad parameter a 400 that says what is accepted.

use std::collections::HashSet;

use serde_json::{json, Value};
use trustmsg_tests::{decision_body, prepare_body, TestApp, ADMIN_TOKEN, UNREACHABLE_VERIFY_URL};

async fn prepared(app: &TestApp, token: &str, key: &str) -> u64 {
    let (status, view) = app.prepare(Some(token), &prepare_body("shop", key)).await;
    assert_eq!(status, 201, "{view}");
    view["id"].as_u64().unwrap()
}

async fn commit(app: &TestApp, token: &str, key: &str) {
    let (status, view) = app.commit(Some(token), &decision_body("shop", key)).await;
    assert_eq!(status, 200, "{view}");
}

async fn admin_get(app: &TestApp, path: &str) -> (u16, Value) {
    app.get(path, Some(ADMIN_TOKEN)).await
}

fn ids(page: &Value) -> Vec<u64> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["id"].as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn messages_are_listed_newest_first_in_pages_that_inserts_do_not_disturb() {
    let app = TestApp::spawn(&["--no-verifier"]).await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    let mut all = Vec::new();
    for i in 0..7 {
        all.push(prepared(&app, &token, &format!("k-{i}")).await);
    }
    for i in 0..3 {
        commit(&app, &token, &format!("k-{i}")).await;
    }
    let (status, view) = app
        .rollback(Some(&token), &decision_body("shop", "k-3"))
        .await;
    assert_eq!(status, 200, "{view}");
    all.reverse();

    // Page 1, then two new messages, then the rest by cursor.
    let (status, first) = admin_get(&app, "/v1/admin/messages?limit=3").await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(ids(&first), all[..3]);
    let mut newer = Vec::new();
    for key in ["new-a", "new-b"] {
        newer.push(prepared(&app, &token, key).await);
    }
    let mut seen = ids(&first);
    let mut cursor = first["next_cursor"].as_str().map(str::to_string);
    while let Some(c) = cursor {
        let (status, page) =
            admin_get(&app, &format!("/v1/admin/messages?limit=3&cursor={c}")).await;
        assert_eq!(status, 200, "{page}");
        seen.extend(ids(&page));
        cursor = page["next_cursor"].as_str().map(str::to_string);
    }
    assert_eq!(
        seen, all,
        "every message once, newest first, none of the new ones"
    );
    let (_, fresh) = admin_get(&app, "/v1/admin/messages").await;
    assert_eq!(
        ids(&fresh)[..2],
        [newer[1], newer[0]],
        "a new first page shows them"
    );
    assert_eq!(
        fresh["next_cursor"],
        Value::Null,
        "9 rows fit the default page"
    );

    let count = |q: &'static str| {
        let app = &app;
        async move {
            let (status, page) = admin_get(app, &format!("/v1/admin/messages?{q}")).await;
            assert_eq!(status, 200, "{q}: {page}");
            ids(&page).len()
        }
    };
    assert_eq!(count("status=COMMITTED").await, 3);
    assert_eq!(
        count("status=COMMITTED&send_status=PENDING&biz_id=shop&topic=orders").await,
        3
    );
    assert_eq!(count("status=ROLLED_BACK").await, 1);
    assert_eq!(count("status=PREPARED").await, 5);
    assert_eq!(count("biz_id=nobody").await, 0);
    assert_eq!(count("created_before=2000-01-01T00:00:00Z").await, 0);
    assert_eq!(count("created_after=2000-01-01T00:00:00%2B02:00").await, 9);
    app.finish().await;
}

#[tokio::test]
async fn bad_list_parameters_are_refused_saying_what_is_accepted_and_only_the_admin_may_ask() {
    let app = TestApp::spawn(&["--no-verifier"]).await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    for (query, code, says) in [
        (
            "status=DONE",
            "invalid_filter",
            "PREPARED, COMMITTED, ROLLED_BACK, VERIFY_FAILED",
        ),
        (
            "send_status=LOST",
            "invalid_filter",
            "PENDING, SENT, SEND_FAILED",
        ),
        ("limit=501", "invalid_limit", "from 1 to 500"),
        ("limit=0", "invalid_limit", "from 1 to 500"),
        ("limit=ten", "invalid_limit", "from 1 to 500"),
        ("cursor=bm90LWEtY3Vyc29y", "invalid_cursor", "next_cursor"),
        ("created_after=yesterday", "invalid_filter", "RFC 3339"),
        (
            "state=PREPARED",
            "invalid_filter",
            "unknown parameter \"state\"",
        ),
    ] {
        let (status, body) = admin_get(&app, &format!("/v1/admin/messages?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["code"], code, "{query}: {body}");
        let msg = body["error"]["message"].as_str().unwrap();
        assert!(msg.contains(says), "{query}: {msg}");
    }
    for (query, code, says) in [
        (
            "state=lost",
            "invalid_filter",
            "pending, delivered, no_webhook",
        ),
        ("message_id=x", "invalid_filter", "whole number"),
        // An empty number is not a number (the document types both as integers).
        ("message_id=", "invalid_filter", "whole number"),
        ("limit=", "invalid_limit", "from 1 to 500"),
        (
            "message_id=9223372036854775808",
            "invalid_filter",
            "from 0 to 9223372036854775807",
        ),
        ("limit=501", "invalid_limit", "from 1 to 500"),
        ("cursor=bm90LWEtY3Vyc29y", "invalid_cursor", "next_cursor"),
        (
            "status=PREPARED",
            "invalid_filter",
            "unknown parameter \"status\"",
        ),
    ] {
        let (status, body) = admin_get(&app, &format!("/v1/admin/alerts?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["code"], code, "{query}: {body}");
        let msg = body["error"]["message"].as_str().unwrap();
        assert!(msg.contains(says), "{query}: {msg}");
    }
    for path in [
        "/v1/admin/messages",
        "/v1/admin/alerts",
        "/v1/admin/summary",
        "/v1/admin/messages/1",
        "/v1/producers",
    ] {
        let (status, body) = app.get(path, Some(&token)).await;
        assert_eq!(status, 403, "{path} with a producer token: {body}");
        let (status, _) = app.get(path, None).await;
        assert_eq!(status, 401, "{path} without a token");
    }
    app.finish().await;
}

#[tokio::test]
async fn one_message_shows_its_payload_headers_and_audit_trail() {
    let app = TestApp::spawn(&["--no-verifier"]).await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    let text = prepared(&app, &token, "text").await;
    commit(&app, &token, "text").await;
    let (status, view) = app
        .prepare(
            Some(&token),
            &json!({"biz_id": "shop", "message_key": "bin", "topic": "orders",
                    "payload": "AP/+", "payload_encoding": "base64"}),
        )
        .await;
    assert_eq!(status, 201, "{view}");
    let binary = view["id"].as_u64().unwrap();

    let (status, d) = admin_get(&app, &format!("/v1/admin/messages/{text}")).await;
    assert_eq!(status, 200, "{d}");
    assert_eq!(d["message"]["id"], text);
    assert_eq!(d["message"]["status"], "COMMITTED");
    assert_eq!(d["payload"], "{\"amount\":42}");
    assert_eq!(d["payload_encoding"], "utf8");
    assert_eq!(d["headers"], json!({"content-type": "application/json"}));
    let audit = d["audit"].as_array().unwrap();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0]["action"], "commit");
    assert_eq!(audit[0]["actor"], "producer:shop");
    assert_eq!(audit[0]["from_status"], "PREPARED");
    assert_eq!(audit[0]["to_status"], "COMMITTED");
    assert!(audit[0]["at"].is_string());

    let (_, d) = admin_get(&app, &format!("/v1/admin/messages/{binary}")).await;
    assert_eq!(d["payload"], "AP/+");
    assert_eq!(d["payload_encoding"], "base64");
    assert_eq!(d["message"]["payload_size"], 3);

    let (status, body) = admin_get(&app, "/v1/admin/messages/999999").await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("message_not_found"))
    );
    let (status, body) = admin_get(&app, "/v1/admin/messages/abc").await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("invalid_id"))
    );
    app.finish().await;
}

#[tokio::test]
async fn the_summary_counts_each_producers_states_and_how_long_the_oldest_have_waited() {
    let app = TestApp::spawn_sqlite(&["--no-verifier"]).await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    app.register("idle", UNREACHABLE_VERIFY_URL).await;
    prepared(&app, &token, "old").await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    prepared(&app, &token, "new").await;
    prepared(&app, &token, "sent").await;
    commit(&app, &token, "sent").await;

    let (status, s) = admin_get(&app, "/v1/admin/summary").await;
    assert_eq!(status, 200, "{s}");
    let producers = s["producers"].as_array().unwrap();
    assert_eq!(
        producers.len(),
        1,
        "a producer without messages is not listed: {s}"
    );
    let p = &producers[0];
    assert_eq!(p["biz_id"], "shop");
    assert_eq!(p["by_status"], json!({"PREPARED": 2, "COMMITTED": 1}));
    assert_eq!(p["by_send_status"], json!({"PENDING": 1}));
    assert_eq!(
        (&p["sent_recently"], &p["rolled_back_recently"]),
        (&json!(0), &json!(0))
    );
    assert_eq!(s["recent_window_secs"], 900);
    assert!(p["oldest_prepared_age_ms"].as_u64().unwrap() >= 300, "{p}");
    assert!(
        p["oldest_pending_send_age_ms"].as_u64().unwrap() < 300,
        "{p}"
    );

    let (status, list) = admin_get(&app, "/v1/producers").await;
    assert_eq!(status, 200, "{list}");
    let names: HashSet<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["biz_id"].as_str().unwrap())
        .collect();
    assert_eq!(names, HashSet::from(["idle", "shop"]));
    assert!(
        list["items"][0]["token"].is_null(),
        "tokens are never shown again"
    );
    app.finish().await;
}
