//! kill -9 of the service while its check-back calls are in flight: another
//! instance, started at once on the same database, checks every row the dead
//! one had claimed again within the producer's check-back timeout + 10 s of
//! being ready, instead of waiting out a claim sized for the slowest producer
//! anyone may register.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::json;
use trustmsg_client::{Message, Producer};
use trustmsg_tests::{within, CheckServer, Reply, ServiceProcess, TestDb};

use crate::harness::{statuses, Kafka};

const TOPIC: &str = "e2e-verify-lease";
const N: usize = 20;
/// The producer's check-back timeout, and how long its endpoint first holds
/// each call (within it).
const TIMEOUT: Duration = Duration::from_secs(2);
const HOLD: Duration = Duration::from_millis(1500);
/// The goal: every row checked again within the timeout plus this.
const GOAL: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_a_kill_9_mid_check_back_another_instance_decides_every_row_within_the_timeout_plus_ten_seconds(
) {
    let db = TestDb::create().await;
    let kafka = Kafka::start(&[TOPIC]);
    let check = CheckServer::start().await;
    check.default_reply(Reply::Hang(HOLD));
    // Every other flag at its default, as an operator runs it.
    let mut first = ServiceProcess::start(&db, kafka.mock.bootstrap(), &[]).await;
    let (token, secret) = first
        .register(
            "shop",
            json!({
                "verify_url": check.url(),
                "verify_timeout_ms": TIMEOUT.as_millis(),
                "first_verify_after_ms": 500,
            }),
        )
        .await;
    check.set_secret(&secret);
    let producer = Producer::new(&first.url(), "shop", token).unwrap();
    for i in 0..N {
        producer
            .prepare(&Message::new(
                format!("k-{i}"),
                TOPIC,
                format!("payload {i}"),
            ))
            .await
            .unwrap();
    }

    // As soon as the first round's calls are held (8: a producer's first
    // limit), the instance dies with them in flight.
    assert!(
        within(30, async || check.total() >= 8).await,
        "the first check-back calls never came: {}",
        check.total()
    );
    first.kill_9();
    let pool = db.pool().await;
    let at_kill = statuses(&pool, "shop").await;
    assert_eq!(at_kill.len(), N);
    assert!(
        at_kill.values().all(|(_, s, _)| s == "PREPARED"),
        "killed before any call was answered: {at_kill:?}"
    );

    check.default_reply(Reply::Decide("commit"));
    let _second = ServiceProcess::start(&db, kafka.mock.bootstrap(), &[]).await;
    let ready = Instant::now();
    let decided = within((TIMEOUT + GOAL).as_secs(), async || {
        statuses(&pool, "shop")
            .await
            .values()
            .all(|(_, s, _)| s == "COMMITTED")
    })
    .await;
    let took = ready.elapsed();
    let left: BTreeMap<String, String> = statuses(&pool, "shop")
        .await
        .into_iter()
        .filter(|(_, (_, s, _))| s != "COMMITTED")
        .map(|(k, (_, s, _))| (k, s))
        .collect();
    assert!(
        decided,
        "{} of {N} not decided {took:?} after the second instance was ready: {left:?}",
        left.len()
    );
    // The figure docs/architecture.md quotes (run with --no-capture to see it).
    eprintln!("verify_lease: all {N} committed {took:?} after the second instance was ready");
    db.drop_db().await;
}
