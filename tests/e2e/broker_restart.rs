//! A broker that comes back without its state (issue 26, item 2), against the
//! real binary: 10 messages sent, the broker loses everything, 20 more are
//! committed, the broker comes back empty at the same address and refuses the
//! producer that outlived it. All 20 must reach the new broker byte for byte,
//! SENT with no failed attempt counted, without restarting trustmsg; then an
//! operator's redelivery of a SEND_FAILED message must arrive too.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::json;
use sqlx::MySqlPool;
use trustmsg_client::Message;
use trustmsg_tests::kafka::{Consumed, MockKafka, RDKafkaApiKey, RDKafkaRespErr, TopicReader};
use trustmsg_tests::{eventually, ServiceProcess, TestDb, ADMIN_TOKEN, FAST_SEND};

use crate::harness::{assert_key_and_headers, commit, shop};

const TOPIC: &str = "e2e-broker-restart";

/// `(send_status, send_attempts)` of each message of `shop`, by message key.
async fn sends(pool: &MySqlPool) -> BTreeMap<String, (Option<String>, u32)> {
    let rows: Vec<(Vec<u8>, Option<Vec<u8>>, u32)> = sqlx::query_as(
        "SELECT message_key, send_status, send_attempts FROM messages WHERE biz_id = 'shop'",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    rows.into_iter()
        .map(|(k, s, n)| {
            (
                String::from_utf8(k).unwrap(),
                (s.map(|s| String::from_utf8(s).unwrap()), n),
            )
        })
        .collect()
}

fn message(key: &str) -> Message {
    Message::new(key, TOPIC, format!("payload of {key} \u{e9}"))
        .key(format!("record-key-{key}"))
        .header("content-type", "text/plain")
        .header("x-seq", key)
}

/// The record is `m`'s, byte for byte: value, key and every header.
fn assert_record_is(r: &Consumed, key: &str, id: u64) {
    assert_eq!(
        r.payload.as_deref(),
        Some(format!("payload of {key} \u{e9}").as_bytes())
    );
    assert_key_and_headers(
        r,
        key,
        id,
        &[("content-type", "text/plain"), ("x-seq", key)],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_back_without_its_state_gets_every_message_without_a_restart() {
    let db = TestDb::create().await;
    let pool = db.pool().await;
    let kafka = MockKafka::start_restartable(1);
    kafka.create_topic(TOPIC, 3);
    let service = ServiceProcess::start(&db, kafka.bootstrap(), FAST_SEND).await;
    let producer = shop(&service).await;
    let mut reader = TopicReader::new(kafka.bootstrap(), TOPIC);

    for i in 0..10 {
        commit(&producer, &message(&format!("before-{i}"))).await;
    }
    reader
        .read_until(Duration::from_secs(30), "the first ten", |rs| {
            rs.len() == 10
        })
        .await;

    kafka.lose_state();
    let mut during = BTreeMap::new();
    for i in 0..20 {
        let key = format!("during-{i}");
        during.insert(commit(&producer, &message(&key)).await, key);
    }
    // Past a message timeout while the broker is gone: sends failed meanwhile.
    tokio::time::sleep(Duration::from_secs(3)).await;
    kafka.come_back_empty();
    // librdkafka's mock broker does not check an idempotent producer's id, so
    // the refusal of the producer that outlived the broker's state is injected.
    kafka.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_PRODUCER_FENCED],
    );
    let back = Instant::now();
    eventually(60, "all twenty SENT", async || {
        let rows = sends(&pool).await;
        during
            .values()
            .all(|k| rows[k].0.as_deref() == Some("SENT"))
    })
    .await;
    eprintln!("broker back → all 20 SENT: {:?}", back.elapsed());
    let rows = sends(&pool).await;
    for key in during.values() {
        // The one attempt the SENT mark counts; no failed one.
        assert_eq!(rows[key], (Some("SENT".into()), 1), "{key}");
    }
    reader
        .read_until(
            Duration::from_secs(30),
            "the twenty on the new broker",
            |rs| {
                during
                    .keys()
                    .all(|id| rs.iter().any(|r| r.message_id == *id))
            },
        )
        .await;
    for (id, key) in &during {
        let got: Vec<&Consumed> = reader
            .records
            .iter()
            .filter(|r| r.message_id == *id)
            .collect();
        assert!(!got.is_empty());
        for r in got {
            assert_record_is(r, key, *id);
        }
    }

    // Right after: a record the broker refuses for good fails, and an
    // operator's redelivery gets it through the new producer.
    kafka.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE],
    );
    let refused = commit(&producer, &message("refused")).await;
    eventually(30, "SEND_FAILED", async || {
        sends(&pool).await["refused"].0.as_deref() == Some("SEND_FAILED")
    })
    .await;
    let res = trustmsg_tests::http_client()
        .post(format!(
            "{}/v1/admin/messages/{refused}/redeliver",
            service.url()
        ))
        .bearer_auth(ADMIN_TOKEN)
        .header("x-trustmsg-operator", "alice")
        .json(&json!({"reason": "the broker takes it now"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        200,
        "{}",
        res.text().await.unwrap_or_default()
    );
    reader
        .read_until(Duration::from_secs(30), "the redelivered record", |rs| {
            rs.iter().any(|r| r.message_id == refused)
        })
        .await;
    let r = reader
        .records
        .iter()
        .find(|r| r.message_id == refused)
        .unwrap();
    assert_record_is(r, "refused", refused);
    eventually(20, "the redelivered row SENT", async || {
        sends(&pool).await["refused"].0.as_deref() == Some("SENT")
    })
    .await;
    drop(service);
    db.drop_db().await;
}
