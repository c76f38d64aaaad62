//! What prepare accepts, the forwarder can send: the Kafka record a message
//! makes (payload, key, headers and framing) is checked at prepare against the
//! same `message.max.bytes` the producer is given.

use std::time::Duration;

use serde_json::{json, Value};
use trustmsg_tests::kafka::{MockKafka, TopicReader};
use trustmsg_tests::{TestApp, UNREACHABLE_VERIFY_URL};
use trustmsg_verify_api::SendStatus;

use super::{decide, kafka_flags, refs, wait_for_row};

/// librdkafka's default `message.max.bytes`, which trustmsg's default matches.
const RECORD_LIMIT: usize = 1_000_000;

fn big_body(message_key: &str, payload_len: usize, key: Option<&str>, headers: &Value) -> Value {
    let mut b = json!({
        "biz_id": "shop",
        "message_key": message_key,
        "topic": "orders",
        "payload": "x".repeat(payload_len),
        "headers": headers,
    });
    if let Some(k) = key {
        b["key"] = json!(k);
    }
    b
}

async fn count_rows(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM messages")
        .fetch_one(&app.db.pool().await)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_of_1_010_000_bytes_is_refused_at_prepare_instead_of_failing_to_send() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 1);
    let app = TestApp::spawn(&refs(&kafka_flags(kafka.bootstrap()))).await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    let (s, err) = app
        .prepare(
            Some(&token),
            &big_body("too-big", 1_010_000, None, &json!({})),
        )
        .await;
    assert_eq!(s, 413, "{err}");
    assert_eq!(err["error"]["code"], "payload_too_large");
    let message = err["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("1010000 bytes") && message.contains("limit is"),
        "names the size and the limit: {message}"
    );
    assert_eq!(count_rows(&app).await, 0, "nothing written");
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_payload_prepare_accepts_with_key_and_headers_is_delivered_whole() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 1);
    let mut flags = kafka_flags(kafka.bootstrap());
    // The record limit, not the payload limit, is what binds here.
    flags.extend(["--max-payload-bytes".to_string(), "999000".to_string()]);
    let app = TestApp::spawn(&refs(&flags)).await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    let key = "k".repeat(1000);
    let headers = json!({"content-type": "application/json", "x-trace": "t".repeat(3000)});
    let raw = key.len() + "content-type".len() + "application/json".len() + "x-trace".len() + 3000;

    // Find the largest accepted payload; every probe's message_key has the
    // same length, since it is part of the record too.
    let mut probe = 0;
    let mut prepare = |len: usize| {
        probe += 1;
        let b = big_body(&format!("probe-{probe:03}"), len, Some(&key), &headers);
        let (app, token) = (&app, &token);
        async move {
            let (s, v) = app.prepare(Some(token), &b).await;
            assert!(s == 201 || s == 413, "{s}: {v}");
            (s == 201, b, v)
        }
    };
    let (mut fits, mut too_big) = (RECORD_LIMIT - raw - 1000, RECORD_LIMIT - raw);
    assert!(prepare(fits).await.0, "a payload well under the limit fits");
    let (accepted, _, refusal) = prepare(too_big).await;
    assert!(
        !accepted,
        "payload + key + headers = the record limit leaves no room for framing"
    );
    assert!(
        refusal["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("record limit is {RECORD_LIMIT} bytes")),
        "{refusal}"
    );
    while too_big - fits > 1 {
        let mid = (fits + too_big) / 2;
        if prepare(mid).await.0 {
            fits = mid;
        } else {
            too_big = mid;
        }
    }
    assert!(
        RECORD_LIMIT - raw - fits < 400,
        "only framing and trustmsg's own headers are held back: {fits}"
    );

    let (accepted, largest, view) = prepare(fits).await;
    assert!(accepted, "{view}");
    let id = view["id"].as_u64().unwrap();
    let message_key = largest["message_key"].as_str().unwrap();
    decide(&app, &token, "shop", message_key, true).await;
    let row = wait_for_row(&app, id, Duration::from_secs(20), "SENT", |m| {
        m.send_status != Some(SendStatus::Pending)
    })
    .await;
    assert_eq!(
        row.send_status,
        Some(SendStatus::Sent),
        "{:?}",
        row.last_error
    );

    let mut reader = TopicReader::new(kafka.bootstrap(), "orders");
    reader
        .read_until(Duration::from_secs(20), "the largest record", |rs| {
            rs.iter().any(|r| r.message_id == id)
        })
        .await;
    let record = reader.records.iter().find(|r| r.message_id == id).unwrap();
    assert_eq!(record.key.as_deref(), Some(key.as_bytes()));
    assert_eq!(record.payload.as_ref().map(Vec::len), Some(fits));
    assert_eq!(record.header("x-trace"), Some("t".repeat(3000).as_bytes()));
    app.finish().await;
}

#[tokio::test]
async fn key_and_headers_that_push_a_payload_over_the_record_limit_are_refused() {
    let app = TestApp::spawn(&["--max-payload-bytes", "999000"]).await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    let payload = 990_000;
    let (s, v) = app
        .prepare(Some(&token), &big_body("alone", payload, None, &json!({})))
        .await;
    assert_eq!(s, 201, "the payload alone fits: {v}");
    let heavy = json!({"a": "v".repeat(8000), "b": "w".repeat(8000)});
    let (s, err) = app
        .prepare(
            Some(&token),
            &big_body("heavy", payload, Some(&"k".repeat(1024)), &heavy),
        )
        .await;
    assert_eq!(s, 413, "{err}");
    assert_eq!(err["error"]["code"], "payload_too_large");
    let message = err["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("the record limit is {RECORD_LIMIT} bytes"))
            && message.contains("--kafka-message-max-bytes"),
        "names the limit and the flag: {message}"
    );
    assert_eq!(count_rows(&app).await, 1, "the refused one is not written");
    app.finish().await;
}
