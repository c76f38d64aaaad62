//! A database frozen with SIGSTOP under the real binary, right after a burst
//! of commits (SENT marks and claims under way): while it is frozen the
//! workers give up their statements at the deadline (`--request-timeout`)
//! instead of waiting on it, and after SIGCONT every message committed before
//! and after is SENT and in Kafka within seconds; no worker stays stuck.

use std::time::{Duration, Instant};

use sqlx::mysql::MySqlPoolOptions;
use trustmsg_client::{Message, Producer};
use trustmsg_tests::flags::{flags, refs, set_flag};
use trustmsg_tests::kafka::{MockKafka, TopicReader};
use trustmsg_tests::{
    eventually, PrivateMariaDb, ServiceProcess, FAST_SEND, UNREACHABLE_VERIFY_URL,
};

use crate::harness::settings;

const TOPIC: &str = "e2e-frozen-db";

/// Prepares and commits `key`, retrying while the service answers 503.
async fn commit(producer: &Producer, key: &str) {
    let message = Message::new(key, TOPIC, format!("payload of {key}"));
    eventually(60, "a prepare", async || {
        producer.prepare(&message).await.is_ok()
    })
    .await;
    eventually(60, "a commit", async || producer.commit(key).await.is_ok()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_frozen_with_sigstop_holds_nothing_up_after_sigcont() {
    let db = PrivateMariaDb::start().await;
    let kafka = MockKafka::start(1);
    kafka.create_topic(TOPIC, 3);
    let mut service_flags = flags(&[
        FAST_SEND,
        &["--request-timeout", "1s", "--backlog-interval", "200ms"],
    ]);
    set_flag(&mut service_flags, "--send-lease", "4s");
    let service = ServiceProcess::start_logged(
        &db.url("trustmsg_frozen"),
        kafka.bootstrap(),
        &refs(&service_flags),
        None,
    )
    .await;
    let (token, _) = service
        .register("shop", settings(UNREACHABLE_VERIFY_URL, 3_600_000, 3))
        .await;
    let producer = Producer::new(&service.url(), "shop", token).unwrap();
    let mut reader = TopicReader::new(kafka.bootstrap(), TOPIC);
    for i in 0..20 {
        commit(&producer, &format!("before-{i}")).await;
    }
    // Frozen with the last sends' SENT marks and the next claims under way.
    db.pause();
    // The workers give up their statements at the deadline (1 s) while the
    // database stays frozen, instead of waiting on it.
    eventually(10, "worker statements given up while frozen", async || {
        service
            .metric("trustmsg_worker_statement_timeouts_total", &[])
            .await
            .is_some_and(|n| n >= 3.0)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    db.resume();
    let resumed = Instant::now();
    for i in 0..20 {
        commit(&producer, &format!("after-{i}")).await;
    }
    let pool = MySqlPoolOptions::new()
        .max_connections(1)
        .connect(&db.url("trustmsg_frozen"))
        .await
        .unwrap();
    eventually(60, "all 40 SENT", async || {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM messages WHERE biz_id = 'shop' \
             AND (send_status IS NULL OR send_status <> 'SENT')",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        waiting == 0
    })
    .await;
    eprintln!("SIGCONT → all 40 SENT: {:?}", resumed.elapsed());
    let sent: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM messages WHERE send_status = 'SENT'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(sent, 40);
    reader
        .read_until(Duration::from_secs(30), "all 40 records", |rs| {
            rs.iter()
                .map(|r| r.message_id)
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                == 40
        })
        .await;
    drop(service);
}
