//! The Kafka way in (issue 29), against the real binary and librdkafka's
//! mock cluster: producers submit signed prepare, commit and rollback
//! records to `--submit-topic`; the service applies them as the HTTP API
//! would, forwards committed messages, dead-letters what it cannot apply,
//! and holds a commit that came before its prepare until the prepare is in.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use trustmsg_tests::kafka::TopicReader;
use trustmsg_tests::submit::{
    assert_nothing_dead_lettered, RawReader, RawRecord, Submission, Submitter,
};
use trustmsg_tests::{eventually, ServiceProcess, TestDb, ADMIN_TOKEN, UNREACHABLE_VERIFY_URL};
use trustmsg_verify_api::submit::{self, Op};

use crate::harness::{
    assert_the_placed_order_arrives, one_order_placed_one_failed, settings, statuses,
};

const SUBMIT: &str = "e2e.submit";
const DLQ: &str = "e2e.submit.dlq";

fn serve_flags<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut flags = vec![
        "--submit-topic",
        SUBMIT,
        "--sweep-interval",
        "200ms",
        "--backlog-interval",
        "200ms",
    ];
    flags.extend_from_slice(extra);
    flags
}

/// A producer that may publish to `orders` only, never checked back.
fn shop_settings() -> Value {
    let mut s = settings(UNREACHABLE_VERIFY_URL, 3_600_000, 3);
    s["topics"] = json!(["orders"]);
    s
}

async fn detail(service: &ServiceProcess, id: u64) -> Value {
    service.admin_get(&format!("/v1/admin/messages/{id}")).await
}

fn by_key(records: &[RawRecord]) -> BTreeMap<String, &RawRecord> {
    records
        .iter()
        .map(|r| (String::from_utf8(r.key.clone().unwrap()).unwrap(), r))
        .collect()
}

const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/// Prepares and commits `order-0` … `order-{n-1}` to `orders`, each keyed
/// `customer-{i % 3}` with a JSON payload and a content type, the first traced.
async fn submit_orders(producer: &Submitter, n: usize, traceparent: &str) {
    for i in 0..n {
        let key = format!("order-{i}");
        let value = format!("{{\"order\":{i}}}");
        let headers: &[(&str, &str)] = if i == 0 {
            &[
                ("content-type", "application/json"),
                ("traceparent", traceparent),
            ]
        } else {
            &[("content-type", "application/json")]
        };
        producer
            .prepare(
                &key,
                Submission {
                    topic: "orders",
                    key: Some(&format!("customer-{}", i % 3)),
                    headers,
                    value: value.as_bytes(),
                    partition: None,
                },
            )
            .await;
        producer.commit(&key).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submitted_records_are_prepared_committed_rolled_back_and_forwarded_as_over_http() {
    let db = TestDb::create().await;
    let kafka = trustmsg_tests::kafka::MockKafka::start(1);
    kafka.create_topic(SUBMIT, 3);
    kafka.create_topic("orders", 2);
    let service = ServiceProcess::start(&db, kafka.bootstrap(), &serve_flags(&[])).await;
    let (token, secret) = service.register("shop", shop_settings()).await;
    let producer = Submitter::new(kafka.bootstrap(), SUBMIT, "shop", &secret);

    const N: usize = 20;
    let traceparent = TRACEPARENT;
    submit_orders(&producer, N, TRACEPARENT).await;
    producer
        .prepare(
            "order-rolled-back",
            Submission {
                topic: "orders",
                value: b"never",
                ..Default::default()
            },
        )
        .await;
    producer.rollback("order-rolled-back").await;

    let mut orders = TopicReader::new(kafka.bootstrap(), "orders");
    orders
        .read_until(Duration::from_secs(30), "every committed message", |r| {
            r.len() >= N
        })
        .await;
    let pool = db.pool().await;
    let rows = statuses(&pool, "shop").await;
    let mut ids = BTreeMap::new();
    for record in orders.poll() {
        let key = String::from_utf8(record.key.clone().unwrap()).unwrap();
        let (message_key, (id, _, _)) = rows
            .iter()
            .find(|(_, (id, _, _))| *id == record.message_id)
            .expect("a record of a stored message");
        let message_key = message_key.clone();
        let i: usize = message_key.trim_start_matches("order-").parse().unwrap();
        assert_eq!(
            key,
            format!("customer-{}", i % 3),
            "the record key as submitted"
        );
        assert_eq!(
            record.payload.as_deref(),
            Some(format!("{{\"order\":{i}}}").as_bytes()),
            "the value byte for byte"
        );
        assert_eq!(
            record.header("content-type"),
            Some(&b"application/json"[..])
        );
        assert_eq!(
            record.header("trustmsg-message-key"),
            Some(message_key.as_bytes())
        );
        assert!(
            record.header(submit::SIGNATURE).is_none() && record.header(submit::OP).is_none(),
            "the submitted record's own headers are not carried: {:?}",
            record.headers
        );
        if i == 0 {
            assert_eq!(
                record.header("traceparent").map(|t| &t[..35]),
                Some(&traceparent.as_bytes()[..35]),
                "the trace goes on"
            );
        }
        ids.insert(message_key, *id);
    }
    assert_eq!(ids.len(), N, "each message once");
    // Every message SENT, the rolled-back one ROLLED_BACK and never sent.
    eventually(10, "every message in its final state", async || {
        let now = statuses(&pool, "shop").await;
        now.len() == N + 1
            && now.iter().all(|(key, (_, s, ss))| {
                let expected = if key == "order-rolled-back" {
                    ("ROLLED_BACK", None)
                } else {
                    ("COMMITTED", Some("SENT"))
                };
                (s.as_str(), ss.as_deref()) == expected
            })
    })
    .await;

    // Decided by `kafka`, audited with where the record was read.
    let audit = detail(&service, ids["order-3"]).await["audit"].clone();
    let commit = audit
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == "commit")
        .unwrap_or_else(|| panic!("a commit in {audit}"));
    assert_eq!(commit["actor"], "kafka", "{commit}");
    assert!(
        commit["reason"].as_str().unwrap().contains("partition"),
        "{commit}"
    );

    // A replayed stream changes nothing anyone can see: no new row, no new
    // audit entry, no dead letter, no second record.
    submit_orders(&producer, N, TRACEPARENT).await;
    let marker = "after-the-replay";
    producer
        .prepare(
            marker,
            Submission {
                topic: "orders",
                value: b"m",
                ..Default::default()
            },
        )
        .await;
    producer.commit(marker).await;
    orders
        .read_until(
            Duration::from_secs(30),
            "the marker after the replay",
            |r| r.len() > N,
        )
        .await;
    orders.read_for(Duration::from_millis(500)).await;
    assert_eq!(
        orders.poll().len(),
        N + 1,
        "no message sent twice by a replay"
    );
    let again = detail(&service, ids["order-3"]).await["audit"].clone();
    assert_eq!(again, audit, "a replayed commit writes no audit row");
    // Nothing dead-lettered, the replay included (each partition's
    // sentinel is dead-lettered after the replay's records there).
    assert_nothing_dead_lettered(kafka.bootstrap(), &producer, 3, DLQ).await;
    let (status, over_http) = service
        .call(
            Method::GET,
            "/v1/messages/shop/order-rolled-back",
            &token,
            None,
        )
        .await;
    assert_eq!(
        (status, over_http["status"].as_str()),
        (200, Some("ROLLED_BACK"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_be_applied_is_dead_lettered_with_the_http_code_and_blocks_nothing() {
    let db = TestDb::create().await;
    let kafka = trustmsg_tests::kafka::MockKafka::start(1);
    kafka.create_topic(SUBMIT, 1);
    kafka.create_topic("orders", 1);
    let service = ServiceProcess::start(
        &db,
        kafka.bootstrap(),
        &serve_flags(&["--max-payload-bytes", "1000"]),
    )
    .await;
    let (_, secret) = service.register("shop", shop_settings()).await;
    let shop = Submitter::new(kafka.bootstrap(), SUBMIT, "shop", &secret);
    let orders = |value: &'static [u8]| Submission {
        topic: "orders",
        value,
        ..Default::default()
    };

    // One partition: every bad record sits in front of the good one.
    let unsigned = {
        let mut h = shop.signed_headers(Op::Prepare, "unsigned", &orders(b"u"));
        h.retain(|(n, _)| n != submit::SIGNATURE);
        h
    };
    shop.raw(Some(b"unsigned"), unsigned, b"u", None).await;
    shop.with_identity("shop", "whsec_d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC0zMmJ5dGVz")
        .prepare("wrong-signature", orders(b"w"))
        .await;
    shop.with_identity("nobody", &secret)
        .prepare("unknown-producer", orders(b"n"))
        .await;
    let no_op = {
        let mut h = shop.signed_headers(Op::Prepare, "no-op", &orders(b"x"));
        h.retain(|(n, _)| n != submit::OP);
        h
    };
    shop.raw(Some(b"no-op"), no_op, b"x", None).await;
    // Signed after the fact: the record is not the one that was signed.
    let tampered = shop.signed_headers(Op::Prepare, "tampered", &orders(b"before"));
    shop.raw(Some(b"tampered"), tampered, b"after", None).await;
    shop.prepare(
        "bad-topic",
        Submission {
            topic: "no spaces allowed",
            value: b"t",
            ..Default::default()
        },
    )
    .await;
    shop.prepare(
        "not-allowed",
        Submission {
            topic: "payments",
            value: b"p",
            ..Default::default()
        },
    )
    .await;
    shop.prepare("too-large", orders(&[b'x'; 1001])).await;
    shop.prepare("conflict", orders(b"first")).await;
    shop.prepare("conflict", orders(b"second")).await;
    shop.rollback("rolled-back").await;
    shop.prepare("rolled-back", orders(b"late")).await;
    shop.prepare("committed-then-rolled-back", orders(b"c"))
        .await;
    shop.commit("committed-then-rolled-back").await;
    shop.rollback("committed-then-rolled-back").await;
    // A prepare record read again after its message was rolled back (Kafka
    // delivers at least once) changes nothing and is no dead letter; with
    // other content it is refused as over HTTP.
    shop.prepare("prepared-rolled-back-prepared", orders(b"p"))
        .await;
    shop.rollback("prepared-rolled-back-prepared").await;
    shop.prepare("prepared-rolled-back-prepared", orders(b"p"))
        .await;
    shop.prepare("prepared-rolled-back-other", orders(b"p"))
        .await;
    shop.rollback("prepared-rolled-back-other").await;
    shop.prepare("prepared-rolled-back-other", orders(b"other"))
        .await;
    shop.prepare(
        "reserved-header",
        Submission {
            topic: "orders",
            headers: &[("trustmsg-mine", "1")],
            value: b"r",
            ..Default::default()
        },
    )
    .await;
    shop.prepare("good", orders(b"good")).await;
    shop.commit("good").await;

    let expected: BTreeMap<&str, &str> = BTreeMap::from([
        ("unsigned", "unauthorized"),
        ("wrong-signature", "unauthorized"),
        ("unknown-producer", "unauthorized"),
        ("no-op", "invalid_request"),
        ("tampered", "unauthorized"),
        ("bad-topic", "invalid_topic"),
        ("not-allowed", "topic_not_allowed"),
        ("too-large", "payload_too_large"),
        ("conflict", "prepare_conflict"),
        ("rolled-back", "rolled_back"),
        ("committed-then-rolled-back", "already_committed"),
        ("prepared-rolled-back-other", "already_rolled_back"),
        ("reserved-header", "invalid_headers"),
    ]);
    let mut dead = RawReader::new(kafka.bootstrap(), DLQ);
    dead.read_until(
        Duration::from_secs(30),
        "a dead letter per bad record",
        |r| r.len() >= expected.len(),
    )
    .await;
    let letters = by_key(&dead.records);
    for (key, code) in &expected {
        let letter = letters
            .get(*key)
            .unwrap_or_else(|| panic!("no dead letter for {key}: {:#?}", dead.records));
        assert_eq!(
            letter.header(submit::ERROR_CODE).as_deref(),
            Some(*code),
            "{key}"
        );
        let error = letter.header(submit::ERROR).unwrap();
        assert!(error.len() > 20, "a sentence for a person: {error:?}");
    }
    assert!(letters["not-allowed"]
        .header(submit::ERROR)
        .unwrap()
        .contains("payments"));
    // The record as it came, plus the error headers.
    let tampered = letters["tampered"];
    assert_eq!(tampered.value.as_deref(), Some(&b"after"[..]));
    assert_eq!(tampered.header(submit::OP).as_deref(), Some("prepare"));
    assert!(tampered
        .header(submit::SIGNATURE)
        .unwrap()
        .starts_with("v1,"));
    assert_eq!(
        letters["too-large"].value.as_ref().map(Vec::len),
        Some(1001)
    );
    dead.read_for_a_while().await;
    assert_eq!(
        dead.records.len(),
        expected.len(),
        "one letter each: {:#?}",
        dead.records
    );

    // None of it blocked the partition; none of it was applied.
    let pool = db.pool().await;
    eventually(20, "the good message sent", async || {
        statuses(&pool, "shop")
            .await
            .get("good")
            .map(|(_, _, s)| s.clone())
            == Some(Some("SENT".into()))
    })
    .await;
    let rows = statuses(&pool, "shop").await;
    for key in [
        "unsigned",
        "wrong-signature",
        "no-op",
        "tampered",
        "bad-topic",
        "not-allowed",
        "too-large",
        "reserved-header",
    ] {
        assert!(!rows.contains_key(key), "{key} was applied: {rows:?}");
    }
    assert_eq!(rows["conflict"].1, "PREPARED");
    assert_eq!(rows["rolled-back"].1, "ROLLED_BACK");
    assert_eq!(rows["prepared-rolled-back-prepared"].1, "ROLLED_BACK");
    assert_eq!(rows["committed-then-rolled-back"].1, "COMMITTED");
    let metrics = service.metrics().await;
    assert_eq!(
        metrics.value(
            "trustmsg_submit_dead_letters_total",
            &[("code", "unauthorized")]
        ),
        Some(4.0),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_before_its_prepare_waits_for_it_visibly_and_is_dead_lettered_when_its_wait_runs_out(
) {
    let db = TestDb::create().await;
    let kafka = trustmsg_tests::kafka::MockKafka::start(1);
    kafka.create_topic(SUBMIT, 2);
    kafka.create_topic("orders", 1);
    let service = ServiceProcess::start(
        &db,
        kafka.bootstrap(),
        &serve_flags(&["--submit-commit-wait", "4s"]),
    )
    .await;
    let (_, secret) = service.register("shop", shop_settings()).await;
    let shop = Submitter::new(kafka.bootstrap(), SUBMIT, "shop", &secret);
    let commit_on = |partition| Submission {
        partition: Some(partition),
        ..Default::default()
    };

    // The commits go to partition 1, their prepares (one of them never) to 0.
    shop.signed(Op::Commit, "early", commit_on(1)).await;
    shop.signed(Op::Commit, "orphan", commit_on(1)).await;
    eventually(10, "both commits waiting", async || {
        let (_, page) = service
            .call(Method::GET, "/v1/admin/submit/waiting", ADMIN_TOKEN, None)
            .await;
        page["items"].as_array().is_some_and(|i| i.len() == 2)
    })
    .await;
    let (_, page) = service
        .call(Method::GET, "/v1/admin/submit/waiting", ADMIN_TOKEN, None)
        .await;
    let first = &page["items"][0];
    assert_eq!(
        (first["biz_id"].as_str(), first["message_key"].as_str()),
        (Some("shop"), Some("early"))
    );
    assert_eq!(first["partition"], 1);
    let (_, summary) = service
        .call(Method::GET, "/v1/admin/summary", ADMIN_TOKEN, None)
        .await;
    assert_eq!(summary["submit_waiting"], 2, "{summary}");
    eventually(5, "the gauge", async || {
        service.metric("trustmsg_submit_waiting", &[]).await == Some(2.0)
    })
    .await;
    let pool = db.pool().await;
    assert!(statuses(&pool, "shop").await.is_empty(), "nothing guessed");

    shop.prepare(
        "early",
        Submission {
            topic: "orders",
            value: b"late prepare",
            partition: Some(0),
            ..Default::default()
        },
    )
    .await;
    let mut orders = TopicReader::new(kafka.bootstrap(), "orders");
    orders
        .read_until(Duration::from_secs(15), "the early commit applied", |r| {
            !r.is_empty()
        })
        .await;
    assert_eq!(
        orders.poll()[0].payload.as_deref(),
        Some(&b"late prepare"[..])
    );

    let mut dead = RawReader::new(kafka.bootstrap(), DLQ);
    dead.read_until(
        Duration::from_secs(20),
        "the orphan commit dead-lettered",
        |r| !r.is_empty(),
    )
    .await;
    let letter = &dead.records[0];
    assert_eq!(letter.key.as_deref(), Some(&b"orphan"[..]));
    assert_eq!(
        letter.header(submit::ERROR_CODE).as_deref(),
        Some("message_not_found")
    );
    assert_eq!(letter.header(submit::OP).as_deref(), Some("commit"));
    assert!(letter
        .header(submit::ERROR)
        .unwrap()
        .contains("--submit-commit-wait"));
    let (_, page) = service
        .call(Method::GET, "/v1/admin/submit/waiting", ADMIN_TOKEN, None)
        .await;
    assert_eq!(page["items"], json!([]), "nothing waits any more");
    dead.read_for_a_while().await;
    assert_eq!(dead.records.len(), 1, "dead-lettered once");
    assert!(!statuses(&pool, "shop").await.contains_key("orphan"));
}

/// Contract kit scenario S08 for the Rust SDK: the Kafka way in delivers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdks_submitter_and_transaction_helper_commit_what_succeeds_and_roll_back_what_fails() {
    use trustmsg_client::submit::Submitter as SdkSubmitter;

    let db = TestDb::create().await;
    let kafka = trustmsg_tests::kafka::MockKafka::start(1);
    kafka.create_topic(SUBMIT, 3);
    kafka.create_topic("orders", 1);
    let service = ServiceProcess::start(&db, kafka.bootstrap(), &serve_flags(&[])).await;
    let (_, secret) = service.register("shop", shop_settings()).await;
    let sdk = SdkSubmitter::new(kafka.bootstrap(), &[], SUBMIT, "shop", secret).unwrap();

    one_order_placed_one_failed(&sdk, "orders", Some(Duration::from_millis(300))).await;

    let mut orders = TopicReader::new(kafka.bootstrap(), "orders");
    assert_the_placed_order_arrives(&mut orders, 30).await;
    let pool = db.pool().await;
    eventually(15, "both decided", async || {
        let rows = statuses(&pool, "shop").await;
        rows.get("sdk-ok").map(|r| (r.1.as_str(), r.2.as_deref()))
            == Some(("COMMITTED", Some("SENT")))
            && rows.get("sdk-failed").map(|r| r.1.as_str()) == Some("ROLLED_BACK")
    })
    .await;
    let (_, view) = service
        .call(
            Method::GET,
            "/v1/admin/messages?biz_id=shop",
            ADMIN_TOKEN,
            None,
        )
        .await;
    let delayed = view["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["message_key"] == "sdk-ok")
        .unwrap();
    assert!(
        delayed["deliver_at"].is_string(),
        "the delay came through: {delayed}"
    );
    orders.read_for(Duration::from_millis(500)).await;
    assert_eq!(orders.poll().len(), 1, "the rolled-back one never sent");
}
