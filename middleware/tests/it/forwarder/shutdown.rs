//! Graceful shutdown: stopping mid-stream loses nothing; what is not marked
//! SENT is still claimed and the next instance sends it after the lease.

use std::collections::BTreeSet;
use std::time::Duration;

use trustmsg_tests::kafka::{MockKafka, TopicReader};
use trustmsg_tests::{TestApp, UNREACHABLE_VERIFY_URL};
use trustmsg_verify_api::SendStatus;

use super::{body, kafka_flags, prepare_and_commit, refs, wait_for_row};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_stream_loses_nothing_and_every_sent_row_matches_its_record() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 2);
    let flags = kafka_flags(kafka.bootstrap());
    let first = TestApp::spawn(&refs(&flags)).await;
    let token = first.register("shop", UNREACHABLE_VERIFY_URL).await;
    // Warm up first (connection and metadata at full speed), so the stream
    // below has sends finishing and sends in flight when the stop comes.
    let warm = prepare_and_commit(&first, &token, body("shop", "warm-up", "orders")).await;
    wait_for_row(&first, warm, Duration::from_secs(20), "SENT", |m| {
        m.send_status == Some(SendStatus::Sent)
    })
    .await;
    // Slow acknowledgements, so sends are in flight when the stop comes.
    kafka.round_trip(Duration::from_millis(300));
    let mut ids = BTreeSet::new();
    for i in 0..30 {
        ids.insert(
            prepare_and_commit(&first, &token, body("shop", &format!("m-{i}"), "orders")).await,
        );
    }
    let db = first.db.share();
    let store = first.store().clone();
    // Stop while the last commits' sends may still be in flight.
    first.app.stop().await.expect("clean shutdown");

    // Everything that reached Kafka was marked SENT before the stop returned,
    // and every row marked SENT is in Kafka: read until those are all in,
    // then check every record read. The stop drains the sends in flight, so
    // some rows are SENT.
    let mut sent = BTreeSet::new();
    for id in &ids {
        let row = store.find_message_by_id(*id).await.unwrap().unwrap();
        if row.send_status == Some(SendStatus::Sent) {
            sent.insert(*id);
        }
    }
    assert!(!sent.is_empty(), "no send finished before the stop");
    let mut reader = TopicReader::new(kafka.bootstrap(), "orders");
    reader
        .read_until(
            Duration::from_secs(20),
            "the records of the SENT rows",
            |rs| {
                let read: BTreeSet<u64> = rs.iter().map(|r| r.message_id).collect();
                sent.is_subset(&read)
            },
        )
        .await;
    assert!(reader.records.len() >= sent.len(), "{:?}", reader.records);
    for r in &reader.records {
        let row = store
            .find_message_by_id(r.message_id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(row.send_status, Some(SendStatus::Sent), "{row:?}");
        assert_eq!(
            (row.kafka_partition, row.kafka_offset),
            (Some(r.partition), Some(r.offset))
        );
    }

    // Whatever was not sent is still PENDING and claimed; the next instance sends it.
    ids.insert(warm);
    let second = TestApp::spawn_on(db, &refs(&flags)).await;
    reader
        .read_until(Duration::from_secs(60), "every committed message", |rs| {
            rs.iter().map(|r| r.message_id).collect::<BTreeSet<_>>() == ids
        })
        .await;
    for id in &ids {
        wait_for_row(&second, *id, Duration::from_secs(20), "SENT", |m| {
            m.send_status == Some(SendStatus::Sent)
        })
        .await;
    }
    second.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_waits_for_sends_in_flight_and_marks_them_sent() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 1);
    let flags = kafka_flags(kafka.bootstrap());
    let app = TestApp::spawn(&refs(&flags)).await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    // Warm up first, so the slow acknowledgements below are the only wait.
    let warm = prepare_and_commit(&app, &token, body("shop", "warm-up", "orders")).await;
    wait_for_row(&app, warm, Duration::from_secs(20), "SENT", |m| {
        m.send_status == Some(SendStatus::Sent)
    })
    .await;
    // Each acknowledgement now takes 1.5 s (under the 2 s message timeout).
    kafka.round_trip(Duration::from_millis(1500));
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(
            prepare_and_commit(&app, &token, body("shop", &format!("slow-{i}"), "orders")).await,
        );
    }
    // Let the sends start, then stop while they wait for their
    // acknowledgements. (A pause in the scenario: nothing outside the
    // forwarder tells that a send is in flight; 300 ms is well inside the
    // 1.5 s acknowledgement, and a stop before the sends began would leave
    // the rows PENDING and fail below.)
    tokio::time::sleep(Duration::from_millis(300)).await;
    let db = app.db.share();
    let store = app.store().clone();
    app.app.stop().await.expect("clean shutdown");

    for id in &ids {
        let row = store.find_message_by_id(*id).await.unwrap().unwrap();
        assert_eq!(
            row.send_status,
            Some(SendStatus::Sent),
            "the send in flight was drained and marked before the stop returned: {row:?}"
        );
    }
    let mut reader = TopicReader::new(kafka.bootstrap(), "orders");
    reader
        .read_until(Duration::from_secs(20), "the drained records", |rs| {
            ids.iter().all(|id| rs.iter().any(|r| r.message_id == *id))
        })
        .await;
    db.drop_db().await;
}
