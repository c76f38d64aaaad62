//! A broker that comes back without its state: the producer that outlived it
//! is replaced and every message committed meanwhile arrives, no attempt
//! counted, without restarting trustmsg.

use std::collections::BTreeSet;
use std::time::Duration;

use trustmsg_tests::kafka::{MockKafka, RDKafkaApiKey, RDKafkaRespErr, TopicReader};
use trustmsg_tests::{TestApp, UNREACHABLE_VERIFY_URL};
use trustmsg_verify_api::SendStatus;

use super::{body, kafka_flags, prepare_and_commit, refs, wait_for_row};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_committed_while_the_broker_lost_its_state_are_all_delivered_by_a_new_producer() {
    let kafka = MockKafka::start_restartable(1);
    kafka.create_topic("orders", 2);
    let app = TestApp::spawn(&refs(&kafka_flags(kafka.bootstrap()))).await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    let mut reader = TopicReader::new(kafka.bootstrap(), "orders");
    for i in 0..10 {
        prepare_and_commit(&app, &token, body("shop", &format!("before-{i}"), "orders")).await;
    }
    reader
        .read_until(Duration::from_secs(20), "the first ten", |rs| {
            rs.len() == 10
        })
        .await;

    kafka.lose_state();
    let mut ids = BTreeSet::new();
    for i in 0..20 {
        ids.insert(
            prepare_and_commit(&app, &token, body("shop", &format!("during-{i}"), "orders")).await,
        );
    }
    // Past a message timeout (2 s): sends failed while it was gone.
    tokio::time::sleep(Duration::from_secs(3)).await;
    kafka.come_back_empty();
    // The broker refuses the producer that outlived it, whatever it retries.
    kafka.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_PRODUCER_FENCED],
    );
    reader
        .read_until(
            Duration::from_secs(60),
            "all twenty on the new broker",
            |rs| ids.iter().all(|id| rs.iter().any(|r| r.message_id == *id)),
        )
        .await;
    for id in &ids {
        let row = wait_for_row(&app, *id, Duration::from_secs(20), "SENT", |m| {
            m.send_status == Some(SendStatus::Sent)
        })
        .await;
        // The one attempt the SENT mark counts, no failed one.
        assert_eq!(row.send_attempts, 1, "{row:?}");
    }
    assert!(
        app.counter("trustmsg_kafka_producer_rebuilds_total").await >= 1,
        "the producer was replaced"
    );
    app.finish().await;
}
