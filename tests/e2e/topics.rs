//! Producers confined to their topics, request bodies that refuse unknown
//! fields, and signing secrets shown only when issued or asked for: the real
//! binary over MariaDB, driven over HTTP and through `trustmsg admin`.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use sqlx::MySqlPool;
use trustmsg_tests::process::binary;
use trustmsg_tests::{ServiceProcess, TestDb, ADMIN_TOKEN, UNREACHABLE_VERIFY_URL};

/// Nothing here reaches Kafka or calls a producer back.
const QUIET: &[&str] = &["--no-forwarder", "--no-verifier"];
const NO_KAFKA: &str = "127.0.0.1:9";

/// GET `path` with the admin token: the status and the answer.
async fn admin_get(service: &ServiceProcess, path: &str) -> (u16, Value) {
    service
        .call(reqwest::Method::GET, path, ADMIN_TOKEN, None)
        .await
}

async fn put_producer(service: &ServiceProcess, biz_id: &str, settings: Value) -> (u16, Value) {
    service
        .call(
            reqwest::Method::PUT,
            &format!("/v1/producers/{biz_id}"),
            ADMIN_TOKEN,
            Some(&settings),
        )
        .await
}

async fn prepare(service: &ServiceProcess, token: &str, body: Value) -> (u16, Value) {
    service
        .call(
            reqwest::Method::POST,
            "/v1/messages/prepare",
            token,
            Some(&body),
        )
        .await
}

fn message(biz_id: &str, key: &str, topic: &str) -> Value {
    json!({"biz_id": biz_id, "message_key": key, "topic": topic, "payload": "{}"})
}

/// The messages stored for `biz_id`, as (message_key, topic).
async fn stored(pool: &MySqlPool, biz_id: &str) -> Vec<(String, String)> {
    let rows: Vec<(Vec<u8>, Option<Vec<u8>>)> =
        sqlx::query_as("SELECT message_key, topic FROM messages WHERE biz_id = ? ORDER BY id")
            .bind(biz_id)
            .fetch_all(pool)
            .await
            .unwrap();
    rows.into_iter()
        .map(|(k, t)| {
            (
                String::from_utf8(k).unwrap(),
                t.map(|t| String::from_utf8(t).unwrap()).unwrap_or_default(),
            )
        })
        .collect()
}

/// `trustmsg admin --json? <args>` against `service`: (exit ok, stdout, stderr).
fn admin_cli(service: &ServiceProcess, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(binary())
        .args([
            "admin",
            "--url",
            &service.url(),
            "--admin-token",
            ADMIN_TOKEN,
        ])
        .args(args)
        .output()
        .expect("run trustmsg admin");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_default()
}

fn error_message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_prepares_only_for_its_listed_topics_and_an_update_narrows_them_at_once() {
    let db = TestDb::create().await;
    let service = ServiceProcess::start(&db, NO_KAFKA, QUIET).await;
    let pool = db.pool().await;
    let (status, shop) = put_producer(
        &service,
        "shop",
        json!({"verify_url": UNREACHABLE_VERIFY_URL, "topics": ["orders", "shop.*"]}),
    )
    .await;
    assert_eq!(status, 201, "{shop}");
    assert_eq!(shop["topics"], json!(["orders", "shop.*"]));
    assert_eq!(shop["topics_missing"], json!(false));
    let token = shop["token"].as_str().unwrap().to_string();

    for (key, topic) in [("o-1", "orders"), ("x-1", "shop.x"), ("s-1", "shop.")] {
        let (status, body) = prepare(&service, &token, message("shop", key, topic)).await;
        assert_eq!(status, 201, "{topic}: {body}");
    }
    for topic in ["payments", "orders2", "shop", "Orders"] {
        let (status, body) = prepare(&service, &token, message("shop", "p-1", topic)).await;
        assert_eq!(status, 403, "{topic}: {body}");
        assert_eq!(code(&body), "topic_not_allowed", "{body}");
        let says = error_message(&body);
        for part in [
            format!("{topic:?}"),
            "\"shop\"".to_string(),
            "\"orders\", \"shop.*\"".to_string(),
        ] {
            assert!(says.contains(&part), "{says:?} does not name {part}");
        }
    }
    // The admin token prepares for the producer's biz_id under its list too.
    let (status, body) = prepare(&service, ADMIN_TOKEN, message("shop", "a-1", "payments")).await;
    assert_eq!((status, code(&body)), (403, "topic_not_allowed"), "{body}");

    // An update replaces the list, and this instance applies it at once
    // (its cached registration is dropped), however long the cache TTL.
    let (status, body) = put_producer(
        &service,
        "shop",
        json!({"verify_url": UNREACHABLE_VERIFY_URL, "topics": ["orders"]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = prepare(&service, &token, message("shop", "x-2", "shop.y")).await;
    assert_eq!((status, code(&body)), (403, "topic_not_allowed"), "{body}");

    assert_eq!(
        stored(&pool, "shop").await,
        [("o-1", "orders"), ("x-1", "shop.x"), ("s-1", "shop.")]
            .map(|(k, t)| (k.to_string(), t.to_string())),
        "nothing refused was written"
    );
    drop(service);
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_allow_lists_are_refused_with_what_to_write_instead() {
    let db = TestDb::create().await;
    let service = ServiceProcess::start(&db, NO_KAFKA, QUIET).await;
    for (topics, says) in [
        (json!([]), "allow no topic at all"),
        (json!(["orders", "shop*x"]), "topics[1] \"shop*x\""),
        (json!(["**"]), "topics[0] \"**\""),
        (json!(["a b"]), "found ' '"),
        (json!([".."]), "not a valid topic name"),
        (json!(["x".repeat(250)]), "1 to 249 characters"),
        (
            json!((0..101).map(|i| format!("t{i}")).collect::<Vec<_>>()),
            "at most 100",
        ),
    ] {
        let (status, body) = put_producer(
            &service,
            "shop",
            json!({"verify_url": UNREACHABLE_VERIFY_URL, "topics": topics}),
        )
        .await;
        assert_eq!((status, code(&body)), (400, "invalid_topics"), "{body}");
        assert!(error_message(&body).contains(says), "{body}");
    }
    // `*` alone is an explicit "any topic": allowed, and not flagged.
    let (status, body) = put_producer(
        &service,
        "anything",
        json!({"verify_url": UNREACHABLE_VERIFY_URL, "topics": ["*"]}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["topics_missing"], json!(false));
    let token = body["token"].as_str().unwrap().to_string();
    let (status, body) = prepare(&service, &token, message("anything", "k", "payments")).await;
    assert_eq!(status, 201, "{body}");
    let (status, _) = admin_get(&service, "/v1/producers/shop").await;
    assert_eq!(status, 404, "no refused registration was stored");
    drop(service);
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_without_topics_is_flagged_in_the_admin_api_and_the_cli() {
    let db = TestDb::create().await;
    let service = ServiceProcess::start(&db, NO_KAFKA, QUIET).await;
    let (legacy_token, _) = service
        .register("legacy", json!({"verify_url": UNREACHABLE_VERIFY_URL}))
        .await;
    service
        .register(
            "shop",
            json!({"verify_url": UNREACHABLE_VERIFY_URL, "topics": ["orders"]}),
        )
        .await;
    // Today's behaviour: any topic.
    let (status, body) = prepare(&service, &legacy_token, message("legacy", "k", "payments")).await;
    assert_eq!(status, 201, "{body}");

    let (status, list) = admin_get(&service, "/v1/producers").await;
    assert_eq!(status, 200, "{list}");
    let flags: Vec<(String, Value, Value)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["biz_id"].as_str().unwrap().to_string(),
                p["topics"].clone(),
                p["topics_missing"].clone(),
            )
        })
        .collect();
    assert_eq!(
        flags,
        [
            ("legacy".to_string(), Value::Null, json!(true)),
            ("shop".to_string(), json!(["orders"]), json!(false)),
        ]
    );

    let (status, summary) = admin_get(&service, "/v1/admin/summary").await;
    assert_eq!(status, 200, "{summary}");
    assert_eq!(summary["producers_without_topics"], json!(["legacy"]));
    let (ok, out, err) = admin_cli(&service, &["summary"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("warning: no topic allow-list (may publish to any topic): legacy"),
        "{out}"
    );

    let (ok, out, err) = admin_cli(&service, &["producers", "list"]);
    assert!(ok, "{err}");
    let legacy_row = out
        .lines()
        .find(|l| l.contains("legacy"))
        .unwrap_or_default();
    assert!(legacy_row.contains("ANY (no allow-list)"), "{out}");
    let shop_row = out.lines().find(|l| l.contains("shop")).unwrap_or_default();
    assert!(
        shop_row.contains("orders") && !shop_row.contains("ANY"),
        "{out}"
    );
    assert!(
        out.contains("warning: 1 producer(s) without a topic allow-list"),
        "{out}"
    );
    let (ok, out, err) = admin_cli(&service, &["producers", "show", "legacy"]);
    assert!(ok, "{err}");
    assert!(out.contains("warning: no topic allow-list"), "{out}");
    let (ok, out, err) = admin_cli(
        &service,
        &[
            "producers",
            "put",
            "legacy",
            "--verify-url",
            UNREACHABLE_VERIFY_URL,
            "--topics",
            "orders,legacy.*",
        ],
    );
    assert!(ok, "{err}");
    assert!(
        out.contains("topics: orders, legacy.*") && !out.contains("warning"),
        "{out}"
    );
    let (status, body) =
        prepare(&service, &legacy_token, message("legacy", "k2", "payments")).await;
    assert_eq!((status, code(&body)), (403, "topic_not_allowed"), "{body}");
    drop(service);
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_producer_topics_refuses_registrations_without_topics_and_the_prepares_of_unlisted_producers(
) {
    let db = TestDb::create().await;
    let before = ServiceProcess::start(&db, NO_KAFKA, QUIET).await;
    let (legacy_token, _) = before
        .register("legacy", json!({"verify_url": UNREACHABLE_VERIFY_URL}))
        .await;
    let (shop_token, _) = before
        .register(
            "shop",
            json!({"verify_url": UNREACHABLE_VERIFY_URL, "topics": ["orders"]}),
        )
        .await;
    drop(before);

    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("serve.log");
    let mut flags = QUIET.to_vec();
    flags.push("--require-producer-topics");
    let service = ServiceProcess::start_logged(&db.url, NO_KAFKA, &flags, Some(log.clone())).await;
    let started = read(&log);
    let warning = started
        .lines()
        .find(|l| l.contains("--require-producer-topics"))
        .unwrap_or_else(|| panic!("no start-up warning in {started}"));
    assert!(
        warning.contains("legacy") && !warning.contains("shop"),
        "{warning}"
    );

    let (status, body) = put_producer(
        &service,
        "newcomer",
        json!({"verify_url": UNREACHABLE_VERIFY_URL}),
    )
    .await;
    assert_eq!((status, code(&body)), (400, "topics_required"), "{body}");
    assert!(error_message(&body).contains("\"topics\""), "{body}");
    let (status, _) = admin_get(&service, "/v1/producers/newcomer").await;
    assert_eq!(status, 404, "the refused registration was not stored");

    let (status, body) = prepare(&service, &legacy_token, message("legacy", "k", "orders")).await;
    assert_eq!((status, code(&body)), (403, "topic_not_allowed"), "{body}");
    assert!(
        error_message(&body).contains("\"legacy\" has no topic allow-list")
            && error_message(&body).contains("--require-producer-topics"),
        "{body}"
    );
    let (status, body) = prepare(&service, &shop_token, message("shop", "k", "orders")).await;
    assert_eq!(status, 201, "{body}");

    // Given a list, the unlisted producer works again.
    let (status, body) = put_producer(
        &service,
        "legacy",
        json!({"verify_url": UNREACHABLE_VERIFY_URL, "topics": ["orders"]}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = prepare(&service, &legacy_token, message("legacy", "k", "orders")).await;
    assert_eq!(status, 201, "{body}");
    drop(service);
    db.drop_db().await;
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_field_is_a_400_naming_it_and_nothing_is_written() {
    let db = TestDb::create().await;
    let service = ServiceProcess::start(&db, NO_KAFKA, QUIET).await;
    let pool = db.pool().await;

    // A typo in a registration: not a producer without a list.
    let (status, body) = put_producer(
        &service,
        "shop",
        json!({"verify_url": UNREACHABLE_VERIFY_URL, "topcs": ["orders"]}),
    )
    .await;
    assert_eq!((status, code(&body)), (400, "invalid_body"), "{body}");
    assert!(
        error_message(&body).contains("unknown field `topcs`"),
        "{body}"
    );
    let (status, _) = admin_get(&service, "/v1/producers/shop").await;
    assert_eq!(status, 404, "nothing was registered");

    let (token, _) = service
        .register(
            "shop",
            json!({"verify_url": UNREACHABLE_VERIFY_URL, "topics": ["orders"]}),
        )
        .await;
    let mut typo = message("shop", "k", "orders");
    typo["header"] = json!({"x": "y"});
    let (status, body) = prepare(&service, &token, typo).await;
    assert_eq!((status, code(&body)), (400, "invalid_body"), "{body}");
    assert!(
        error_message(&body).contains("unknown field `header`"),
        "{body}"
    );
    assert_eq!(stored(&pool, "shop").await, [], "nothing was prepared");

    let (status, body) = prepare(&service, &token, message("shop", "k", "orders")).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = service
        .call(
            reqwest::Method::POST,
            "/v1/messages/commit",
            &token,
            Some(&json!({"biz_id": "shop", "message_key": "k", "force": true})),
        )
        .await;
    assert_eq!((status, code(&body)), (400, "invalid_body"), "{body}");
    assert!(
        error_message(&body).contains("unknown field `force`"),
        "{body}"
    );
    let id = body_id(&service, &token).await;
    let (status, body) = service
        .call(
            reqwest::Method::POST,
            &format!("/v1/admin/messages/{id}/resolve"),
            ADMIN_TOKEN,
            Some(&json!({"decision": "commit", "reason": "test", "reasn": "typo"})),
        )
        .await;
    assert_eq!((status, code(&body)), (400, "invalid_body"), "{body}");
    assert!(
        error_message(&body).contains("unknown field `reasn`"),
        "{body}"
    );
    let (status, view) = service
        .call(reqwest::Method::GET, "/v1/messages/shop/k", &token, None)
        .await;
    assert_eq!(
        (status, view["status"].as_str()),
        (200, Some("PREPARED")),
        "{view}"
    );
    drop(service);
    db.drop_db().await;
}

async fn body_id(service: &ServiceProcess, token: &str) -> u64 {
    let (_, view) = service
        .call(reqwest::Method::GET, "/v1/messages/shop/k", token, None)
        .await;
    view["id"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_signing_secret_is_shown_when_issued_and_on_an_explicit_reveal_only() {
    let db = TestDb::create().await;
    let service = ServiceProcess::start(&db, NO_KAFKA, QUIET).await;
    let (status, created) = put_producer(
        &service,
        "shop",
        json!({"verify_url": UNREACHABLE_VERIFY_URL, "topics": ["orders"]}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let secret = created["signing_secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("whsec_"), "{created}");

    for path in ["/v1/producers/shop", "/v1/producers"] {
        let (status, body) = admin_get(&service, path).await;
        assert_eq!(status, 200, "{body}");
        assert!(
            !body.to_string().contains(&secret),
            "{path} shows the secret: {body}"
        );
    }
    let (status, updated) = put_producer(
        &service,
        "shop",
        json!({"verify_url": UNREACHABLE_VERIFY_URL, "topics": ["orders"]}),
    )
    .await;
    assert_eq!(status, 200);
    assert!(!updated.to_string().contains(&secret), "{updated}");
    let (ok, out, err) = admin_cli(&service, &["producers", "show", "shop"]);
    assert!(ok && !out.contains(&secret), "{out}{err}");

    let (status, rotated) = service
        .call(
            reqwest::Method::POST,
            "/v1/producers/shop/rotate-token",
            ADMIN_TOKEN,
            None,
        )
        .await;
    assert_eq!(status, 200, "{rotated}");
    assert_eq!(rotated["signing_secret"].as_str(), Some(secret.as_str()));
    let producer_token = rotated["token"].as_str().unwrap().to_string();

    let reveal = "/v1/producers/shop/reveal-signing-secret";
    let (status, body) = service
        .call(reqwest::Method::POST, reveal, ADMIN_TOKEN, None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"biz_id": "shop", "signing_secret": secret}));
    let (status, body) = service
        .call(reqwest::Method::POST, reveal, &producer_token, None)
        .await;
    assert_eq!((status, code(&body)), (403, "forbidden"), "{body}");
    let (ok, out, err) = admin_cli(&service, &["producers", "reveal-signing-secret", "shop"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), secret);
    drop(service);
    db.drop_db().await;
}
