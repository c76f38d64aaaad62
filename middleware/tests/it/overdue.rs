//! The overdue watch (issue 10, hole 8): a committed message that a broker
//! outage keeps from Kafka, and a prepared message nobody decides, are each
//! alerted once, by one of the instances sharing the database, while
//! nothing else about them changes: the send still goes out when the
//! cluster is back.

use std::time::Duration;

use trustmsg_tests::kafka::MockKafka;
use trustmsg_tests::{eventually, AlertSink, TestApp, UNREACHABLE_VERIFY_URL};
use trustmsg_verify_api::SendStatus;

use crate::forwarder::{body, kafka_flags, prepare, prepare_and_commit, refs, wait_for_row};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_held_up_by_an_outage_and_an_undecided_prepare_are_each_alerted_once_across_instances(
) {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 1);
    let alerts = AlertSink::start().await;
    // kafka_flags puts the first check-back an hour away: the prepare waits.
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
