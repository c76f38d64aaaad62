//! The consumption ledger end to end (issue 30, part 2): the real binary,
//! MariaDB, the mock Kafka and a real alert webhook. Two consumer groups,
//! `billing` and `analytics`, consume one topic: billing processes every
//! message once (a second begin is told `done`); analytics fails one message
//! until its `max_failures` (exactly one `consumption_failing` alert
//! reaches the webhook), holds another past its `in_progress_timeout_ms`
//! (one `consumption_stuck` alert, then a takeover), and leaves one alone.
//! Lag per group from the admin API, the CLI and `/metrics`; the message view
//! lists both groups; each refusal names its cause.

use std::process::Command;

use reqwest::Method;
use serde_json::{json, Value};
use trustmsg_tests::process::binary;
use trustmsg_tests::{eventually, AlertSink, CheckServer, ServiceProcess, TestDb, ADMIN_TOKEN};

use crate::harness::Kafka;

const TOPIC: &str = "e2e-ledger";

async fn put_group(svc: &ServiceProcess, group: &str, body: Value) -> (u16, Value) {
    svc.call(
        Method::PUT,
        &format!("/v1/consumer-groups/{group}"),
        ADMIN_TOKEN,
        Some(&body),
    )
    .await
}

async fn begin(svc: &ServiceProcess, token: &str, group: &str, id: u64) -> (u16, Value) {
    let body = json!({ "group": group, "message_id": id });
    svc.call(Method::POST, "/v1/consumptions/begin", token, Some(&body))
        .await
}

async fn finish(svc: &ServiceProcess, token: &str, body: Value) -> (u16, Value) {
    svc.call(Method::POST, "/v1/consumptions/finish", token, Some(&body))
        .await
}

/// Begins and expects `go` with `attempts`.
async fn go(svc: &ServiceProcess, token: &str, group: &str, id: u64, attempts: u32) {
    let (status, body) = begin(svc, token, group, id).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({ "state": "go", "attempts": attempts }),
        "{group} {id}"
    );
}

fn alerts_of(sink: &AlertSink, kind: &str) -> Vec<Value> {
    sink.alerts()
        .into_iter()
        .filter(|a| a["kind"] == kind)
        .collect()
}

/// `trustmsg admin …` against the service; its stdout (it must succeed).
fn admin_cli(svc: &ServiceProcess, args: &[&str]) -> String {
    let out = Command::new(binary())
        .args(["admin", "--url", &svc.url(), "--admin-token", ADMIN_TOKEN])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_groups_consume_one_topic_with_one_failing_alert_one_stuck_alert_and_their_lag() {
    let db = TestDb::create().await;
    let kafka = Kafka::start(&[TOPIC]);
    let sink = AlertSink::start().await;
    let webhook = sink.url();
    let svc = ServiceProcess::start(
        &db,
        kafka.mock.bootstrap(),
        &["--alert-webhook", &webhook, "--backlog-interval", "200ms"],
    )
    .await;
    let check = CheckServer::start().await;
    let (producer, _) = svc
        .register(
            "shop",
            json!({ "verify_url": check.url(), "first_verify_after_ms": 600000, "topics": [TOPIC] }),
        )
        .await;

    // The registry: 201 with a token once, 200 without it on update.
    let (status, billing) = put_group(&svc, "billing", json!({ "topics": [TOPIC] })).await;
    assert_eq!(status, 201, "{billing}");
    let billing_token = billing["token"].as_str().unwrap().to_string();
    assert!(billing_token.starts_with("tc_"), "{billing}");
    assert_eq!(
        (
            billing["max_failures"].clone(),
            billing["in_progress_timeout_ms"].clone()
        ),
        (json!(5), json!(300000)),
        "the defaults"
    );
    let analytics_settings =
        json!({ "topics": ["e2e-*"], "max_failures": 3, "in_progress_timeout_ms": 1000 });
    let (status, analytics) = put_group(&svc, "analytics", analytics_settings.clone()).await;
    assert_eq!(status, 201, "{analytics}");
    let analytics_token = analytics["token"].as_str().unwrap().to_string();
    let (status, again) = put_group(&svc, "analytics", analytics_settings).await;
    assert_eq!(status, 200, "{again}");
    assert!(
        again.get("token").is_none(),
        "an update shows no token: {again}"
    );
    let (status, bad) = put_group(&svc, "bad", json!({ "topics": [] })).await;
    assert_eq!(
        (status, bad["error"]["code"].clone()),
        (400, json!("invalid_topics"))
    );

    // Three messages produced, committed and SENT through the mock Kafka.
    let http = trustmsg_tests::http_client();
    for key in ["m1", "m2", "m3"] {
        for (path, body) in [
            (
                "prepare",
                json!({ "biz_id": "shop", "message_key": key, "topic": TOPIC, "payload": key }),
            ),
            ("commit", json!({ "biz_id": "shop", "message_key": key })),
        ] {
            let res = http
                .post(format!("{}/v1/messages/{path}", svc.url()))
                .bearer_auth(&producer)
                .json(&body)
                .send()
                .await
                .unwrap();
            assert!(res.status().is_success(), "{path} {key}: {}", res.status());
        }
    }
    let mut ids = Vec::new();
    eventually(30, "three records in Kafka", async || {
        ids = kafka.records().iter().map(|r| r.message_id).collect();
        ids.len() >= 3
    })
    .await;
    ids.sort_unstable();
    ids.dedup();
    let [m1, m2, m3] = ids[..] else {
        panic!("three messages: {ids:?}")
    };
    eventually(30, "the three marked SENT", async || {
        let page = svc.admin_get("/v1/admin/messages?send_status=SENT").await;
        page["items"].as_array().is_some_and(|a| a.len() == 3)
    })
    .await;

    // billing processes every message once: go, finish ok, then done.
    for id in [m1, m2, m3] {
        go(&svc, &billing_token, "billing", id, 1).await;
        let (status, body) = finish(
            &svc,
            &billing_token,
            json!({ "group": "billing", "message_id": id, "ok": true }),
        )
        .await;
        assert_eq!(
            (status, body),
            (200, json!({ "state": "done", "attempts": 1 }))
        );
        let (status, body) = begin(&svc, &billing_token, "billing", id).await;
        assert_eq!(
            (status, body),
            (200, json!({ "state": "done", "attempts": 1 }))
        );
    }
    // A repeated finish (a lost answer) changes nothing and says the same.
    let (status, body) = finish(
        &svc,
        &billing_token,
        json!({ "group": "billing", "message_id": m1, "ok": true }),
    )
    .await;
    assert_eq!(
        (status, body),
        (200, json!({ "state": "done", "attempts": 1 }))
    );

    // analytics fails m1 until max_failures (3), and once more.
    for attempt in 1..=4 {
        go(&svc, &analytics_token, "analytics", m1, attempt).await;
        let (status, body) = finish(
            &svc,
            &analytics_token,
            json!({ "group": "analytics", "message_id": m1, "ok": false, "error": format!("e{attempt}") }),
        )
        .await;
        assert_eq!(
            (status, body),
            (200, json!({ "state": "failed", "attempts": attempt }))
        );
    }
    eventually(30, "the consumption_failing alert delivered", async || {
        !alerts_of(&sink, "consumption_failing").is_empty()
    })
    .await;

    // analytics holds m2 past its 1 s timeout: in_progress meanwhile, one
    // stuck alert, then a takeover that finishes.
    go(&svc, &analytics_token, "analytics", m2, 1).await;
    let (status, held) = begin(&svc, &analytics_token, "analytics", m2).await;
    assert_eq!(
        (status, held["state"].clone(), held["attempts"].clone()),
        (200, json!("in_progress"), json!(1))
    );
    // `since` is when the holding delivery began, as the message view says.
    let detail = svc.admin_get(&format!("/v1/admin/messages/{m2}")).await;
    let holder = detail["consumptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["group"] == "analytics")
        .cloned()
        .unwrap_or_default();
    assert!(held["since"].is_string(), "{held}");
    assert_eq!(held["since"], holder["last_began_at"], "{held} {holder}");
    eventually(30, "the consumption_stuck alert delivered", async || {
        !alerts_of(&sink, "consumption_stuck").is_empty()
    })
    .await;
    go(&svc, &analytics_token, "analytics", m2, 2).await;
    let (status, body) = finish(
        &svc,
        &analytics_token,
        json!({ "group": "analytics", "message_id": m2, "ok": true }),
    )
    .await;
    assert_eq!(
        (status, body),
        (200, json!({ "state": "done", "attempts": 2 }))
    );
    // Long enough for any repeat to have been raised and POSTed.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let failing = alerts_of(&sink, "consumption_failing");
    assert_eq!(failing.len(), 1, "exactly one failing alert: {failing:?}");
    let a = &failing[0];
    assert_eq!(
        (
            a["group"].clone(),
            a["message_id"].clone(),
            a["attempts"].clone(),
            a["biz_id"].clone()
        ),
        (json!("analytics"), json!(m1), json!(3), json!("shop")),
        "{a}"
    );
    assert!(a["last_error"].as_str().unwrap().contains("e3"), "{a}");
    let stuck = alerts_of(&sink, "consumption_stuck");
    assert_eq!(stuck.len(), 1, "exactly one stuck alert: {stuck:?}");
    assert_eq!(
        (stuck[0]["group"].clone(), stuck[0]["message_id"].clone()),
        (json!("analytics"), json!(m2))
    );
    let listed = svc.admin_get("/v1/admin/alerts").await;
    let groups: Vec<&Value> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["group"])
        .collect();
    assert!(groups.contains(&&json!("analytics")), "{listed}");

    // Refusals, each naming its cause.
    let (status, body) = begin(&svc, &billing_token, "analytics", m3).await;
    assert_eq!(status, 403, "another group's token: {body}");
    let (status, _) = begin(&svc, "tc_bm9ib2R5.secret", "billing", m3).await;
    assert_eq!(status, 401, "a made-up group token");
    let (status, body) = begin(&svc, &billing_token, "billing", 999_999_999).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (404, json!("message_not_found"))
    );
    let (status, body) = begin(&svc, ADMIN_TOKEN, "nobody", m3).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (404, json!("consumer_group_not_found"))
    );
    let (status, body) = finish(
        &svc,
        &analytics_token,
        json!({ "group": "analytics", "message_id": m3, "ok": true }),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (409, json!("not_begun")),
        "{body}"
    );
    assert!(
        body["error"]["message"].as_str().unwrap().contains("begin"),
        "{body}"
    );
    let (status, body) = begin(&svc, &billing_token, "bad group", m3).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!("invalid_group"))
    );
    let (status, body) = svc
        .call(
            Method::POST,
            "/v1/consumptions/begin",
            &billing_token,
            Some(&json!({ "group": "billing", "message_id": "x" })),
        )
        .await;
    assert_eq!(status, 400);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("message_id"),
        "{body}"
    );
    let (status, body) = finish(
        &svc,
        &billing_token,
        json!({ "group": "billing", "message_id": m1, "ok": true, "error": "no" }),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!("invalid_error"))
    );
    let (status, body) = finish(
        &svc,
        &analytics_token,
        json!({ "group": "analytics", "message_id": m1, "ok": false, "error": "x".repeat(2001) }),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!("invalid_error"))
    );

    // Lag per group: analytics processed m2, fails m1, never began m3.
    let want = json!([
        { "group": "analytics", "topics": ["e2e-*"], "processed": 1, "failing": 1, "in_progress": 0, "lag": 2 },
        { "group": "billing", "topics": [TOPIC], "processed": 3, "failing": 0, "in_progress": 0, "lag": 0 },
    ]);
    eventually(10, "the admin API's counts", async || {
        svc.admin_get("/v1/admin/consumer-groups").await["items"] == want
    })
    .await;
    let cli: Value =
        serde_json::from_str(&admin_cli(&svc, &["consumer-groups", "list", "--json"])).unwrap();
    assert_eq!(cli["items"], want);
    let table = admin_cli(&svc, &["consumer-groups", "list"]);
    assert!(
        table.contains("analytics") && table.contains("lag"),
        "{table}"
    );
    eventually(10, "the gauges in /metrics", async || {
        let m = svc.metrics().await;
        m.value("trustmsg_consumer_lag", &[("group", "analytics")]) == Some(2.0)
            && m.value("trustmsg_consumer_lag", &[("group", "billing")]) == Some(0.0)
            && m.value("trustmsg_consumer_processed", &[("group", "billing")]) == Some(3.0)
            && m.value("trustmsg_consumer_failing", &[("group", "analytics")]) == Some(1.0)
    })
    .await;
    let m = svc.metrics().await;
    assert_eq!(
        m.value(
            "trustmsg_consumptions_total",
            &[("group", "billing"), ("outcome", "done")]
        ),
        Some(3.0),
        "{m}"
    );
    assert_eq!(
        m.value(
            "trustmsg_consumptions_total",
            &[("group", "analytics"), ("outcome", "failed")]
        ),
        Some(4.0)
    );

    // The message view lists both groups, by name, with exactly these fields.
    let detail = svc.admin_get(&format!("/v1/admin/messages/{m1}")).await;
    let rows = detail["consumptions"].as_array().unwrap();
    let fields: Vec<Vec<&str>> = rows
        .iter()
        .map(|r| {
            let mut keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
            keys.sort_unstable();
            keys
        })
        .collect();
    let want_fields = vec![
        "attempts",
        "finished_at",
        "first_began_at",
        "group",
        "last_began_at",
        "last_error",
        "state",
        "updated_at",
    ];
    assert_eq!(fields, vec![want_fields.clone(), want_fields], "{detail}");
    let brief: Vec<(Value, Value, Value, Value)> = rows
        .iter()
        .map(|r| {
            (
                r["group"].clone(),
                r["state"].clone(),
                r["attempts"].clone(),
                r["last_error"].clone(),
            )
        })
        .collect();
    assert_eq!(
        brief,
        [
            (json!("analytics"), json!("failed"), json!(4), json!("e4")),
            (json!("billing"), json!("done"), json!(1), Value::Null),
        ]
    );
    let shown = admin_cli(&svc, &["messages", "show", &m1.to_string()]);
    assert!(
        shown.contains("consumptions:") && shown.contains("analytics") && shown.contains("e4"),
        "{shown}"
    );

    drop(svc);
    db.drop_db().await;
}
