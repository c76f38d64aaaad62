//! What only the end-to-end tests need on top of the kit: a Kafka cluster with
//! a reader per topic, the message ledger read straight from the table, and
//! fast check-back settings.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Mutex;

use serde_json::{json, Value};
use sqlx::MySqlPool;
use trustmsg_client::{Message, Producer};
use trustmsg_tests::kafka::{Consumed, MockKafka, TopicReader};
use trustmsg_tests::{eventually, CheckServer, ServiceProcess, TestDb, UNREACHABLE_VERIFY_URL};
use trustmsg_verify_api::kafka_headers;

/// Kafka: a mock cluster with the given topics (3 partitions each), each read
/// from the beginning.
pub(crate) struct Kafka {
    pub(crate) mock: MockKafka,
    readers: Mutex<Vec<TopicReader>>,
}

impl Kafka {
    pub(crate) fn start(topics: &[&str]) -> Self {
        let mock = MockKafka::start(1);
        for topic in topics {
            mock.create_topic(topic, 3);
        }
        let readers = topics
            .iter()
            .map(|topic| TopicReader::new(mock.bootstrap(), topic))
            .collect();
        Self {
            mock,
            readers: Mutex::new(readers),
        }
    }

    /// Every record delivered by now, across the topics.
    pub(crate) fn records(&self) -> Vec<Consumed> {
        let mut readers = self.readers.lock().unwrap();
        readers.iter_mut().flat_map(|r| r.poll().to_vec()).collect()
    }

    /// Message id → how many times it was delivered by now.
    pub(crate) fn deliveries(&self) -> HashMap<u64, usize> {
        let mut m = HashMap::new();
        for r in self.records() {
            *m.entry(r.message_id).or_default() += 1;
        }
        m
    }
}

/// A message row as raw columns: key, id, status, send_status.
type StatusRow = (Vec<u8>, u64, Vec<u8>, Option<Vec<u8>>);

/// Status of every message of `biz_id`, by message key.
pub(crate) async fn statuses(
    pool: &MySqlPool,
    biz_id: &str,
) -> HashMap<String, (u64, String, Option<String>)> {
    let rows: Vec<StatusRow> = sqlx::query_as(
        "SELECT message_key, id, status, send_status FROM messages WHERE biz_id = ?",
    )
    .bind(biz_id)
    .fetch_all(pool)
    .await
    .unwrap();
    rows.into_iter()
        .map(|(k, id, s, ss)| {
            (
                String::from_utf8(k).unwrap(),
                (
                    id,
                    String::from_utf8(s).unwrap(),
                    ss.map(|s| String::from_utf8(s).unwrap()),
                ),
            )
        })
        .collect()
}

/// Fast check-back settings for tests (seconds, not minutes).
pub(crate) const FAST_VERIFY: &[&str] = &[
    "--verify-interval",
    "50ms",
    "--verify-backoff-base",
    "100ms",
    "--verify-backoff-max",
    "300ms",
    "--sweep-interval",
    "200ms",
];

/// A producer registration checked back at `verify_url`, first after
/// `first_ms`, at most `attempts` times.
pub(crate) fn settings(verify_url: &str, first_ms: u32, attempts: u32) -> Value {
    json!({
        "verify_url": verify_url,
        "first_verify_after_ms": first_ms,
        "max_verify_attempts": attempts,
        "verify_timeout_ms": 5000,
    })
}

/// Registers the producer `shop` (checked back nowhere, first after an hour)
/// and returns its client.
pub(crate) async fn shop(service: &ServiceProcess) -> Producer {
    let (token, _) = service
        .register("shop", settings(UNREACHABLE_VERIFY_URL, 3_600_000, 3))
        .await;
    Producer::new(&service.url(), "shop", token).unwrap()
}

/// Prepares and commits `message`; its id.
pub(crate) async fn commit(producer: &Producer, message: &Message) -> u64 {
    let view = producer.prepare(message).await.unwrap();
    producer.commit(message.message_key()).await.unwrap();
    view.id
}

/// `--kafka-config` flags for these `key=value` settings; `("@", path)` is
/// `--kafka-config @path`, a file of settings.
pub(crate) fn kafka_config(settings: &[(&str, &str)]) -> Vec<String> {
    settings
        .iter()
        .flat_map(|(k, v)| {
            let entry = if *k == "@" {
                format!("@{v}")
            } else {
                format!("{k}={v}")
            };
            ["--kafka-config".to_string(), entry]
        })
        .collect()
}

/// The service as a Kafka test file starts it: given librdkafka settings
/// (see [`kafka_config`]), these send timeouts and a sweep every 200 ms.
pub(crate) struct KafkaService {
    /// `--kafka-message-timeout` and `--send-lease`.
    pub(crate) send: &'static [&'static str],
}

impl KafkaService {
    /// The service over `db` sending to `bootstrap` with the librdkafka
    /// settings `client`, its log appended to `log`.
    pub(crate) async fn start(
        &self,
        db: &TestDb,
        bootstrap: &str,
        client: &[(&str, &str)],
        log: &Path,
    ) -> ServiceProcess {
        let mut extra = kafka_config(client);
        extra.extend(self.send.iter().map(|s| s.to_string()));
        extra.extend(["--sweep-interval", "200ms"].map(String::from));
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        ServiceProcess::start_logged(&db.url, bootstrap, &extra, Some(log.into())).await
    }
}

/// librdkafka's settings for TLS trusting the CA in `ca_file` (and checking
/// the broker's name, librdkafka 2.x's default).
pub(crate) fn trusting(ca_file: &str) -> [(&'static str, &str); 2] {
    [("security.protocol", "SSL"), ("ssl.ca.location", ca_file)]
}

/// These librdkafka TLS settings with the check of the broker's name
/// turned off (what nobody should do).
pub(crate) fn without_the_name_check<'a>(tls: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut unchecked = tls.to_vec();
    unchecked.push(("ssl.endpoint.identification.algorithm", "none"));
    unchecked
}

/// A payload with bytes that are not UTF-8, so "byte for byte" means it.
pub(crate) fn binary_payload(key: &str) -> Vec<u8> {
    let mut p = format!("payload of {key} \u{e9}").into_bytes();
    p.extend([0x00, 0xff, 0xfe]);
    p
}

/// `shop`'s message `key` to `topic` with a [`binary_payload`], the record
/// key `record-key-{key}` and the header `x-seq: {key}`.
pub(crate) fn binary_message(topic: &str, key: &str) -> Message {
    Message::from_bytes(key, topic, &binary_payload(key))
        .key(format!("record-key-{key}"))
        .header("x-seq", key)
}

/// The record is [`binary_message`] `key`'s, message `id`, byte for byte:
/// value, key, headers.
pub(crate) fn assert_binary_record_is(r: &Consumed, key: &str, id: u64) {
    assert_eq!(
        r.payload.as_deref(),
        Some(&binary_payload(key)[..]),
        "{r:?}"
    );
    assert_key_and_headers(r, key, id, &[("x-seq", key)]);
}

/// The record's key is `record-key-{key}` and its headers are exactly the
/// message's `own` and the three trustmsg adds for `shop`'s message `key`,
/// `id`.
pub(crate) fn assert_key_and_headers(r: &Consumed, key: &str, id: u64, own: &[(&str, &str)]) {
    assert_eq!(
        r.key.as_deref(),
        Some(format!("record-key-{key}").as_bytes())
    );
    let id = id.to_string();
    let expected: BTreeMap<String, Option<Vec<u8>>> = own
        .iter()
        .copied()
        .chain([
            (kafka_headers::MESSAGE_ID, id.as_str()),
            (kafka_headers::BIZ_ID, "shop"),
            (kafka_headers::MESSAGE_KEY, key),
        ])
        .map(|(k, v)| (k.to_string(), Some(v.as_bytes().to_vec())))
        .collect();
    assert_eq!(r.header_map(), expected, "{r:?}");
}

/// A service with `flags` after [`FAST_VERIFY`] whose producer `shop`'s
/// check-back never decides (2 attempts): one VERIFY_FAILED message
/// `undecided` to `topic`, and so one alert. Returns the message id.
pub(crate) async fn one_verify_failed_alert(
    db: &TestDb,
    kafka: &Kafka,
    topic: &str,
    flags: &[&str],
) -> (ServiceProcess, u64) {
    let mut all = FAST_VERIFY.to_vec();
    all.extend_from_slice(flags);
    let service = ServiceProcess::start(db, kafka.mock.bootstrap(), &all).await;
    let check = CheckServer::start().await; // answers "unknown" to everything
    let (token, secret) = service
        .register("shop", settings(&check.url(), 100, 2))
        .await;
    check.set_secret(&secret);
    let body = json!({
        "biz_id": "shop", "message_key": "undecided", "topic": topic, "payload": "x"
    });
    let (status, prepared) = service
        .call(
            reqwest::Method::POST,
            "/v1/messages/prepare",
            &token,
            Some(&body),
        )
        .await;
    assert_eq!(status, 201, "{prepared}");
    let pool = db.pool().await;
    eventually(30, "the message VERIFY_FAILED", async || {
        statuses(&pool, "shop")
            .await
            .get("undecided")
            .is_some_and(|(_, s, _)| s == "VERIFY_FAILED")
    })
    .await;
    (service, prepared["id"].as_u64().unwrap())
}

/// Through the SDK's `sdk`, in its transaction helper: `sdk-ok` to `orders`
/// (keyed `customer-7`, a JSON payload, delivered after `deliver_after`),
/// whose work succeeds, is committed; `sdk-failed`, whose work fails, is
/// rolled back.
pub(crate) async fn one_order_placed_one_failed(
    sdk: &trustmsg_client::submit::Submitter,
    orders: &str,
    deliver_after: Option<std::time::Duration>,
) {
    use trustmsg_client::{transaction, TxOutcome};

    let mut ok = Message::new("sdk-ok", orders, r#"{"total":7}"#)
        .key("customer-7")
        .header("content-type", "application/json");
    if let Some(after) = deliver_after {
        ok = ok.deliver_after(after);
    }
    let placed = transaction(sdk, ok, async |_| Ok::<_, String>("order stored"))
        .await
        .unwrap();
    assert!(matches!(placed, TxOutcome::Committed { .. }), "{placed:?}");
    let failed = transaction(
        sdk,
        Message::new("sdk-failed", orders, "never"),
        async |_| Err::<(), _>("payment declined".to_string()),
    )
    .await
    .unwrap();
    assert!(matches!(failed, TxOutcome::RolledBack { .. }), "{failed:?}");
}

/// The first record `orders` gets (within `secs`) is
/// [`one_order_placed_one_failed`]'s committed order, as placed.
pub(crate) async fn assert_the_placed_order_arrives(orders: &mut TopicReader, secs: u64) {
    orders
        .read_until(
            std::time::Duration::from_secs(secs),
            "the committed message",
            |r| !r.is_empty(),
        )
        .await;
    let record = &orders.poll()[0];
    assert_eq!(record.payload.as_deref(), Some(&br#"{"total":7}"#[..]));
    assert_eq!(record.key.as_deref(), Some(&b"customer-7"[..]));
    assert_eq!(
        record.header("content-type"),
        Some(&b"application/json"[..])
    );
}

/// Commits five [`binary_message`]s (`m-0` … `m-4`) to `topic` through
/// `producer`; `reader` gets their records (within `secs`), each byte for
/// byte, and then all five are SENT (within 30 s). Returns their keys by
/// message id.
pub(crate) async fn five_delivered_byte_for_byte(
    producer: &Producer,
    topic: &str,
    reader: &mut TopicReader,
    pool: &MySqlPool,
    secs: u64,
) -> BTreeMap<u64, String> {
    let mut sent = BTreeMap::new();
    for i in 0..5 {
        let key = format!("m-{i}");
        sent.insert(commit(producer, &binary_message(topic, &key)).await, key);
    }
    reader
        .read_until(
            std::time::Duration::from_secs(secs),
            "the five records",
            |rs| sent.keys().all(|id| rs.iter().any(|r| r.message_id == *id)),
        )
        .await;
    for r in &reader.records {
        assert_binary_record_is(r, &sent[&r.message_id], r.message_id);
    }
    eventually(30, "all five SENT", async || {
        statuses(pool, "shop")
            .await
            .values()
            .all(|(_, _, s)| s.as_deref() == Some("SENT"))
    })
    .await;
    sent
}

/// The producer's own database, with its business table `orders (id)`; a
/// test adds the SDK's tables it uses.
pub(crate) async fn shop_database() -> (TestDb, MySqlPool) {
    let db = TestDb::create().await;
    let pool = db.pool().await;
    sqlx::query("CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY) ENGINE=InnoDB")
        .execute(&pool)
        .await
        .unwrap();
    (db, pool)
}
