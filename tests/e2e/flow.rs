//! `GET /v1/admin/flow` against the real binary: two instances on one
//! database count what each did and the flow per minute is their sum; the
//! counts of an instance stopped between two flushes are added at its
//! shutdown and outlive it; the window is one entry per minute, oldest
//! first, zeros filled in; a bad `minutes` is a 400 naming it.

use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use serde_json::Value;
use trustmsg_client::{Message, Producer};
use trustmsg_tests::{eventually, ServiceProcess, TestDb, ADMIN_TOKEN, UNREACHABLE_VERIFY_URL};

use crate::harness::{settings, Kafka};

const TOPIC: &str = "e2e-flow";

/// Each count summed over the minutes of `flow`.
fn totals(flow: &Value) -> Value {
    let mut sums = serde_json::Map::new();
    for m in flow["minutes"].as_array().unwrap() {
        for k in [
            "prepared",
            "committed",
            "rolled_back",
            "sent",
            "failed",
            "checks_commit",
            "checks_rollback",
            "checks_unknown",
            "checks_failed",
        ] {
            let n = sums.get(k).and_then(Value::as_u64).unwrap_or(0) + m[k].as_u64().unwrap();
            sums.insert(k.into(), n.into());
        }
    }
    Value::Object(sums)
}

fn did(prepared: u64, committed: u64, rolled_back: u64, sent: u64) -> Value {
    serde_json::json!({
        "prepared": prepared, "committed": committed, "rolled_back": rolled_back, "sent": sent,
        "failed": 0, "checks_commit": 0, "checks_rollback": 0, "checks_unknown": 0,
        "checks_failed": 0,
    })
}

async fn sent(service: &ServiceProcess) -> usize {
    service
        .admin_get("/v1/admin/messages?send_status=SENT&limit=500")
        .await["items"]
        .as_array()
        .unwrap()
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flow_sums_what_every_instance_did_per_minute_and_outlives_a_restart() {
    let db = TestDb::create().await;
    let kafka = Kafka::start(&[TOPIC]);
    let common = [
        "--kafka-message-timeout",
        "1s",
        "--send-lease",
        "2s",
        "--backlog-interval",
        "200ms",
    ];
    // `slow` adds its counts once a minute (and at shutdown), `quick` often.
    let mut slow = ServiceProcess::start(
        &db,
        kafka.mock.bootstrap(),
        &[&common[..], &["--flow-interval", "1m"]].concat(),
    )
    .await;
    let quick = ServiceProcess::start(
        &db,
        kafka.mock.bootstrap(),
        &[&common[..], &["--flow-interval", "200ms"]].concat(),
    )
    .await;
    let (token, _) = slow
        .register("shop", settings(UNREACHABLE_VERIFY_URL, 3_600_000, 5))
        .await;
    let on_slow = Producer::new(&slow.url(), "shop", token.clone()).unwrap();
    let on_quick = Producer::new(&quick.url(), "shop", token).unwrap();
    for key in ["a1", "a2", "a3", "a4"] {
        on_slow
            .prepare(&Message::new(key, TOPIC, "p"))
            .await
            .unwrap();
    }
    // A repeat creates nothing: not counted.
    on_slow
        .prepare(&Message::new("a1", TOPIC, "p"))
        .await
        .unwrap();
    for key in ["a1", "a2", "a3"] {
        on_slow.commit(key).await.unwrap();
    }
    on_slow.rollback("a4").await.unwrap();
    for key in ["b1", "b2"] {
        on_quick
            .prepare(&Message::new(key, TOPIC, "p"))
            .await
            .unwrap();
        on_quick.commit(key).await.unwrap();
    }
    eventually(20, "five messages SENT", async || sent(&quick).await == 5).await;

    // What `quick` did shows within its interval; `slow`'s at its shutdown
    // (or at a minute's end, if the test crosses one): the sum, in any case.
    slow.terminate();
    eventually(20, "the flow of both instances", async || {
        totals(&quick.admin_get("/v1/admin/flow").await) == did(6, 5, 1, 5)
    })
    .await;
    let flow = quick.admin_get("/v1/admin/flow").await;
    let minutes = flow["minutes"].as_array().unwrap();
    assert_eq!(minutes.len(), 60, "the last hour by default");
    let now = Utc::now().duration_trunc(TimeDelta::minutes(1)).unwrap();
    let at = |m: &Value| m["at"].as_str().unwrap().parse::<DateTime<Utc>>().unwrap();
    assert_eq!(at(&minutes[59]), now, "the current minute last");
    assert!(
        minutes
            .windows(2)
            .all(|w| at(&w[1]) - at(&w[0]) == TimeDelta::minutes(1)),
        "one entry per minute, oldest first: {flow}"
    );
    // The backlog as last sampled, by whichever instance: nothing PREPARED
    // or PENDING (the stopped instance's older sample does not win).
    eventually(20, "the latest backlog sample", async || {
        let flow = quick.admin_get("/v1/admin/flow?minutes=2").await;
        let last = flow["minutes"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| !m["backlog_prepared"].is_null())
            .cloned();
        last.is_some_and(|m| m["backlog_prepared"] == 0 && m["backlog_pending"] == 0)
    })
    .await;

    // Earlier minutes, as other instances wrote them: in their place,
    // zeros between them, nothing older than the window.
    let pool = db.pool().await;
    for (ago, prepared) in [(3, 7u64), (8, 11), (90, 99)] {
        sqlx::query("INSERT INTO flow_minutes (minute, prepared, committed) VALUES (?, ?, 1)")
            .bind(now - TimeDelta::minutes(ago))
            .bind(prepared)
            .execute(&pool)
            .await
            .unwrap();
    }
    let flow = quick.admin_get("/v1/admin/flow?minutes=10").await;
    let minutes = flow["minutes"].as_array().unwrap();
    assert_eq!(minutes.len(), 10);
    assert_eq!(at(&minutes[0]), now - TimeDelta::minutes(9));
    // Up to two minutes ago: the last minute before this one holds this
    // test's own messages when the test began before the minute turned.
    let prepared: Vec<u64> = minutes[..8]
        .iter()
        .map(|m| m["prepared"].as_u64().unwrap())
        .collect();
    assert_eq!(prepared, [0, 11, 0, 0, 0, 0, 7, 0], "{flow}");
    assert!(
        minutes[0]["backlog_prepared"].is_null(),
        "not sampled: null"
    );

    // The console's instance restarts: the counts are still there.
    slow.restart().await;
    let flow = slow.admin_get("/v1/admin/flow?minutes=60").await;
    assert_eq!(totals(&flow)["sent"], 5, "{flow}");
    assert_eq!(totals(&flow)["prepared"], 6 + 7 + 11, "{flow}");

    for (query, names) in [
        ("minutes=0", "minutes"),
        ("minutes=1441", "minutes"),
        ("minutes=sixty", "minutes"),
        ("minutes=", "minutes"),
        ("hours=1", "\"hours\""),
    ] {
        let (status, body) = quick
            .call(
                reqwest::Method::GET,
                &format!("/v1/admin/flow?{query}"),
                ADMIN_TOKEN,
                None,
            )
            .await;
        assert_eq!(status, 400, "{query}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(names), "{query}: {message}");
    }
    let (status, _) = quick
        .call(
            reqwest::Method::GET,
            "/v1/admin/flow",
            "not-the-admin-token",
            None,
        )
        .await;
    assert_eq!(status, 401);
    drop(quick);
    drop(slow);
    tokio::time::sleep(Duration::from_millis(100)).await;
    db.drop_db().await;
}
