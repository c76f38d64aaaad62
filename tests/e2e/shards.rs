//! Three message databases under the real binary (`--database-url` three
//! times), the third on a private `mariadbd` that the test kills with
//! SIGKILL: calls for keys on the other two shards go on as usual, calls
//! for the dead shard's keys answer 503 with `Retry-After` within the
//! request timeout, `/readyz` stays ready and names the dead shard, and
//! `/metrics` shows it down; once it is back, every message acknowledged
//! before the kill reaches Kafka, and the dead shard's keys work again: the
//! keys refused with 503 are prepared and committed when retried, a new key
//! writes a new row there, and a message prepared before the kill is
//! committed.
//!
//! Which shard a key lives on is computed here from the contract
//! (docs/scaling.md): slot = CRC-32 of `biz_id`, a zero byte and the
//! message key, modulo 1024; a new deployment of three puts slot s on shard
//! s mod 3. Ids carry their shard in their top bits (id >> 48).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use trustmsg_client::{Message, Producer};
use trustmsg_tests::flags::RESEND_SOON;
use trustmsg_tests::kafka::{MockKafka, TopicReader};
use trustmsg_tests::{eventually, PrivateMariaDb, ServiceProcess, TestDb, UNREACHABLE_VERIFY_URL};

use crate::harness::settings;

const TOPIC: &str = "e2e-shards";
const BIZ: &str = "shop";

/// The shard `key` of [`BIZ`] lives on, by the documented slot rule.
fn shard_of(key: &str) -> u64 {
    let slot = crc32fast::hash(format!("{BIZ}\0{key}").as_bytes()) % 1024;
    u64::from(slot % 3)
}

/// The first `n` keys named `prefix-i` that live on `shard`.
fn keys_on(shard: u64, prefix: &str, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .filter(|k| shard_of(k) == shard)
        .take(n)
        .collect()
}

/// A raw `POST path` with the producer's token: status, Retry-After, body.
async fn post(
    service: &ServiceProcess,
    token: &str,
    path: &str,
    body: &Value,
) -> (u16, Option<String>, Value) {
    let res = service
        .http_client()
        .post(format!("{}{path}", service.url()))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let retry_after = res
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let text = res.text().await.unwrap();
    (
        status,
        retry_after,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn prepare_body(key: &str) -> Value {
    serde_json::to_value(Message::new(key, TOPIC, format!("payload of {key}")).to_request(BIZ))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_shard_fails_only_its_own_keys_and_loses_nothing() {
    let first = TestDb::create().await;
    let second = TestDb::create().await;
    let mut third = PrivateMariaDb::start().await;
    let third_url = third.url("trustmsg_shard");
    let kafka = MockKafka::start(1);
    kafka.create_topic(TOPIC, 3);
    let service = ServiceProcess::start_logged(
        &first.url,
        kafka.bootstrap(),
        &[
            &[
                "--database-url",
                &second.url,
                "--database-url",
                &third_url,
                "--request-timeout",
                "2s",
                "--backlog-interval",
                "200ms",
            ],
            RESEND_SOON,
        ]
        .concat(),
        None,
    )
    .await;
    let (token, _) = service
        .register(BIZ, settings(UNREACHABLE_VERIFY_URL, 3_600_000, 3))
        .await;
    let producer = Producer::new(&service.url(), BIZ, token.clone()).unwrap();
    let mut reader = TopicReader::new(kafka.bootstrap(), TOPIC);

    // Before the kill: committed messages on every shard, and on the third
    // one prepared but not yet committed, and committed ones whose send is
    // held back by a delivery time (acknowledged, not yet in Kafka).
    let mut acknowledged = BTreeSet::new();
    for shard in 0..3 {
        for key in keys_on(shard, "before", 4) {
            let m = producer
                .prepare(&Message::new(&key, TOPIC, format!("payload of {key}")))
                .await
                .unwrap();
            assert_eq!(m.id >> 48, shard, "{key}'s id names its shard");
            producer.commit(&key).await.unwrap();
            acknowledged.insert(m.id);
        }
    }
    let prepared_on_third = keys_on(2, "open", 2);
    for key in &prepared_on_third {
        producer
            .prepare(&Message::new(key, TOPIC, format!("payload of {key}")))
            .await
            .unwrap();
    }
    let held = keys_on(2, "held", 3);
    for key in &held {
        let m = producer
            .prepare(
                &Message::new(key, TOPIC, format!("payload of {key}"))
                    .deliver_after(Duration::from_secs(8)),
            )
            .await
            .unwrap();
        producer.commit(key).await.unwrap();
        acknowledged.insert(m.id);
    }
    reader
        .read_until(Duration::from_secs(30), "the 12 committed", |rs| {
            rs.iter()
                .filter(|r| acknowledged.contains(&r.message_id))
                .count()
                == 12
        })
        .await;

    third.kill_9();
    let killed = Instant::now();

    // Keys on the living shards: as usual, prepare and commit at once.
    for shard in 0..2 {
        for key in keys_on(shard, "during", 3) {
            let (status, _, body) = post(
                &service,
                &token,
                "/v1/messages/prepare",
                &prepare_body(&key),
            )
            .await;
            assert_eq!(status, 201, "{key} on living shard {shard}: {body}");
            let id = body["id"].as_u64().unwrap();
            let (status, _, body) = post(
                &service,
                &token,
                "/v1/messages/commit",
                &json!({"biz_id": BIZ, "message_key": key}),
            )
            .await;
            assert_eq!(status, 200, "commit of {key}: {body}");
            acknowledged.insert(id);
        }
    }
    // Keys on the dead shard: 503 with Retry-After, within the request
    // timeout, for a new prepare and for a commit of a prepared one.
    let refused = keys_on(2, "during", 2);
    for key in &refused {
        let asked = Instant::now();
        let (status, retry_after, body) =
            post(&service, &token, "/v1/messages/prepare", &prepare_body(key)).await;
        assert_eq!(status, 503, "{key} on the dead shard: {body}");
        assert!(retry_after.is_some(), "a 503 says when to retry");
        assert!(
            asked.elapsed() < Duration::from_secs(3),
            "{:?}",
            asked.elapsed()
        );
    }
    let (status, retry_after, body) = post(
        &service,
        &token,
        "/v1/messages/commit",
        &json!({"biz_id": BIZ, "message_key": prepared_on_third[0]}),
    )
    .await;
    assert_eq!(status, 503, "a commit on the dead shard: {body}");
    assert!(retry_after.is_some());

    // Ready (a load balancer keeps the instance), naming the dead shard.
    let ready = service
        .http_client()
        .get(format!("{}/readyz", service.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status().as_u16(), 200);
    let body = ready.text().await.unwrap();
    assert!(
        body.contains("degraded") && body.contains("shard 2"),
        "{body}"
    );
    assert!(
        !body.contains("shard 0") && !body.contains("shard 1"),
        "{body}"
    );
    eventually(10, "trustmsg_shard_up{shard=\"2\"} 0", async || {
        let metrics = service.metrics().await;
        metrics.value("trustmsg_shard_up", &[("shard", "2")]) == Some(0.0)
            && metrics.value("trustmsg_shard_up", &[("shard", "0")]) == Some(1.0)
    })
    .await;
    // The living shards' messages of the outage are sent meanwhile.
    reader
        .read_until(
            Duration::from_secs(30),
            "the outage's 6 from living shards",
            |rs| {
                rs.iter()
                    .filter(|r| acknowledged.contains(&r.message_id))
                    .count()
                    == 18
            },
        )
        .await;
    eprintln!(
        "kill → living shards' outage messages in Kafka: {:?}",
        killed.elapsed()
    );

    third.restart().await;
    // Back: the commit refused with 503 goes through when retried, and so
    // does the other message prepared before the kill.
    eventually(30, "a commit on the revived shard", async || {
        producer.commit(&prepared_on_third[0]).await.is_ok()
    })
    .await;
    for key in &prepared_on_third {
        let committed = producer.commit(key).await.unwrap();
        assert_eq!(committed.id >> 48, 2, "{key} on the revived shard");
        acknowledged.insert(committed.id);
    }
    // The prepares refused with 503, retried, and a key never seen before:
    // new rows on the revived shard, committed.
    let new_key = keys_on(2, "after", 1).remove(0);
    for key in refused.iter().chain([&new_key]) {
        let m = producer
            .prepare(&Message::new(key, TOPIC, format!("payload of {key}")))
            .await
            .unwrap();
        assert_eq!(m.id >> 48, 2, "{key}'s new row on the revived shard");
        let committed = producer.commit(key).await.unwrap();
        assert_eq!(committed.id, m.id);
        acknowledged.insert(m.id);
    }
    let third_pool = sqlx::MySqlPool::connect(&third_url).await.unwrap();
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT CAST(message_key AS CHAR) FROM messages WHERE status = 'COMMITTED' ORDER BY id",
    )
    .fetch_all(&third_pool)
    .await
    .unwrap();
    let on_third: BTreeSet<String> = rows.into_iter().map(|(k,)| k).collect();
    for key in refused.iter().chain([&new_key]).chain(&prepared_on_third) {
        assert!(
            on_third.contains(key),
            "{key} committed in the revived shard's own database: {on_third:?}"
        );
    }
    third_pool.close().await;
    reader
        .read_until(
            Duration::from_secs(60),
            "every acknowledged message",
            |rs| {
                acknowledged
                    .iter()
                    .all(|id| rs.iter().any(|r| r.message_id == *id))
            },
        )
        .await;
    let mut seen = BTreeSet::new();
    for r in &reader.records {
        if acknowledged.contains(&r.message_id) {
            assert!(seen.insert(r.message_id), "{} sent twice", r.message_id);
            let view = service
                .admin_get(&format!("/v1/admin/messages/{}", r.message_id))
                .await;
            let key = view["message"]["message_key"].as_str().unwrap().to_string();
            assert_eq!(
                r.payload.as_deref(),
                Some(format!("payload of {key}").as_bytes()),
                "the record byte for byte"
            );
        }
    }
    assert_eq!(seen.len(), acknowledged.len());
    drop(service);
    first.drop_db().await;
    second.drop_db().await;
}

/// The Kafka way in over three shards (on the shared server): submitted
/// records land on their keys' shards and are forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submitted_records_land_on_their_keys_shards_and_are_forwarded() {
    use trustmsg_tests::submit::{Submission, Submitter};
    const SUBMIT: &str = "e2e.shards.submit";
    let dbs = [
        TestDb::create().await,
        TestDb::create().await,
        TestDb::create().await,
    ];
    let kafka = MockKafka::start(1);
    kafka.create_topic(SUBMIT, 3);
    kafka.create_topic(TOPIC, 3);
    let service = ServiceProcess::start(
        &dbs[0],
        kafka.bootstrap(),
        &[
            "--database-url",
            &dbs[1].url,
            "--database-url",
            &dbs[2].url,
            "--submit-topic",
            SUBMIT,
            "--sweep-interval",
            "200ms",
        ],
    )
    .await;
    let (_, secret) = service
        .register(BIZ, settings(UNREACHABLE_VERIFY_URL, 3_600_000, 3))
        .await;
    let mut reader = TopicReader::new(kafka.bootstrap(), TOPIC);

    let submitter = Submitter::new(kafka.bootstrap(), SUBMIT, BIZ, &secret);
    let keys: Vec<String> = (0..3)
        .flat_map(|shard| keys_on(shard, "kafka", 4))
        .collect();
    for key in &keys {
        submitter
            .prepare(
                key,
                Submission {
                    topic: TOPIC,
                    value: format!("payload of {key}").as_bytes(),
                    ..Default::default()
                },
            )
            .await;
        submitter.commit(key).await;
    }
    reader
        .read_until(Duration::from_secs(60), "12 submitted", |rs| rs.len() >= 12)
        .await;
    let mut submitted_shards = BTreeSet::new();
    for key in &keys {
        let r = reader
            .records
            .iter()
            .find(|r| r.payload.as_deref() == Some(format!("payload of {key}").as_bytes()))
            .unwrap_or_else(|| panic!("{key} reached Kafka"));
        assert_eq!(
            r.message_id >> 48,
            shard_of(key),
            "{key} on its key's shard"
        );
        submitted_shards.insert(r.message_id >> 48);
    }
    assert_eq!(submitted_shards.len(), 3);
    drop(service);
    for db in dbs {
        db.drop_db().await;
    }
}

/// Per-key order over three shards: an ordered producer's messages of one
/// record key, whatever their message keys' slots, share a shard, and reach
/// Kafka in commit order although two instances commit them in turn while
/// the broker goes down and comes back (the run that reorders an unordered
/// producer's keys, `ordering::an_unordered_producers_keys_are_reordered_by_the_same_outage`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordered_producers_keys_keep_commit_order_across_three_shards_two_instances_and_an_outage(
) {
    let o = crate::ordering::thirty_keys_through_an_outage(true, 3).await;
    let mut used = BTreeSet::new();
    for (record_key, ids) in &o.commit_order {
        let shards: BTreeSet<u64> = ids.iter().map(|id| id >> 48).collect();
        assert_eq!(
            shards.len(),
            1,
            "{:?}'s messages share a shard: {ids:?}",
            String::from_utf8_lossy(record_key)
        );
        used.extend(shards);
    }
    assert_eq!(used.len(), 3, "the keys spread over the shards: {used:?}");
    assert_eq!(
        (o.keys_out_of_order, o.late_records),
        (0, 0),
        "keys out of order, records of an earlier message after a later one"
    );
}
