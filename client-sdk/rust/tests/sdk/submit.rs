//! The Kafka way in: the `Submitter` against librdkafka's mock cluster. What
//! it produces is read back record by record (key, value, every header) and
//! its signature checked with the contract's own `verify`, so these tests
//! fail if a byte the service relies on changes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message as _;
use rdkafka::{Offset, TopicPartitionList};
use trustmsg_client::api::submit::{self, Op, Signed, SubmitSignatureError};
use trustmsg_client::submit::Submitted;
use trustmsg_client::{transaction, Error, Message, Submitter, TxOutcome};
use trustmsg_kafka_mock::MockKafka;

/// `whsec_` + base64 of `trustmsg-submit-test-key-32bytes` (verify-api's vector).
const SECRET: &str = "whsec_dHJ1c3Rtc2ctc3VibWl0LXRlc3Qta2V5LTMyYnl0ZXM=";
const OTHER_SECRET: &str = "whsec_b3RoZXIta2V5LWZvci10aGUtc2FtZS1zaG9w";
const TOPIC: &str = "trustmsg.submit";
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// One record of the submit topic, as a consumer sees it.
#[derive(Debug, Clone)]
struct Record {
    partition: i32,
    offset: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

impl Record {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| std::str::from_utf8(v.as_deref()?).ok())
    }

    /// Every header as text; each name once.
    fn header_map(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        for (k, v) in &self.headers {
            let v = String::from_utf8(v.clone().expect("no null header")).unwrap();
            assert!(m.insert(k.clone(), v).is_none(), "header {k} twice");
        }
        m
    }

    /// The record's signature checked as trustmsg checks it: the other
    /// headers are every header that is not one of the contract's.
    fn verify(&self, secret: &str) -> Result<(), SubmitSignatureError> {
        let other: BTreeMap<String, String> = self
            .header_map()
            .into_iter()
            .filter(|(k, _)| !submit::CONTRACT_HEADERS.contains(&k.as_str()))
            .collect();
        let signed = Signed {
            op: Op::parse(self.header(submit::OP).unwrap()).unwrap(),
            biz_id: self.header(submit::BIZ_ID).unwrap(),
            message_key: self.header(submit::MESSAGE_KEY).unwrap(),
            topic: self.header(submit::TOPIC).unwrap_or_default(),
            key: self.header(submit::KEY),
            headers: &other,
            value: self.value.as_deref().unwrap_or_default(),
        };
        submit::verify(secret, &signed, self.header(submit::SIGNATURE).unwrap())
    }
}

/// Reads `topic` from the beginning until `n` records arrived (at most 20
/// s), then half a second more so that a record too many is seen too.
async fn read(bootstrap: &str, topic: &str, n: usize) -> Vec<Record> {
    let (bootstrap, topic) = (bootstrap.to_string(), topic.to_string());
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", "submit-test")
            .set("enable.auto.commit", "false")
            .set("fetch.wait.max.ms", "10")
            .create()
            .unwrap();
        let md = consumer
            .fetch_metadata(Some(&topic), Duration::from_secs(10))
            .unwrap();
        let partitions = md.topics()[0].partitions().len() as i32;
        assert!(partitions > 0, "{topic} exists");
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition_offset(&topic, p, Offset::Beginning)
                .unwrap();
        }
        consumer.assign(&tpl).unwrap();
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut extra_until = None;
        loop {
            let now = Instant::now();
            if extra_until.is_some_and(|t| now > t) || now > deadline {
                break;
            }
            if let Some(m) = consumer.poll(Duration::from_millis(50)) {
                let m = m.unwrap();
                out.push(Record {
                    partition: m.partition(),
                    offset: m.offset(),
                    key: m.key().map(<[u8]>::to_vec),
                    value: m.payload().map(<[u8]>::to_vec),
                    headers: trustmsg_kafka_mock::record_headers(&m),
                });
            }
            if out.len() >= n && extra_until.is_none() {
                extra_until = Some(Instant::now() + Duration::from_millis(500));
            }
        }
        out.sort_by_key(|r| (r.partition, r.offset));
        out
    })
    .await
    .unwrap()
}

fn kafka() -> MockKafka {
    let kafka = MockKafka::start(1);
    // Several partitions: keying by the message key is what keeps one
    // message's records together.
    kafka.create_topic(TOPIC, 4);
    kafka
}

fn submitter(kafka: &MockKafka) -> Submitter {
    Submitter::new(kafka.bootstrap(), &[], TOPIC, "shop", SECRET).unwrap()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[tokio::test]
async fn a_prepare_is_one_signed_record_keyed_by_the_message_key_carrying_payload_bytes_and_headers(
) {
    let kafka = kafka();
    let s = submitter(&kafka);
    // Bytes that are not UTF-8: the record value is them, not their base64.
    let payload = [0u8, 159, 146, 150, b'\n', 255];
    let at = s
        .prepare(
            &Message::from_bytes("order-42", "orders", &payload)
                .key("customer-7")
                .header("content-type", "application/octet-stream")
                .header("x-source", "web")
                .deliver_after(Duration::from_millis(90_500)),
        )
        .await
        .unwrap();

    let records = read(kafka.bootstrap(), TOPIC, 1).await;
    assert_eq!(records.len(), 1, "{records:?}");
    let r = &records[0];
    assert_eq!((r.partition, r.offset), (at.partition, at.offset));
    assert_eq!(r.key.as_deref(), Some(&b"order-42"[..]));
    assert_eq!(r.value.as_deref(), Some(&payload[..]));
    let mut headers = r.header_map();
    let signature = headers.remove(submit::SIGNATURE).unwrap();
    assert!(signature.starts_with("v1,"), "{signature}");
    assert_eq!(
        headers,
        map(&[
            ("trustmsg-op", "prepare"),
            ("trustmsg-biz-id", "shop"),
            ("trustmsg-message-key", "order-42"),
            ("trustmsg-topic", "orders"),
            ("trustmsg-key", "customer-7"),
            ("trustmsg-deliver-after-ms", "90500"),
            ("content-type", "application/octet-stream"),
            ("x-source", "web"),
        ])
    );
    r.verify(SECRET).unwrap();
    assert!(r.verify(OTHER_SECRET).is_err());
}

#[tokio::test]
async fn a_prepare_carries_its_delivery_time_and_trace_context_as_signed_headers() {
    let kafka = kafka();
    let s = submitter(&kafka);
    let at = Utc.with_ymd_and_hms(2030, 1, 1, 9, 0, 0).unwrap();
    s.prepare(
        &Message::new("reminder-1", "reminders", r#"{"remind":true}"#)
            .deliver_at(at)
            .trace_context(TRACEPARENT, Some("shop=t61rcWkgMzE")),
    )
    .await
    .unwrap();

    let records = read(kafka.bootstrap(), TOPIC, 1).await;
    assert_eq!(records.len(), 1, "{records:?}");
    let r = &records[0];
    assert_eq!(r.value.as_deref(), Some(&br#"{"remind":true}"#[..]));
    let mut headers = r.header_map();
    headers.remove(submit::SIGNATURE).unwrap();
    assert_eq!(
        headers,
        map(&[
            ("trustmsg-op", "prepare"),
            ("trustmsg-biz-id", "shop"),
            ("trustmsg-message-key", "reminder-1"),
            ("trustmsg-topic", "reminders"),
            ("trustmsg-deliver-at", "2030-01-01T09:00:00.000Z"),
            ("traceparent", TRACEPARENT),
            ("tracestate", "shop=t61rcWkgMzE"),
        ]),
        "no trustmsg-key header without a record key"
    );
    r.verify(SECRET).unwrap();
    assert!(r.verify(OTHER_SECRET).is_err());
}

#[tokio::test]
async fn commit_and_rollback_are_signed_records_with_empty_values_keyed_by_the_message_key() {
    let kafka = kafka();
    let s = submitter(&kafka);
    let c = s.commit("order-42").await.unwrap();
    let r = s.rollback("order-43").await.unwrap();
    assert_ne!((c.partition, c.offset), (r.partition, r.offset));

    let records = read(kafka.bootstrap(), TOPIC, 2).await;
    assert_eq!(records.len(), 2, "{records:?}");
    for (op, key) in [("commit", "order-42"), ("rollback", "order-43")] {
        let rec = records
            .iter()
            .find(|r| r.header(submit::OP) == Some(op))
            .unwrap();
        assert_eq!(rec.key.as_deref(), Some(key.as_bytes()));
        assert_eq!(rec.value.as_deref(), Some(&b""[..]), "empty, not null");
        let mut headers = rec.header_map();
        headers.remove(submit::SIGNATURE).unwrap();
        assert_eq!(
            headers,
            map(&[
                ("trustmsg-op", op),
                ("trustmsg-biz-id", "shop"),
                ("trustmsg-message-key", key),
            ])
        );
        rec.verify(SECRET).unwrap();
        assert!(rec.verify(OTHER_SECRET).is_err());
    }
    // verify-api's commit vector: the same record signs the same.
    let commit = records
        .iter()
        .find(|r| r.header(submit::OP) == Some("commit"))
        .unwrap();
    assert_eq!(
        commit.header(submit::SIGNATURE),
        Some("v1,ob5cjANGtqk8mNHnWtEbXUE2ovZlrPcFYgVWQRLNDVs=")
    );
}

#[tokio::test]
async fn the_transaction_helper_submits_prepare_then_commit_on_one_partition() {
    let kafka = kafka();
    let s = submitter(&kafka);
    let mut seen_prepare = None;
    let outcome = transaction(&s, Message::new("order-42", "orders", "{}"), |prepared| {
        seen_prepare = Some(prepared);
        async { Ok::<_, String>(42) }
    })
    .await
    .unwrap();
    let TxOutcome::Committed { value, message } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(value, 42);

    let records = read(kafka.bootstrap(), TOPIC, 2).await;
    let ops: Vec<_> = records.iter().map(|r| r.header(submit::OP)).collect();
    assert_eq!(ops, [Some("prepare"), Some("commit")], "{records:?}");
    assert_eq!(records[0].partition, records[1].partition);
    let place = |r: &Record| Submitted {
        partition: r.partition,
        offset: r.offset,
    };
    assert_eq!(seen_prepare, Some(place(&records[0])));
    assert_eq!(message, place(&records[1]));
    for r in &records {
        assert_eq!(r.key.as_deref(), Some(&b"order-42"[..]));
        r.verify(SECRET).unwrap();
    }
}

#[tokio::test]
async fn the_transaction_helper_submits_prepare_then_rollback_when_the_local_transaction_fails() {
    let kafka = kafka();
    let s = submitter(&kafka);
    let outcome = transaction(&s, Message::new("order-7", "orders", "{}"), |_| async {
        Err::<(), _>("out of stock")
    })
    .await
    .unwrap();
    assert!(
        matches!(
            outcome,
            TxOutcome::RolledBack {
                error: "out of stock"
            }
        ),
        "{outcome:?}"
    );

    let records = read(kafka.bootstrap(), TOPIC, 2).await;
    let ops: Vec<_> = records.iter().map(|r| r.header(submit::OP)).collect();
    assert_eq!(ops, [Some("prepare"), Some("rollback")], "{records:?}");
    assert_eq!(records[0].partition, records[1].partition);
    assert!(records[0].offset < records[1].offset);
}

/// A submitter that gives up on an acknowledgement after a second.
fn impatient(kafka: &MockKafka) -> Submitter {
    Submitter::new(
        kafka.bootstrap(),
        &[("message.timeout.ms", "1000")],
        TOPIC,
        "shop",
        SECRET,
    )
    .unwrap()
}

/// [`impatient`], once it has had one record acknowledged: its connection
/// and producer id are set up, so a prepare's second is not spent on them
/// (on a loaded machine it could be).
async fn impatient_and_connected(kafka: &MockKafka) -> Submitter {
    let s = impatient(kafka);
    for _ in 0..20 {
        if s.commit("warm-up").await.is_ok() {
            return s;
        }
    }
    panic!("the mock cluster never acknowledged a record")
}

#[tokio::test]
async fn a_commit_record_kafka_does_not_acknowledge_is_left_to_check_back() {
    let kafka = kafka();
    let s = impatient_and_connected(&kafka).await;
    let outcome = transaction(&s, Message::new("order-8", "orders", "{}"), |_| async {
        // Kafka goes away while the local transaction runs.
        kafka.brokers_down();
        Ok::<_, String>(8)
    })
    .await
    .unwrap();
    assert!(outcome.left_to_check_back(), "{outcome:?}");
    let TxOutcome::CommitLeftToCheckBack { value, error } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(value, 8);
    assert!(matches!(error, Error::NotAcknowledged { .. }), "{error:?}");
}

#[tokio::test]
async fn a_rollback_record_kafka_does_not_acknowledge_is_left_to_check_back() {
    let kafka = kafka();
    let s = impatient_and_connected(&kafka).await;
    let outcome = transaction(&s, Message::new("order-9", "orders", "{}"), |_| async {
        kafka.brokers_down();
        Err::<(), _>("out of stock")
    })
    .await
    .unwrap();
    let TxOutcome::RollbackLeftToCheckBack {
        error: "out of stock",
        rollback_error,
    } = outcome
    else {
        panic!("{outcome:?}")
    };
    assert!(
        matches!(rollback_error, Error::NotAcknowledged { .. }),
        "{rollback_error:?}"
    );
}

#[tokio::test]
async fn with_the_brokers_down_prepare_fails_in_bounded_time_and_the_local_transaction_never_runs()
{
    let kafka = kafka();
    kafka.brokers_down();
    let s = impatient(&kafka);

    let started = Instant::now();
    let e = s
        .prepare(&Message::new("order-1", "orders", "{}"))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::NotAcknowledged { .. }), "{e:?}");
    assert!(e.is_unavailable(), "submitting again is safe");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    let mut ran = false;
    let started = Instant::now();
    let e = transaction(&s, Message::new("order-2", "orders", "{}"), |_| {
        ran = true;
        async { Ok::<_, String>(()) }
    })
    .await
    .unwrap_err();
    assert!(matches!(e, Error::NotAcknowledged { .. }), "{e:?}");
    assert!(!ran, "no local transaction without an acknowledged prepare");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn what_the_signature_cannot_express_or_trustmsg_reserves_is_refused_before_sending() {
    let kafka = kafka();
    let s = submitter(&kafka);
    let refused = [
        Message::new("order-1", "orders", "{}").header("x-note", "line 1\nb=2"),
        Message::new("order-2", "orders", "{}").header("a=1", "x"),
        Message::new("order-3\r", "orders", "{}"),
        Message::new("order-4", "orders", "{}")
            .header("trustmsg-deliver-at", "2030-01-01T00:00:00Z"),
    ];
    for m in &refused {
        let e = s.prepare(m).await.unwrap_err();
        assert!(
            matches!(e, Error::Invalid { status: 400, .. }),
            "{m:?}: {e:?}"
        );
    }
    assert!(matches!(
        s.commit("order-5\n").await.unwrap_err(),
        Error::Invalid { .. }
    ));
    // Then one that is fine: it is the only record in the topic.
    s.prepare(&Message::new("order-6", "orders", "line 1\nline 2"))
        .await
        .unwrap();
    let records = read(kafka.bootstrap(), TOPIC, 1).await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0].header(submit::MESSAGE_KEY), Some("order-6"));
    records[0].verify(SECRET).unwrap();
}
