//! RocketMQ's five classes of transactional message in one run: commit now,
//! rollback now, commit on check-back, rollback on check-back, unknown forever.

use std::collections::HashMap;

use futures::StreamExt;
use std::sync::Arc;

use trustmsg_client::{check_router, Decision, Message, Producer};
use trustmsg_tests::{eventually, within, AlertSink, Endpoint, ServiceProcess, TestDb};
use trustmsg_verify_api::kafka_headers;

use crate::harness::{settings, statuses, Kafka, FAST_VERIFY};

const TOPIC: &str = "e2e-orders";
const N: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Class {
    CommitNow,
    RollbackNow,
    CommitOnCheck,
    RollbackOnCheck,
    UnknownForever,
}

fn class_of(i: usize) -> Class {
    match i % 5 {
        0 => Class::CommitNow,
        1 => Class::RollbackNow,
        2 => Class::CommitOnCheck,
        3 => Class::RollbackOnCheck,
        _ => Class::UnknownForever,
    }
}

/// Payload bytes that differ per message and include non-UTF-8 bytes for some.
fn payload_of(i: usize) -> Vec<u8> {
    let mut p = format!("{{\"order\":{i},\"total\":{}}}", i * 7).into_bytes();
    if i.is_multiple_of(2) {
        p.extend_from_slice(&[0x00, 0xff, 0xfe, (i % 256) as u8]);
    }
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_classes_end_as_decided_and_the_ledger_balances() {
    let db = TestDb::create().await;
    let kafka = Kafka::start(&[TOPIC]);
    let alerts = AlertSink::start().await;
    let mut flags = FAST_VERIFY.to_vec();
    let webhook = alerts.url();
    flags.extend(["--alert-webhook", webhook.as_str()]);
    let service = ServiceProcess::start(&db, kafka.mock.bootstrap(), &flags).await;

    // The producer's check endpoint answers by class; commit-now and
    // rollback-now messages may be asked too if a check races their decision.
    let classes: Arc<HashMap<String, Class>> = Arc::new(
        (0..N)
            .map(|i| (format!("order-{i}"), class_of(i)))
            .collect(),
    );
    let check_classes = classes.clone();
    // Register first to learn the signing secret, then serve the endpoint at
    // the URL registered.
    let endpoint = Endpoint::bind().await;
    let url = endpoint.url(trustmsg_client::DEFAULT_CHECK_PATH);
    let (token, secret) = service.register("shop", settings(&url, 800, 3)).await;
    endpoint.serve(check_router(
        secret,
        move |req: trustmsg_client::CheckRequest| {
            let classes = check_classes.clone();
            async move {
                Ok::<_, std::convert::Infallible>(match classes.get(&req.message_key) {
                    Some(Class::CommitNow | Class::CommitOnCheck) => Decision::Commit,
                    Some(Class::RollbackNow | Class::RollbackOnCheck) => Decision::Rollback,
                    _ => Decision::Unknown,
                })
            }
        },
    ));

    let producer = Producer::new(&service.url(), "shop", token).unwrap();
    let mut ids: HashMap<String, u64> = HashMap::new();
    let tasks = (0..N).map(|i| {
        let producer = producer.clone();
        async move {
            let key = format!("order-{i}");
            let message = Message::from_bytes(key.clone(), TOPIC, &payload_of(i))
                .key(format!("customer-{}", i % 17))
                .header("source", "e2e")
                .header("n", i.to_string());
            let view = producer.prepare(&message).await.expect("prepare");
            match class_of(i) {
                Class::CommitNow => {
                    producer.commit(&key).await.expect("commit");
                }
                Class::RollbackNow => {
                    producer.rollback(&key).await.expect("rollback");
                }
                _ => {}
            }
            (key, view.id)
        }
    });
    for (key, id) in futures::stream::iter(tasks)
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await
    {
        ids.insert(key, id);
    }

    let pool = db.pool().await;
    let committed = N / 5 * 2;
    eventually(
        60,
        "every message decided and every commit delivered",
        async || {
            let st = statuses(&pool, "shop").await;
            let undecided = st.values().filter(|(_, s, _)| s == "PREPARED").count();
            let sent = st
                .values()
                .filter(|(_, _, ss)| ss.as_deref() == Some("SENT"))
                .count();
            undecided == 0 && sent == committed && kafka.deliveries().len() >= committed
        },
    )
    .await;
    eventually(20, "one alert per unknown message", async || {
        alerts.per_message().len() == N / 5
    })
    .await;
    // Every message that must reach Kafka read back (what is still missing
    // after 20 s is reported below).
    within(20, async || {
        let deliveries = kafka.deliveries();
        (0..N)
            .filter(|i| matches!(class_of(*i), Class::CommitNow | Class::CommitOnCheck))
            .all(|i| deliveries.contains_key(&ids[&format!("order-{i}")]))
    })
    .await;

    // The ledger.
    let st = statuses(&pool, "shop").await;
    let deliveries = kafka.deliveries();
    let records = kafka.records();
    let alert_counts = alerts.per_message();
    let mut wrong = Vec::new();
    for i in 0..N {
        let key = format!("order-{i}");
        let id = ids[&key];
        let (_, status, send) = &st[&key];
        let delivered = deliveries.get(&id).copied().unwrap_or(0);
        let expect_delivered = matches!(class_of(i), Class::CommitNow | Class::CommitOnCheck);
        let expected_status = match class_of(i) {
            Class::CommitNow | Class::CommitOnCheck => "COMMITTED",
            Class::RollbackNow | Class::RollbackOnCheck => "ROLLED_BACK",
            Class::UnknownForever => "VERIFY_FAILED",
        };
        if status != expected_status {
            wrong.push(format!("{key}: status {status}, want {expected_status}"));
        }
        if expect_delivered != (delivered > 0) {
            wrong.push(format!(
                "{key} ({:?}): delivered {delivered} times",
                class_of(i)
            ));
        }
        if expect_delivered && send.as_deref() != Some("SENT") {
            wrong.push(format!("{key}: send_status {send:?}"));
        }
        let alerted = alert_counts.get(&id).copied().unwrap_or(0);
        let expect_alerts = usize::from(class_of(i) == Class::UnknownForever);
        if alerted != expect_alerts {
            wrong.push(format!("{key}: {alerted} alerts, want {expect_alerts}"));
        }
    }
    // Every delivered record is byte-identical to what was prepared.
    let by_id: HashMap<u64, usize> = (0..N).map(|i| (ids[&format!("order-{i}")], i)).collect();
    for r in &records {
        let Some(&i) = by_id.get(&r.message_id) else {
            wrong.push(format!("unknown record id {}", r.message_id));
            continue;
        };
        let key = format!("order-{i}");
        assert_eq!(r.topic, TOPIC);
        if r.payload.as_deref() != Some(payload_of(i).as_slice()) {
            wrong.push(format!("{key}: payload differs"));
        }
        if r.key.as_deref() != Some(format!("customer-{}", i % 17).as_bytes()) {
            wrong.push(format!("{key}: record key differs"));
        }
        let h: HashMap<&str, Option<&[u8]>> = r
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_deref()))
            .collect();
        let want: [(&str, Vec<u8>); 5] = [
            ("source", b"e2e".to_vec()),
            ("n", i.to_string().into_bytes()),
            (
                kafka_headers::MESSAGE_ID,
                r.message_id.to_string().into_bytes(),
            ),
            (kafka_headers::BIZ_ID, b"shop".to_vec()),
            (kafka_headers::MESSAGE_KEY, key.clone().into_bytes()),
        ];
        for (name, value) in want {
            if h.get(name) != Some(&Some(value.as_slice())) {
                wrong.push(format!("{key}: header {name} is {:?}", h.get(name)));
            }
        }
        if h.len() != 5 {
            wrong.push(format!("{key}: {} headers", h.len()));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} ledger errors:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    drop(service);
    db.drop_db().await;
}
