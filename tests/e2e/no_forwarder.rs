//! An API-only instance (`--no-forwarder`) next to a forwarding one on the
//! same database (the real binary, twice): a commit made through the
//! API-only instance reaches Kafka within seconds, through the other's
//! sweeper. It used to claim its send for a forwarder that does not exist
//! and wait out the whole send lease (60 s by default) first.

use std::time::Instant;

use trustmsg_client::{Message, Producer};
use trustmsg_tests::{eventually, ServiceProcess, TestDb, UNREACHABLE_VERIFY_URL};

use crate::harness::{settings, Kafka};

const TOPIC: &str = "e2e-no-forwarder";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_through_an_api_only_instance_reaches_kafka_within_seconds() {
    let db = TestDb::create().await;
    let kafka = Kafka::start(&[TOPIC]);
    let forwarding =
        ServiceProcess::start(&db, kafka.mock.bootstrap(), &["--sweep-interval", "200ms"]).await;
    let api_only = ServiceProcess::start(&db, kafka.mock.bootstrap(), &["--no-forwarder"]).await;
    let (token, _) = forwarding
        .register("shop", settings(UNREACHABLE_VERIFY_URL, 3_600_000, 5))
        .await;
    let producer = Producer::new(&api_only.url(), "shop", token).unwrap();

    let mut ids = Vec::new();
    for key in ["a", "b", "c"] {
        let prepared = producer
            .prepare(&Message::new(key, TOPIC, format!("payload of {key}")))
            .await
            .unwrap();
        producer.commit(key).await.unwrap();
        ids.push(prepared.id);
    }
    let committed = Instant::now();
    // The default send lease is 60 s; a sweep every 200 ms.
    eventually(10, "every commit in Kafka", async || {
        let got = kafka.deliveries();
        ids.iter().all(|id| got.contains_key(id))
    })
    .await;
    eprintln!("in Kafka {:?} after the last commit", committed.elapsed());
    let deliveries = kafka.deliveries();
    for id in &ids {
        assert_eq!(deliveries[id], 1, "message {id} delivered once");
    }
    drop((api_only, forwarding));
    db.drop_db().await;
}
