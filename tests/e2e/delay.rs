//! Delivery at a chosen time (`deliver_at`, `deliver_after_ms`), on the real
//! binary: a delayed message committed at once is not in Kafka before its
//! time and is there soon after, as the record it would always have been; a
//! time in the past goes at once; too long a delay is a 400 naming the
//! field; an operator's send-now sends a delayed message at once; and a
//! delayed message survives a kill -9 and is still sent on time.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use trustmsg_client::{Message, Producer};
use trustmsg_tests::kafka::Consumed;
use trustmsg_tests::{eventually, ServiceProcess, TestDb, ADMIN_TOKEN, UNREACHABLE_VERIFY_URL};

use crate::harness::{settings, Kafka, FAST_VERIFY};

const TOPIC: &str = "e2e-delay";

/// The sweeper looks every 200 ms: "as soon as possible after" its time;
/// the backlog gauges are read as often, and a send waiting 1 s is overdue.
const SWEEP: &[&str] = &[
    "--sweep-interval",
    "200ms",
    "--backlog-interval",
    "200ms",
    "--alert-send-overdue-after",
    "1s",
];

/// A service with one producer, "shop", whose check-back never decides
/// anything (each test commits itself).
async fn start(db: &TestDb, kafka: &Kafka) -> (ServiceProcess, Producer) {
    let service = ServiceProcess::start(db, kafka.mock.bootstrap(), SWEEP).await;
    let (token, _) = service
        .register("shop", settings(UNREACHABLE_VERIFY_URL, 3_600_000, 5))
        .await;
    let producer = Producer::new(&service.url(), "shop", token).unwrap();
    (service, producer)
}

/// The record of message `id`, if it reached Kafka by now.
fn record_of(kafka: &Kafka, id: u64) -> Option<Consumed> {
    kafka.records().into_iter().find(|r| r.message_id == id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_delayed_5s_is_not_sent_at_2_5s_and_is_sent_by_8s_as_the_usual_record() {
    let db = TestDb::create().await;
    let kafka = Kafka::start(&[TOPIC]);
    let (service, producer) = start(&db, &kafka).await;

    let prepared_at = Instant::now();
    let view = producer
        .prepare(
            &Message::new("later", TOPIC, "{\"n\":1}")
                .key("customer-7")
                .header("source", "shop")
                .deliver_after(Duration::from_secs(5)),
        )
        .await
        .unwrap();
    let deliver_at = view.deliver_at.expect("the view shows deliver_at");
    let delay = deliver_at - view.created_at;
    assert_eq!(
        delay.num_milliseconds(),
        5_000,
        "5 s after the prepare, by the database clock"
    );
    let committed = producer.commit("later").await.unwrap();
    assert_eq!(
        committed.next_send_at,
        Some(deliver_at),
        "due at its time, not claimed now"
    );

    // Operators see it as scheduled, "due at" its time, and not as backlog.
    let (status, detail) = service
        .admin(
            Method::GET,
            &format!("/v1/admin/messages/{}", view.id),
            None,
        )
        .await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(
        detail["message"]["deliver_at"]
            .as_str()
            .map(|s| s.parse::<chrono::DateTime<chrono::Utc>>().unwrap()),
        Some(deliver_at)
    );
    let (_, list) = service
        .admin(Method::GET, "/v1/admin/messages?biz_id=shop", None)
        .await;
    assert!(list["items"][0]["deliver_at"].is_string(), "{list}");
    let (_, summary) = service.admin(Method::GET, "/v1/admin/summary", None).await;
    let shop = &summary["producers"][0];
    assert_eq!(shop["scheduled"], 1, "{summary}");
    assert!(shop["by_send_status"].get("PENDING").is_none(), "{summary}");

    // Not before its time.
    tokio::time::sleep(Duration::from_millis(2_500).saturating_sub(prepared_at.elapsed())).await;
    assert!(record_of(&kafka, view.id).is_none(), "sent before its time");

    // By 8 s it is there, the record as any other message's.
    eventually(8, "the delayed message in Kafka", async || {
        record_of(&kafka, view.id).is_some()
    })
    .await;
    let sent = record_of(&kafka, view.id).unwrap();
    assert!(
        sent.at.duration_since(prepared_at) >= Duration::from_millis(4_900),
        "sent {:?} after the prepare",
        sent.at.duration_since(prepared_at)
    );
    assert!(
        prepared_at.elapsed() <= Duration::from_secs(9),
        "sent by 8 s"
    );
    assert_eq!(sent.topic, TOPIC);
    assert_eq!(sent.key.as_deref(), Some(&b"customer-7"[..]));
    assert_eq!(sent.payload.as_deref(), Some(&b"{\"n\":1}"[..]));
    let id = view.id.to_string();
    let mut headers: Vec<(String, Option<Vec<u8>>)> = sent.headers.clone();
    headers.sort();
    let mut want = vec![
        ("source".to_string(), Some(b"shop".to_vec())),
        ("trustmsg-biz-id".to_string(), Some(b"shop".to_vec())),
        ("trustmsg-message-id".to_string(), Some(id.into_bytes())),
        ("trustmsg-message-key".to_string(), Some(b"later".to_vec())),
    ];
    want.sort();
    assert_eq!(headers, want, "no header of its own for a delayed message");

    // A time in the past means now: committed, it goes at once.
    let past = chrono::Utc::now() - chrono::TimeDelta::hours(1);
    let now_view = producer
        .prepare(&Message::new("past", TOPIC, "p").deliver_at(past))
        .await
        .unwrap();
    let committed_at = Instant::now();
    producer.commit("past").await.unwrap();
    eventually(3, "a message due in the past sent at once", async || {
        record_of(&kafka, now_view.id).is_some()
    })
    .await;
    assert!(committed_at.elapsed() < Duration::from_secs(3));
    drop(service);
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delay_beyond_7_days_or_two_delays_at_once_is_a_400_naming_the_field() {
    let db = TestDb::create().await;
    let kafka = Kafka::start(&[TOPIC]);
    let (service, _) = start(&db, &kafka).await;
    let prepare = |key: &str, extra: Value| {
        let mut body =
            json!({"biz_id": "shop", "message_key": key, "topic": TOPIC, "payload": "p"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let eight_days = chrono::Utc::now() + chrono::TimeDelta::days(8);
    for (key, extra, code, field) in [
        (
            "a",
            json!({"deliver_after_ms": 8u64 * 24 * 3600 * 1000}),
            "invalid_deliver_after_ms",
            "deliver_after_ms",
        ),
        (
            "b",
            json!({"deliver_at": eight_days.to_rfc3339()}),
            "invalid_deliver_at",
            "deliver_at",
        ),
        (
            "c",
            json!({"deliver_at": "tomorrow"}),
            "invalid_deliver_at",
            "deliver_at",
        ),
        (
            "d",
            json!({"deliver_at": chrono::Utc::now().to_rfc3339(), "deliver_after_ms": 1000}),
            "invalid_delivery",
            "deliver_after_ms",
        ),
    ] {
        let (status, body) = service
            .call(
                Method::POST,
                "/v1/messages/prepare",
                ADMIN_TOKEN,
                Some(&prepare(key, extra)),
            )
            .await;
        assert_eq!(status, 400, "{key}: {body}");
        assert_eq!(body["error"]["code"], code, "{key}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(field), "{key}: {message}");
        if code == "invalid_delivery" {
            assert!(message.contains("deliver_at"), "names both: {message}");
        }
        let (status, _) = service
            .admin(Method::GET, &format!("/v1/messages/shop/{key}"), None)
            .await;
        assert_eq!(status, 404, "{key}: nothing was stored");
    }
    // The longest delay itself is accepted.
    let (status, body) = service
        .call(
            Method::POST,
            "/v1/messages/prepare",
            ADMIN_TOKEN,
            Some(&prepare(
                "e",
                json!({"deliver_after_ms": 7u64 * 24 * 3600 * 1000}),
            )),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    drop(service);
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_now_sends_a_message_delayed_by_an_hour_at_once() {
    let db = TestDb::create().await;
    let kafka = Kafka::start(&[TOPIC]);
    let (service, producer) = start(&db, &kafka).await;
    let view = producer
        .prepare(&Message::new("hour", TOPIC, "p").deliver_after(Duration::from_secs(3600)))
        .await
        .unwrap();
    // Before the commit it is not a waiting send: 409.
    let path = format!("/v1/admin/messages/{}/send-now", view.id);
    let (status, body) = service
        .admin(Method::POST, &path, Some(&json!({"reason": "too early"})))
        .await;
    assert_eq!(status, 409, "{body}");
    producer.commit("hour").await.unwrap();
    // Scheduled, not backlog, and not overdue although its commit is older
    // than --alert-send-overdue-after (1 s) by far.
    eventually(5, "the scheduled gauge", async || {
        let m = service.metrics().await;
        m.value("trustmsg_messages_scheduled", &[]) == Some(1.0)
            && m.value(
                "trustmsg_backlog_messages",
                &[("status", "COMMITTED"), ("send_status", "PENDING")],
            ) == Some(0.0)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(record_of(&kafka, view.id).is_none(), "delayed by an hour");
    let (_, alerts) = service.admin(Method::GET, "/v1/admin/alerts", None).await;
    assert_eq!(alerts["items"], json!([]), "not overdue: {alerts}");

    let (status, body) = service.admin(Method::POST, &path, Some(&json!({}))).await;
    assert_eq!(status, 400, "a reason is required: {body}");
    let asked = Instant::now();
    let (status, body) = service
        .admin(
            Method::POST,
            &path,
            Some(&json!({"reason": "customer asked for it now"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    eventually(3, "the message sent now", async || {
        record_of(&kafka, view.id).is_some()
    })
    .await;
    assert!(asked.elapsed() < Duration::from_secs(3));

    let (_, detail) = service
        .admin(
            Method::GET,
            &format!("/v1/admin/messages/{}", view.id),
            None,
        )
        .await;
    let audit = detail["audit"].as_array().unwrap();
    let entry = audit
        .iter()
        .find(|a| a["action"] == "send_now")
        .unwrap_or_else(|| panic!("a send_now audit entry: {detail}"));
    assert_eq!(entry["actor"], "operator:admin");
    assert_eq!(entry["reason"], "customer asked for it now");
    // Sent (or at least no longer waiting for its time): a second send-now changes nothing.
    let (status, body) = service
        .admin(Method::POST, &path, Some(&json!({"reason": "again"})))
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "wrong_state");
    drop(service);
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_message_survives_kill_9_and_is_still_sent_on_time() {
    // Long enough for a kill -9 and a restart on a loaded machine (one took
    // 3.3 s beside eleven other tests) before the message is due.
    const DELAY: Duration = Duration::from_secs(8);
    let db = TestDb::create().await;
    let kafka = Kafka::start(&[TOPIC]);
    let (mut service, producer) = start(&db, &kafka).await;
    let prepared_at = Instant::now();
    let view = producer
        .prepare(&Message::new("survivor", TOPIC, "p").deliver_after(DELAY))
        .await
        .unwrap();
    producer.commit("survivor").await.unwrap();
    service.restart().await;
    // The restarted service must have had time to send it early.
    assert!(
        prepared_at.elapsed() < DELAY - Duration::from_secs(2),
        "the restart took {:?}: too long for this test",
        prepared_at.elapsed()
    );
    tokio::time::sleep((DELAY - Duration::from_secs(1)).saturating_sub(prepared_at.elapsed()))
        .await;
    assert!(record_of(&kafka, view.id).is_none(), "sent before its time");
    // The bound after the time is loose on purpose: what is asserted is that
    // the restarted service sends it, never before its time. How soon after
    // is the scheduler's (a 3 s bound failed once in CI beside two real
    // brokers' JVMs starting on the same 2 cores); speed is the bench's.
    eventually(
        15,
        "the delayed message in Kafka after the restart",
        async || record_of(&kafka, view.id).is_some(),
    )
    .await;
    let sent = record_of(&kafka, view.id).unwrap();
    let after = sent.at.duration_since(prepared_at);
    assert!(
        after >= DELAY - Duration::from_millis(100),
        "sent {after:?} after the prepare, for a {DELAY:?} delay"
    );
    drop(service);
    db.drop_db().await;
}

/// Every kind of commit follows the delivery time: check-back's (the
/// producer never calls commit; its endpoint answers commit) and an
/// operator's resolve are no more sent before the message's time than the
/// producer's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_by_check_back_or_by_an_operator_also_waits_for_the_time() {
    let db = TestDb::create().await;
    let kafka = Kafka::start(&[TOPIC]);
    let check = trustmsg_tests::CheckServer::start().await;
    check.script("by-check", trustmsg_tests::Reply::Decide("commit"));
    let service = ServiceProcess::start(&db, kafka.mock.bootstrap(), FAST_VERIFY).await;
    let (token, secret) = service
        .register("shop", settings(&check.url(), 300, 5))
        .await;
    check.set_secret(&secret);
    let producer = Producer::new(&service.url(), "shop", token).unwrap();

    let prepared_at = Instant::now();
    let by_check = producer
        .prepare(&Message::new("by-check", TOPIC, "p").deliver_after(Duration::from_secs(4)))
        .await
        .unwrap();
    let by_operator = producer
        .prepare(&Message::new("by-operator", TOPIC, "p").deliver_after(Duration::from_secs(4)))
        .await
        .unwrap();
    let (status, body) = service
        .admin(
            Method::POST,
            &format!("/v1/admin/messages/{}/resolve", by_operator.id),
            Some(&json!({"decision": "commit", "reason": "known to be committed"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    eventually(3, "check-back committed it", async || {
        producer.get("by-check").await.unwrap().status == trustmsg_client::MessageStatus::Committed
    })
    .await;

    tokio::time::sleep(Duration::from_millis(3_000).saturating_sub(prepared_at.elapsed())).await;
    for m in [&by_check, &by_operator] {
        assert!(
            record_of(&kafka, m.id).is_none(),
            "{} sent before its time",
            m.message_key
        );
    }
    eventually(6, "both in Kafka after their time", async || {
        record_of(&kafka, by_check.id).is_some() && record_of(&kafka, by_operator.id).is_some()
    })
    .await;
    for m in [&by_check, &by_operator] {
        let at = record_of(&kafka, m.id)
            .unwrap()
            .at
            .duration_since(prepared_at);
        assert!(
            at >= Duration::from_millis(3_900),
            "{}: sent {at:?} after the prepare",
            m.message_key
        );
    }
    drop(service);
    db.drop_db().await;
}
