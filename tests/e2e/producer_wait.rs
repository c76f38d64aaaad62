//! The forwarder's Kafka producer waits for a slow broker without taking a
//! core (issue 61). librdkafka as published (2.12.1) lets an idempotent
//! producer have five messages of a partition in flight; with more queued
//! behind them, `linger.ms` past and no other request waiting to go out on
//! the connection, its broker thread polls its connection without waiting
//! until a response comes: a whole core for as long as the broker takes to
//! answer. On two cores that core is the broker's own, so a
//! broker that fell behind fell further behind (the outbox bench's tail,
//! docs/performance.md). The copy in `vendor/rdkafka-sys` waits for the
//! response instead (vendor/README.md).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use trustmsg_client::{Message, Producer};
use trustmsg_tests::kafka::{MockKafka, TopicReader};
use trustmsg_tests::{ServiceProcess, TestDb, UNREACHABLE_VERIFY_URL};
use trustmsg_verify_api::SendStatus;

use crate::harness::settings;

const TOPIC: &str = "e2e-producer-wait";

/// How long the mock broker takes to answer each request once the test slows it.
const ROUND_TRIP: Duration = Duration::from_millis(2000);

/// The CPU time of the process's librdkafka broker threads so far, in clock
/// ticks (1/100 s on Linux).
fn broker_threads_ticks(pid: u32) -> u64 {
    let mut ticks = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("the service's threads") {
        let task = task.expect("a thread").path();
        let Ok(comm) = std::fs::read_to_string(task.join("comm")) else {
            continue; // it ended meanwhile
        };
        if !comm.starts_with("rdk:broker") {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(task.join("stat")) else {
            continue;
        };
        // After the name's closing parenthesis: state (field 3), …,
        // utime (14) and stime (15).
        let fields: Vec<&str> = stat[stat.rfind(')').expect("stat has a name") + 2..]
            .split(' ')
            .collect();
        ticks +=
            fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    }
    ticks
}

async fn commit(producer: &Producer, key: &str) {
    producer
        .prepare(&Message::new(key, TOPIC, "p"))
        .await
        .unwrap();
    producer.commit(key).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_producer_waits_for_a_slow_broker_without_spinning_and_sends_everything() {
    let db = TestDb::create().await;
    // One partition: with several, another partition's request waiting to
    // go out on the connection (behind five in flight) keeps the thread
    // waiting, and the spin shows only now and then.
    let kafka = MockKafka::start(1);
    kafka.create_topic(TOPIC, 1);
    let mut reader = TopicReader::new(kafka.bootstrap(), TOPIC);
    let service = ServiceProcess::start(&db, kafka.bootstrap(), &[]).await;
    let pid = service.pid().expect("the service runs");
    let (token, _) = service
        .register("shop", settings(UNREACHABLE_VERIFY_URL, 3_600_000, 5))
        .await;
    let producer = Producer::new(&service.url(), "shop", token).unwrap();
    // At full speed first: the connection, the topic's metadata and the
    // producer id are in place before the broker slows down.
    commit(&producer, "warm-up").await;
    reader
        .read_until(Duration::from_secs(20), "the warm-up record", |rs| {
            rs.len() == 1
        })
        .await;

    kafka.round_trip(ROUND_TRIP);
    // More than five messages, one after the other: the sixth and later
    // wait for the first answers, due 2 s after the first send.
    let mut keys = BTreeSet::new();
    for i in 0..12 {
        let key = format!("m-{i:02}");
        commit(&producer, &key).await;
        keys.insert(key);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The broker threads' CPU over one second of that wait. Spinning, it
    // is the whole second (100 of 100 ticks with librdkafka as published);
    // waiting, none or a tick or two.
    let from = broker_threads_ticks(pid);
    let began = Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let took = broker_threads_ticks(pid) - from;
    let over = began.elapsed();
    eprintln!("broker threads: {} ms of CPU over {over:?}", took * 10);
    assert!(
        took <= 15,
        "the producer's broker threads took {} ms of CPU over {over:?} of waiting for a slow broker",
        took * 10
    );

    // And waiting loses nothing: every record reaches Kafka once the
    // answers come.
    reader
        .read_until(Duration::from_secs(30), "every record", |rs| {
            rs.len() > keys.len()
        })
        .await;
    let mut copies: BTreeMap<u64, usize> = BTreeMap::new();
    for r in &reader.records {
        *copies.entry(r.message_id).or_default() += 1;
    }
    assert!(copies.values().all(|&n| n == 1), "{copies:?}");
    for key in &keys {
        let m = producer.get(key).await.unwrap();
        assert_eq!(m.send_status, Some(SendStatus::Sent), "{key}: {m:?}");
        assert!(copies.contains_key(&m.id), "{key}: {m:?} is not in Kafka");
    }
}
