//! Kafka misbehaving: an outage, transient produce errors, a record Kafka
//! will never take.

use std::collections::BTreeSet;
use std::time::Duration;

use trustmsg_tests::kafka::{MockKafka, RDKafkaApiKey, RDKafkaRespErr, TopicReader};
use trustmsg_tests::{AlertSink, TestApp, UNREACHABLE_VERIFY_URL};
use trustmsg_verify_api::SendStatus;

use super::{body, kafka_flags, prepare_and_commit, refs, set_flag, wait_for_row};

/// Registers `shop` and sends one record through to `orders`, so that the
/// producer has its id and the topic's metadata before a test injects
/// faults: the producer's token, a reader past that record, and its id.
async fn warmed_up(app: &TestApp, kafka: &MockKafka) -> (String, TopicReader, u64) {
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    let mut reader = TopicReader::new(kafka.bootstrap(), "orders");
    let warm = prepare_and_commit(app, &token, body("shop", "warm-up", "orders")).await;
    reader
        .read_until(Duration::from_secs(20), "the warm-up record", |rs| {
            rs.len() == 1
        })
        .await;
    (token, reader, warm)
}

/// Flags forwarding to `kafka`, and `extra`, with librdkafka retrying a
/// produce once itself: the rest must be the forwarder's retries.
fn retrying_once(kafka: &MockKafka, extra: &[&str]) -> Vec<String> {
    let mut flags = kafka_flags(kafka.bootstrap());
    let retries = ["--kafka-config", "retries=1,retry.backoff.ms=20"];
    flags.extend(retries.iter().chain(extra).map(|f| f.to_string()));
    flags
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_committed_during_a_broker_outage_is_delivered_once_it_is_back() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 2);
    let app = TestApp::spawn(&refs(&kafka_flags(kafka.bootstrap()))).await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    let mut reader = TopicReader::new(kafka.bootstrap(), "orders");

    let mut ids = BTreeSet::new();
    ids.insert(prepare_and_commit(&app, &token, body("shop", "before", "orders")).await);
    reader
        .read_until(Duration::from_secs(20), "the first record", |rs| {
            rs.len() == 1
        })
        .await;

    // Down for several message timeouts (--kafka-message-timeout 2s) while
    // commits keep coming.
    kafka.brokers_down();
    for i in 0..24 {
        ids.insert(
            prepare_and_commit(&app, &token, body("shop", &format!("during-{i}"), "orders")).await,
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    kafka.brokers_up();
    for i in 0..5 {
        ids.insert(
            prepare_and_commit(&app, &token, body("shop", &format!("after-{i}"), "orders")).await,
        );
    }

    reader
        .read_until(Duration::from_secs(90), "every committed message", |rs| {
            rs.iter().map(|r| r.message_id).collect::<BTreeSet<_>>() == ids
        })
        .await;
    let mut retried = 0;
    for id in &ids {
        let row = wait_for_row(&app, *id, Duration::from_secs(20), "SENT", |m| {
            m.send_status == Some(SendStatus::Sent)
        })
        .await;
        // Timeouts in an outage are retried without counting an attempt; the
        // failure they met is what is left behind.
        if row.last_error.is_some() {
            retried += 1;
        }
    }
    // The outage was real: sends failed and were retried, not just delayed.
    assert!(
        retried > 0,
        "no message needed a retry; was the broker down?"
    );
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_produce_errors_are_retried_until_delivered() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 1);
    let mut flags = retrying_once(&kafka, &[]);
    set_flag(&mut flags, "--sweep-interval", "100ms");
    let app = TestApp::spawn(&refs(&flags)).await;
    let (token, mut reader, _) = warmed_up(&app, &kafka).await;

    kafka.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS; 6],
    );
    let id = prepare_and_commit(&app, &token, body("shop", "flaky", "orders")).await;
    reader
        .read_until(
            Duration::from_secs(60),
            "the record sent through errors",
            |rs| rs.iter().any(|r| r.message_id == id),
        )
        .await;
    let row = wait_for_row(&app, id, Duration::from_secs(20), "SENT", |m| {
        m.send_status == Some(SendStatus::Sent)
    })
    .await;
    assert!(row.send_attempts >= 2, "the forwarder retried: {row:?}");
    let err = row.last_error.clone().unwrap_or_default();
    assert!(
        err.contains("NotEnoughReplicas") || err.contains("replicas"),
        "the retried error is recorded: {row:?}"
    );
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_kafka_refuses_as_too_large_is_send_failed_with_exactly_one_alert() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 1);
    let alerts = AlertSink::start().await;
    let mut flags = kafka_flags(kafka.bootstrap());
    flags.extend([
        "--alert-webhook".to_string(),
        alerts.url(),
        "--max-send-attempts".into(),
        "10".into(),
    ]);
    let app = TestApp::spawn(&refs(&flags)).await;
    let (token, mut reader, warm) = warmed_up(&app, &kafka).await;

    kafka.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE],
    );
    let id = prepare_and_commit(&app, &token, body("shop", "too-big", "orders")).await;
    let row = wait_for_row(&app, id, Duration::from_secs(20), "SEND_FAILED", |m| {
        m.send_status == Some(SendStatus::SendFailed)
    })
    .await;
    assert_eq!(
        row.send_attempts, 1,
        "a permanent error is not retried: {row:?}"
    );
    let err = row.last_error.clone().expect("the error is stored");
    assert!(err.contains("MessageSizeTooLarge"), "{err}");

    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while alerts.alerts().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no alert reached the webhook"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Further sweeps and another message must not alert again for this one.
    let next = prepare_and_commit(&app, &token, body("shop", "after", "orders")).await;
    reader
        .read_until(Duration::from_secs(20), "the next record", |rs| {
            rs.iter().any(|r| r.message_id == next)
        })
        .await;
    reader.read_for(Duration::from_secs(2)).await;

    let received = alerts.alerts();
    assert_eq!(received.len(), 1, "exactly one webhook call: {received:?}");
    let a = &received[0];
    assert_eq!(a["kind"], "send_failed");
    assert_eq!(a["message_id"], id);
    assert_eq!(a["biz_id"], "shop");
    assert_eq!(a["message_key"], "too-big");
    assert_eq!(a["attempts"], 1);
    assert_eq!(a["last_error"].as_str(), Some(err.as_str()));
    assert!(
        !reader.records.iter().any(|r| r.message_id == id),
        "the refused record is not in Kafka"
    );
    assert!(reader.records.iter().any(|r| r.message_id == warm));

    let trail = app.store().audit_trail(id).await.unwrap();
    let failed: Vec<_> = trail.iter().filter(|e| e.action == "send_failed").collect();
    assert_eq!(failed.len(), 1, "{trail:?}");
    assert_eq!(failed[0].actor, "forwarder");
    assert_eq!(failed[0].to_send_status.as_deref(), Some("SEND_FAILED"));
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_errors_past_the_attempt_limit_make_the_message_send_failed() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 1);
    let mut flags = retrying_once(&kafka, &["--max-send-attempts", "3"]);
    set_flag(&mut flags, "--sweep-interval", "100ms");
    let app = TestApp::spawn(&refs(&flags)).await;
    let (token, _reader, _) = warmed_up(&app, &kafka).await;

    kafka.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS; 200],
    );
    let id = prepare_and_commit(&app, &token, body("shop", "doomed", "orders")).await;
    let row = wait_for_row(&app, id, Duration::from_secs(30), "SEND_FAILED", |m| {
        m.send_status == Some(SendStatus::SendFailed)
    })
    .await;
    kafka.clear_request_errors(RDKafkaApiKey::Produce);
    assert_eq!(row.send_attempts, 3, "{row:?}");
    assert!(
        row.last_error
            .as_deref()
            .unwrap_or("")
            .contains("gave up after 3 attempts"),
        "{row:?}"
    );
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_out_a_broker_outage_uses_up_none_of_the_send_attempts() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 1);
    let flags = retrying_once(&kafka, &["--max-send-attempts", "2"]);
    let app = TestApp::spawn(&refs(&flags)).await;
    let (token, mut reader, _) = warmed_up(&app, &kafka).await;

    // Down for several --kafka-message-timeout (2s): each send of the message
    // times out, possibly persisted, and is rescheduled.
    kafka.brokers_down();
    let id = prepare_and_commit(&app, &token, body("shop", "patient", "orders")).await;
    let first = wait_for_row(&app, id, Duration::from_secs(20), "timed out", |m| {
        m.last_error
            .as_deref()
            .is_some_and(|e| e.contains("possibly persisted"))
    })
    .await;
    let timed_out_again = wait_for_row(&app, id, Duration::from_secs(20), "timed out again", |m| {
        m.version >= first.version + 4
    })
    .await;
    assert_eq!(
        timed_out_again.send_status,
        Some(SendStatus::Pending),
        "{timed_out_again:?}"
    );

    // Back, with one error Kafka answers (librdkafka retries once itself, so
    // two injected errors reach the forwarder as one): within the limit of 2.
    kafka.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS; 2],
    );
    kafka.brokers_up();
    let row = wait_for_row(&app, id, Duration::from_secs(40), "decided", |m| {
        m.send_status != Some(SendStatus::Pending)
    })
    .await;
    assert_eq!(row.send_status, Some(SendStatus::Sent), "{row:?}");
    reader
        .read_until(Duration::from_secs(20), "the patient record", |rs| {
            rs.iter().any(|r| r.message_id == id)
        })
        .await;
    app.finish().await;
}

/// librdkafka remembers a topic a broker refused (authorization) and
/// refuses every later record of it at once, without asking the broker,
/// until its metadata of the topic is refreshed. A record sent just after
/// the broker stopped refusing (an operator fixed the ACL) must be the
/// broker's to refuse or take, not that memory's: it is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_sent_right_after_a_topic_refusal_ends_are_the_brokers_to_take() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 1);
    let app = TestApp::spawn(&refs(&kafka_flags(kafka.bootstrap()))).await;
    let (token, mut reader, _) = warmed_up(&app, &kafka).await;

    // The broker refuses one produce request, then takes every other.
    kafka.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED],
    );
    let refused = prepare_and_commit(&app, &token, body("shop", "refused", "orders")).await;
    wait_for_row(&app, refused, Duration::from_secs(20), "SEND_FAILED", |m| {
        m.send_status == Some(SendStatus::SendFailed)
    })
    .await;
    let mut after = Vec::new();
    for i in 0..5 {
        let key = format!("after-{i}");
        after.push(prepare_and_commit(&app, &token, body("shop", &key, "orders")).await);
    }
    for id in &after {
        let row = wait_for_row(
            &app,
            *id,
            Duration::from_secs(20),
            "SENT or SEND_FAILED",
            |m| {
                matches!(
                    m.send_status,
                    Some(SendStatus::Sent | SendStatus::SendFailed)
                )
            },
        )
        .await;
        assert_eq!(row.send_status, Some(SendStatus::Sent), "{row:?}");
        assert_eq!(row.send_attempts, 1, "sent at the first attempt: {row:?}");
    }
    reader
        .read_until(Duration::from_secs(20), "the records after", |rs| {
            after
                .iter()
                .all(|id| rs.iter().any(|r| r.message_id == *id))
        })
        .await;
    app.finish().await;
}
