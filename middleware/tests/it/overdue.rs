//! The overdue watch (issue 10, hole 8): a committed message that a broker
//! outage keeps from Kafka, and a prepared message nobody decides, are each
//! alerted once, by one of the instances sharing the database, while
//! nothing else about them changes: the send still goes out when the
//! cluster is back.

use std::time::Duration;

use trustmsg_tests::kafka::MockKafka;
use trustmsg_tests::{eventually, AlertSink, TestApp, UNREACHABLE_VERIFY_URL};
use trustmsg_verify_api::SendStatus;

use crate::forwarder::{
    body, decide, kafka_flags, prepare, prepare_and_commit, refs, wait_for_row,
};

/// Flags forwarding to `kafka` (the first check-back an hour away) that
/// alert `alerts` of a send or a check-back overdue after one second.
fn overdue_after_a_second(kafka: &MockKafka, alerts: &AlertSink) -> Vec<String> {
    let mut flags = kafka_flags(kafka.bootstrap());
    flags.extend(
        [
            "--alert-webhook",
            &alerts.url(),
            "--alert-send-overdue-after",
            "1s",
            "--alert-verify-overdue-after",
            "1s",
        ]
        .map(String::from),
    );
    flags
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_held_up_by_an_outage_and_an_undecided_prepare_are_each_alerted_once_across_instances(
) {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 1);
    let alerts = AlertSink::start().await;
    // kafka_flags puts the first check-back an hour away: the prepare waits.
    let flags = overdue_after_a_second(&kafka, &alerts);
    let first = TestApp::spawn(&refs(&flags)).await;
    let second = TestApp::spawn_on(first.db.share(), &refs(&flags)).await;
    let token = first.register("shop", UNREACHABLE_VERIFY_URL).await;

    kafka.brokers_down();
    let stuck = prepare_and_commit(&first, &token, body("shop", "stuck", "orders")).await;
    let undecided = prepare(&second, &token, body("shop", "undecided", "orders")).await;
    eventually(20, "an alert for each message", async || {
        alerts.alerts().len() >= 2
    })
    .await;
    // Several more rounds of both instances' watches.
    first.after_rounds("trustmsg_overdue_rounds_total", 6).await;

    let mut got = alerts.alerts();
    assert_eq!(got.len(), 2, "exactly one alert per message: {got:?}");
    got.sort_by_key(|a| a["message_id"].as_u64());
    let send = &got[0];
    assert_eq!(send["kind"], "send_overdue", "{send}");
    assert_eq!(send["message_id"], stuck);
    assert_eq!(send["message_key"], "stuck");
    let why = send["last_error"].as_str().unwrap();
    assert!(
        why.starts_with("committed and not yet in Kafka for more than 1s (since "),
        "{why}"
    );
    let verify = &got[1];
    assert_eq!(verify["kind"], "verify_overdue", "{verify}");
    assert_eq!(verify["message_id"], undecided);
    assert_eq!(verify["attempts"], 0);
    assert!(
        verify["last_error"]
            .as_str()
            .unwrap()
            .starts_with("prepared and not yet decided for more than 1s"),
        "{verify}"
    );

    // The alert changed nothing: the send goes out once Kafka is back.
    kafka.brokers_up();
    wait_for_row(&first, stuck, Duration::from_secs(40), "sent", |m| {
        m.send_status == Some(SendStatus::Sent)
    })
    .await;
    assert_eq!(alerts.alerts().len(), 2, "no alert for the delivery");
    second.app.stop().await.unwrap();
    first.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_wait_of_a_message_is_alerted_once_and_again_after_a_redeliver_on_mysql() {
    each_wait_of_a_message_is_alerted_once_and_again_after_a_redeliver(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_wait_of_a_message_is_alerted_once_and_again_after_a_redeliver_on_sqlite() {
    each_wait_of_a_message_is_alerted_once_and_again_after_a_redeliver(true).await;
}

/// A message alerted `verify_overdue` whose send then waits too, and is
/// redelivered by an operator after it failed: three overdue alerts, each
/// once (the old single flag gave the first alone), and the failure's own.
async fn each_wait_of_a_message_is_alerted_once_and_again_after_a_redeliver(sqlite: bool) {
    use trustmsg::store::Actor;
    let (kafka, alerts) = (MockKafka::start(1), AlertSink::start().await);
    kafka.create_topic("orders", 1);
    let flags = overdue_after_a_second(&kafka, &alerts);
    let app = if sqlite {
        TestApp::spawn_sqlite(&refs(&flags)).await
    } else {
        TestApp::spawn(&refs(&flags)).await
    };
    kafka.brokers_down();
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    let id = prepare(&app, &token, body("shop", "late", "orders")).await;
    let kinds = || {
        alerts
            .alerts()
            .iter()
            .map(|a| {
                assert_eq!(a["message_id"], id, "{a}");
                a["kind"].as_str().unwrap().to_string()
            })
            .collect::<Vec<_>>()
    };
    eventually(20, "verify_overdue", async || kinds().len() == 1).await;
    decide(&app, &token, "shop", "late", true).await;
    eventually(20, "send_overdue", async || kinds().len() == 2).await;

    // Given up on (as the attempt limit would), then redelivered.
    eventually(20, "SEND_FAILED", async || {
        let m = app.store().find_message_by_id(id).await.unwrap().unwrap();
        let failed = app
            .store()
            .mark_send_failed(id, m.version, "test", &Actor::Forwarder);
        failed.await.unwrap().is_some()
    })
    .await;
    let redeliver = app
        .http
        .post(app.url(&format!("/v1/admin/messages/{id}/redeliver")))
        .bearer_auth(trustmsg_tests::ADMIN_TOKEN)
        .json(&serde_json::json!({"reason": "outage over"}))
        .send()
        .await
        .unwrap();
    assert_eq!(redeliver.status(), 200);
    // Giving up raises its own alert (send_failed), from the outbox.
    eventually(20, "send_overdue again", async || kinds().len() == 4).await;
    app.after_rounds("trustmsg_overdue_rounds_total", 4).await;
    assert_eq!(
        kinds(),
        [
            "verify_overdue",
            "send_overdue",
            "send_failed",
            "send_overdue"
        ],
        "each once"
    );
    app.finish().await;
}
