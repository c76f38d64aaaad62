//! The local message table against the real binary (issue 44): a shop
//! writes its orders and their messages with the SDK's `outbox::enqueue`
//! in its own MariaDB transactions, and `trustmsg serve --outbox-source
//! shop=URL` relays what committed. Committed rows reach Kafka byte for
//! byte (payload, record key, headers) and end relayed (status 2) in the
//! shop's table; a rolled-back transaction's message exists nowhere.

use std::collections::BTreeMap;

use serde_json::json;
use sqlx::MySqlPool;
use trustmsg_client::{outbox, Message};
use trustmsg_tests::kafka::{records_in, MockKafka};
use trustmsg_tests::{deciders, eventually, ServiceProcess, TestDb, UNREACHABLE_VERIFY_URL};

use crate::harness::{settings, shop_database, statuses};

const TOPIC: &str = "e2e-outbox";
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// The order `id` and its `message` in one transaction of the shop's
/// database, committed or rolled back.
async fn place(shop: &MySqlPool, id: &str, message: &Message, commit: bool) {
    let mut tx = shop.begin().await.unwrap();
    sqlx::query("INSERT INTO orders (id) VALUES (?)")
        .bind(id)
        .execute(&mut *tx)
        .await
        .unwrap();
    outbox::enqueue(&mut tx, message).await.unwrap();
    if commit {
        tx.commit().await.unwrap();
    } else {
        tx.rollback().await.unwrap();
    }
}

/// The shop's outbox rows: message_key → status.
async fn outbox_rows(shop: &MySqlPool) -> BTreeMap<String, i64> {
    let rows: Vec<(Vec<u8>, i64)> =
        sqlx::query_as("SELECT message_key, CAST(status AS SIGNED) FROM trustmsg_outbox")
            .fetch_all(shop)
            .await
            .unwrap();
    rows.into_iter()
        .map(|(k, s)| (String::from_utf8(k).unwrap(), s))
        .collect()
}

fn header(name: &str, value: &[u8]) -> (String, Option<Vec<u8>>) {
    (name.to_string(), Some(value.to_vec()))
}

/// Contract kit scenario S09 for the Rust SDK: the local message table delivers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_rows_reach_kafka_byte_for_byte_and_a_rolled_back_one_never_does() {
    let db = TestDb::create().await;
    let (source, shop) = shop_database().await;
    outbox::create_table(&shop).await.unwrap();
    let kafka = MockKafka::start(1);
    kafka.create_topic(TOPIC, 3);
    let relayed_from = format!("shop={}", source.url);
    let service = ServiceProcess::start(
        &db,
        kafka.bootstrap(),
        &[
            "--outbox-source",
            &relayed_from,
            "--outbox-interval",
            "50ms",
            "--sweep-interval",
            "200ms",
        ],
    )
    .await;
    // Never checked back: a relayed message is decided as it is written.
    let mut registration = settings(UNREACHABLE_VERIFY_URL, 3_600_000, 3);
    registration["topics"] = json!([TOPIC]);
    service.register("shop", registration).await;

    let text = br#"{"order":1,"amount_cents":1250}"#;
    let bytes = [0u8, 159, 146, 150, 255, b'\n', 0];
    place(
        &shop,
        "1",
        &Message::new("order-1", TOPIC, std::str::from_utf8(text).unwrap())
            .key("customer-7")
            .header("content-type", "application/json")
            .header("source", "shop"),
        true,
    )
    .await;
    place(
        &shop,
        "2",
        &Message::new("order-2", TOPIC, "rolled back").key("customer-8"),
        false,
    )
    .await;
    // Committed after the rollback: once it is sent, the rolled-back one
    // had every chance to be.
    place(
        &shop,
        "3",
        &Message::from_bytes("order-3", TOPIC, &bytes)
            .header("x-schema", "v2")
            .trace_context(TRACEPARENT, None::<String>),
        true,
    )
    .await;

    let trustmsg = db.pool().await;
    eventually(60, "both committed messages sent", async || {
        let s = statuses(&trustmsg, "shop").await;
        ["order-1", "order-3"].iter().all(|k| {
            s.get(*k)
                .is_some_and(|(_, _, send)| send.as_deref() == Some("SENT"))
        })
    })
    .await;
    let messages = statuses(&trustmsg, "shop").await;
    let mut keys: Vec<&str> = messages.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["order-1", "order-3"],
        "the rolled-back message never reached trustmsg"
    );
    for (key, (_, status, _)) in &messages {
        assert_eq!(status, "COMMITTED", "{key}");
    }

    let records = records_in(kafka.bootstrap(), TOPIC).await;
    assert_eq!(
        records.len(),
        2,
        "exactly the committed rows, once each: {records:#?}"
    );
    let by_key: BTreeMap<String, _> = records
        .iter()
        .map(|r| (r.header("trustmsg-message-key").unwrap(), r))
        .collect();
    let id = |key: &str| messages[key].0.to_string();

    let one = by_key["order-1"];
    assert_eq!(one.value.as_deref(), Some(&text[..]));
    assert_eq!(one.key.as_deref(), Some(&b"customer-7"[..]));
    assert_eq!(
        one.headers,
        vec![
            header("content-type", b"application/json"),
            header("source", b"shop"),
            header("trustmsg-message-id", id("order-1").as_bytes()),
            header("trustmsg-biz-id", b"shop"),
            header("trustmsg-message-key", b"order-1"),
        ]
    );
    let three = by_key["order-3"];
    assert_eq!(three.value.as_deref(), Some(&bytes[..]));
    assert_eq!(three.key, None, "no record key: Kafka's partitioner chose");
    assert_eq!(
        three.headers,
        vec![
            header("x-schema", b"v2"),
            header("trustmsg-message-id", id("order-3").as_bytes()),
            header("trustmsg-biz-id", b"shop"),
            header("trustmsg-message-key", b"order-3"),
            header("traceparent", TRACEPARENT.as_bytes()),
        ]
    );

    // The shop's table: both rows relayed; the rolled-back one never there.
    eventually(10, "the source rows marked relayed", async || {
        outbox_rows(&shop).await.values().all(|s| *s == 2)
    })
    .await;
    assert_eq!(
        outbox_rows(&shop).await,
        BTreeMap::from([("order-1".to_string(), 2), ("order-3".to_string(), 2)])
    );
    let decided = deciders(&db.url, "shop").await;
    assert_eq!(decided.len(), 2, "{decided:?}");
    assert!(
        decided
            .values()
            .all(|actors| actors == &["outbox".to_string()]),
        "decided by the relay, once each: {decided:?}"
    );

    drop(service);
    shop.close().await;
    trustmsg.close().await;
    source.drop_db().await;
    db.drop_db().await;
}

/// Rows that trickle in are not held for `--outbox-interval`: a source
/// found empty is looked at again after 1 ms, then twice as long each
/// time, so once the relay has found the first row the next ones, 150 ms
/// apart, are relayed within a fraction of the (here 20 s) interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_that_trickle_in_are_relayed_without_waiting_out_the_interval() {
    let db = TestDb::create().await;
    let (source, shop) = shop_database().await;
    outbox::create_table(&shop).await.unwrap();
    let kafka = MockKafka::start(1);
    kafka.create_topic(TOPIC, 3);
    let relayed_from = format!("shop={}", source.url);
    let service = ServiceProcess::start(
        &db,
        kafka.bootstrap(),
        &["--outbox-source", &relayed_from, "--outbox-interval", "20s"],
    )
    .await;
    let mut registration = settings(UNREACHABLE_VERIFY_URL, 3_600_000, 3);
    registration["topics"] = json!([TOPIC]);
    service.register("shop", registration).await;

    let trustmsg = db.pool().await;
    let relayed = |key: &'static str| {
        let trustmsg = trustmsg.clone();
        async move { statuses(&trustmsg, "shop").await.contains_key(key) }
    };
    // The first row waits for whatever claim comes next.
    place(&shop, "0", &Message::new("trickle-0", TOPIC, "0"), true).await;
    eventually(30, "the first row relayed", async || {
        relayed("trickle-0").await
    })
    .await;
    for (i, key) in [
        "trickle-1",
        "trickle-2",
        "trickle-3",
        "trickle-4",
        "trickle-5",
    ]
    .into_iter()
    .enumerate()
    {
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        place(
            &shop,
            &format!("{}", i + 1),
            &Message::new(key, TOPIC, "x"),
            true,
        )
        .await;
        let committed = std::time::Instant::now();
        while !relayed(key).await {
            assert!(
                committed.elapsed() < std::time::Duration::from_secs(3),
                "{key} not relayed 3 s after its commit: the relay waited out --outbox-interval (20 s)"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
    drop(service);
}
