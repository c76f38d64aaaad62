//! Delay and per-key order together (issue 28), on the real binary. The
//! order of a key wins: a message is never sent before an earlier message of
//! its key, so a delayed message holds back the later ones of its key (and
//! only of its key) until its time; a later message that is itself delayed
//! waits for both its time and the earlier ones. An operator's send-now of a
//! head sends it, and the ones behind follow; a send-now of a message still
//! behind its head clears its delay but keeps it behind the head.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use trustmsg_client::{Message, Producer};
use trustmsg_tests::kafka::Consumed;
use trustmsg_tests::{ServiceProcess, TestDb, UNREACHABLE_VERIFY_URL};

use crate::harness::{settings, Kafka};

const TOPIC: &str = "e2e-delay-ordering";

/// A service whose sweeper looks every 200 ms, with one ordered producer,
/// "shop", whose check-back never decides anything (the test commits).
async fn start(db: &TestDb, kafka: &Kafka) -> (ServiceProcess, Producer) {
    let service =
        ServiceProcess::start(db, kafka.mock.bootstrap(), &["--sweep-interval", "200ms"]).await;
    let mut s = settings(UNREACHABLE_VERIFY_URL, 3_600_000, 5);
    s["ordered"] = json!(true);
    let (token, _) = service.register("shop", s).await;
    let producer = Producer::new(&service.url(), "shop", token).unwrap();
    (service, producer)
}

/// Prepares and commits `key` with record key `record_key`, delayed by
/// `delay` if given; returns its id.
async fn commit(producer: &Producer, key: &str, record_key: &str, delay: Option<Duration>) -> u64 {
    let mut m = Message::new(key, TOPIC, format!("payload of {key}")).key(record_key);
    if let Some(d) = delay {
        m = m.deliver_after(d);
    }
    let view = producer.prepare(&m).await.unwrap();
    producer.commit(key).await.unwrap();
    view.id
}

/// The first record of each of `ids` in Kafka by now, in `ids`' order.
fn first_records(kafka: &Kafka, ids: &[u64]) -> Vec<Option<Consumed>> {
    let records = kafka.records();
    ids.iter()
        .map(|id| records.iter().find(|r| r.message_id == *id).cloned())
        .collect()
}

/// Waits up to `limit` for every one of `ids` to be in Kafka; their first
/// records, in `ids`' order.
async fn wait_for(kafka: &Kafka, ids: &[u64], limit: Duration) -> Vec<Consumed> {
    let start = Instant::now();
    loop {
        let found = first_records(kafka, ids);
        if found.iter().all(Option::is_some) {
            return found.into_iter().map(Option::unwrap).collect();
        }
        assert!(
            start.elapsed() < limit,
            "not all of {ids:?} reached Kafka within {limit:?}: {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `records` are in one partition, at increasing offsets.
fn assert_in_order(records: &[Consumed]) {
    for pair in records.windows(2) {
        assert_eq!(pair[0].partition, pair[1].partition, "{records:?}");
        assert!(
            pair[0].offset < pair[1].offset,
            "message {} (offset {}) must come before message {} (offset {})",
            pair[0].message_id,
            pair[0].offset,
            pair[1].message_id,
            pair[1].offset
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_message_holds_back_the_later_messages_of_its_key_only_until_its_time() {
    let db = TestDb::create().await;
    let kafka = Kafka::start(&[TOPIC]);
    let (service, producer) = start(&db, &kafka).await;

    let started = Instant::now();
    let a = commit(&producer, "a", "k", Some(Duration::from_secs(3))).await;
    let b = commit(&producer, "b", "k", None).await;
    // Delayed less than the one ahead of it: it still goes after it.
    let c = commit(&producer, "c", "k", Some(Duration::from_secs(1))).await;
    // Delayed more: when the key reaches it, it still waits for its time.
    let d = commit(&producer, "d", "k", Some(Duration::from_secs(5))).await;
    let other = commit(&producer, "other", "another-key", None).await;

    // Another key is not held back by k's delayed head.
    wait_for(&kafka, &[other], Duration::from_secs(5)).await;
    let path = format!("/v1/admin/messages/{b}");
    let detail = service.admin_ok(Method::GET, &path, None).await;
    assert_eq!(detail["blocked_by"], json!(a), "{detail}");
    tokio::time::sleep(Duration::from_millis(1_500).saturating_sub(started.elapsed())).await;
    let early = first_records(&kafka, &[a, b, c, d]);
    assert!(
        early.iter().all(Option::is_none),
        "nothing of key k before a's time: {early:?}"
    );

    let records = wait_for(&kafka, &[a, b, c, d], Duration::from_secs(15)).await;
    assert_in_order(&records);
    // Each delay was counted from its prepare, after `started`: a record
    // read earlier than `started` + its delay was sent before its time.
    for (record, delay) in [(&records[0], 3), (&records[3], 5)] {
        let read_after = record.at.duration_since(started);
        assert!(
            read_after >= Duration::from_secs(delay),
            "message {} was read {read_after:?} after the start, before its {delay} s",
            record.message_id
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_now_of_a_delayed_head_lets_its_key_go_and_of_a_message_behind_it_keeps_the_order() {
    let db = TestDb::create().await;
    let kafka = Kafka::start(&[TOPIC]);
    let (service, producer) = start(&db, &kafka).await;
    let hour = Some(Duration::from_secs(3600));
    let head = commit(&producer, "head", "k", hour).await;
    let behind = commit(&producer, "behind", "k", hour).await;
    let last = commit(&producer, "last", "k", None).await;
    let reason = json!({"reason": "the customer asked"});

    // The one behind the head loses its delay but stays behind the head.
    let view = service
        .admin_ok(
            Method::POST,
            &format!("/v1/admin/messages/{behind}/send-now"),
            Some(&reason),
        )
        .await;
    assert_eq!(view["next_send_at"], Value::Null, "{view}");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let early = first_records(&kafka, &[head, behind, last]);
    assert!(
        early.iter().all(Option::is_none),
        "nothing of key k while its head waits for its time: {early:?}"
    );

    // The head goes now, and the rest follow it in order.
    service
        .admin_ok(
            Method::POST,
            &format!("/v1/admin/messages/{head}/send-now"),
            Some(&reason),
        )
        .await;
    let records = wait_for(&kafka, &[head, behind, last], Duration::from_secs(10)).await;
    assert_in_order(&records);
}
