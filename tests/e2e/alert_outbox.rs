//! Alerts survive the process that raised them: a VERIFY_FAILED whose
//! webhook was answering 500 when the instance died (kill -9, or a graceful
//! shutdown) is delivered by the next instance once the webhook is healthy,
//! under one stable alert id, exactly one id per message.

use std::collections::BTreeSet;

use axum::http::StatusCode;
use reqwest::Method;
use serde_json::Value;
use trustmsg_tests::{eventually, AlertSink, TestDb};

use crate::harness::{one_verify_failed_alert, Kafka};

/// How the first instance goes away.
#[derive(Debug, Clone, Copy)]
enum Death {
    Kill9,
    Graceful,
}

/// The scenario: a producer whose endpoint never decides, 2 attempts; the
/// message reaches VERIFY_FAILED while the webhook answers 500; the
/// instance dies; a new one starts with the webhook healthy.
async fn a_verify_failed_alert_outlives(death: Death) {
    let db = TestDb::create().await;
    let kafka = Kafka::start(&["e2e-alerts"]);
    let sink = AlertSink::start().await;
    sink.answer(StatusCode::INTERNAL_SERVER_ERROR);
    let webhook = sink.url();
    let (mut service, id) =
        one_verify_failed_alert(&db, &kafka, "e2e-alerts", &["--alert-webhook", &webhook]).await;
    eventually(30, "the webhook refused the alert", async || {
        sink.refused() >= 1
    })
    .await;
    assert!(sink.alerts().is_empty(), "nothing was accepted yet");

    match death {
        Death::Kill9 => service.kill_9(),
        Death::Graceful => service.terminate_cleanly(),
    }
    sink.answer(StatusCode::NO_CONTENT);
    service.restart().await;

    eventually(60, "the alert delivered by the new instance", async || {
        sink.per_message().contains_key(&id)
    })
    .await;
    // The new instance has marked it delivered: no more POSTs of it come.
    eventually(30, "the alert marked delivered", async || {
        let path = format!("/v1/admin/alerts?message_id={id}&state=delivered");
        let (_, page) = service.admin(Method::GET, &path, None).await;
        page["items"].as_array().is_some_and(|a| a.len() == 1)
    })
    .await;

    let mine: Vec<Value> = sink
        .alerts()
        .into_iter()
        .filter(|a| a["message_id"] == id)
        .collect();
    let ids: BTreeSet<u64> = mine
        .iter()
        .map(|a| a["alert_id"].as_u64().expect("the body names its alert id"))
        .collect();
    assert_eq!(ids.len(), 1, "one alert id for the message: {mine:?}");
    for a in &mine {
        assert_eq!(a["kind"], "verify_failed", "{a}");
        assert_eq!(a["biz_id"], "shop", "{a}");
        assert_eq!(a["message_key"], "undecided", "{a}");
        assert_eq!(a["attempts"], 2, "{a}");
        assert_eq!(
            a["header_alert_id"].as_str(),
            Some(a["alert_id"].to_string().as_str()),
            "the header carries the body's id: {a}"
        );
    }
    let (_, pending) = service
        .admin(Method::GET, "/v1/admin/alerts?state=pending", None)
        .await;
    assert_eq!(
        pending["items"],
        serde_json::json!([]),
        "nothing left undelivered"
    );
    drop(service);
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verify_failed_alert_refused_before_a_kill_9_is_delivered_once_by_the_next_instance() {
    a_verify_failed_alert_outlives(Death::Kill9).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verify_failed_alert_refused_before_a_graceful_shutdown_is_delivered_once_by_the_next_instance(
) {
    a_verify_failed_alert_outlives(Death::Graceful).await;
}
