//! Against a real Apache Kafka broker (issue 50, item 1): the real binary,
//! MariaDB and `scripts/kafka-broker` (Kafka 4.4, KRaft, one node): a
//! broker of its own for each test that sets users, ACLs or TLS or restarts
//! it, the run's shared plain broker ([`RealKafka::shared`]) with topics
//! and groups of their own for the others. librdkafka's mock cluster stays where
//! tests inject faults; these hold trustmsg to what only a real broker
//! does: its SASL users, its ACLs, its answers.
//!
//! - The core loop: prepare → commit → a record with the key, payload and
//!   headers byte for byte and the `trustmsg-message-id`, SENT at the
//!   partition and offset the record has.
//! - SASL (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN) with a user the broker
//!   knows: a wrong password delivers nothing, the log says authentication
//!   failed and never holds the password; the right one (from an `@FILE`)
//!   delivers.
//! - ACLs: a topic the broker does not let trustmsg's user write to is
//!   SEND_FAILED after one attempt, with the broker's reason, while the
//!   allowed topic is delivered.
//! - TLS with a CA of the test's own: delivered with the broker's name
//!   checked; a certificate for another name refused (nothing sent, the log
//!   says why) until the check is turned off.
//! - `trustmsg tail` reads a topic over SASL_SSL (SCRAM inside TLS, what
//!   managed Kafkas use).
//! - The Rust SDK's `Submitter` and the Kafka way in with the broker's
//!   users and ACLs (the shop may only write to the submit topic; trustmsg
//!   reads it in its group): committed and rolled back as submitted.
//! - The Kafka way in: its consumer group applies every record across a
//!   restart of the broker, 0 lost and 0 wrong.
//!
//! Run alone: `cargo test -p trustmsg-tests --test e2e real_kafka`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;
use sqlx::MySqlPool;
use trustmsg_tests::certs::TestCa;
use trustmsg_tests::kafka::{Consumed, TopicReader};
use trustmsg_tests::real_kafka::unique;
use trustmsg_tests::submit::{assert_nothing_dead_lettered, Submission, Submitter};
use trustmsg_tests::{eventually, RealKafka, ServiceProcess, TestDb, UNREACHABLE_VERIFY_URL};

use crate::harness::{
    assert_binary_record_is, assert_the_placed_order_arrives, binary_message, commit,
    five_delivered_byte_for_byte, one_order_placed_one_failed, settings, shop, statuses, trusting,
    without_the_name_check, KafkaService,
};

const TOPIC: &str = "e2e-real-kafka";
const USER: &str = "trustmsg";
const PASSWORD: &str = "right-horse-battery-staple";
const WRONG_PASSWORD: &str = "wrong-horse-battery-staple";

/// The service with these librdkafka settings, giving a send up after the
/// message timeout here.
const SERVICE: KafkaService = KafkaService {
    send: &["--kafka-message-timeout", "5s", "--send-lease", "10s"],
};

/// What each test starts from: a database of its own, a pool on it, and
/// where the service logs, in a directory to keep as long as the test runs.
async fn fresh() -> (TestDb, MySqlPool, PathBuf, tempfile::TempDir) {
    let db = TestDb::create().await;
    let pool = db.pool().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("trustmsg.log");
    (db, pool, log, dir)
}

/// `reader` gets the record of message `id` (within 60 s), and its first
/// record is [`binary_message`] `key`'s, byte for byte.
async fn assert_delivered(reader: &mut TopicReader, key: &str, id: u64) {
    reader
        .read_until(Duration::from_secs(60), "the record", |rs| {
            rs.iter().any(|r| r.message_id == id)
        })
        .await;
    assert_binary_record_is(&reader.records[0], key, id);
}

/// `(status, send_status, send_attempts, last_error, partition, offset)`
/// of the message `key` of `shop`.
type Row = (
    String,
    Option<String>,
    u32,
    Option<String>,
    Option<i32>,
    Option<i64>,
);

/// [`Row`] as MariaDB hands it over (the enums as bytes).
type RawRow = (
    Vec<u8>,
    Option<Vec<u8>>,
    u32,
    Option<String>,
    Option<i32>,
    Option<i64>,
);

async fn row(pool: &MySqlPool, key: &str) -> Row {
    let (status, send_status, attempts, error, partition, offset): RawRow = sqlx::query_as(
        "SELECT status, send_status, send_attempts, last_error, kafka_partition, kafka_offset \
         FROM messages WHERE biz_id = 'shop' AND message_key = ?",
    )
    .bind(key)
    .fetch_one(pool)
    .await
    .unwrap();
    (
        String::from_utf8(status).unwrap(),
        send_status.map(|s| String::from_utf8(s).unwrap()),
        attempts,
        error,
        partition,
        offset,
    )
}

/// How many records `topic` holds, asked on the internal listener.
fn records_in_topic(kafka: &RealKafka, topic: &str, partitions: i32) -> i64 {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka.internal_bootstrap())
        .set("group.id", "e2e-real-kafka-watermarks")
        .create()
        .unwrap();
    (0..partitions)
        .map(|p| {
            let (low, high) = consumer
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .unwrap();
            high - low
        })
        .sum()
}

/// Once the log says `what` (`said`, within 60 s), the message `m` is still
/// COMMITTED and PENDING and [`TOPIC`] holds no record.
async fn assert_not_sent_once_logged(
    pool: &MySqlPool,
    kafka: &RealKafka,
    what: &str,
    said: impl AsyncFnMut() -> bool,
) {
    eventually(60, &format!("the log to say {what}"), said).await;
    let (status, send_status, ..) = row(pool, "m").await;
    assert_eq!(
        (status.as_str(), send_status.as_deref()),
        ("COMMITTED", Some("PENDING"))
    );
    assert_eq!(records_in_topic(kafka, TOPIC, 1), 0);
}

fn read_log(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_core_loop_delivers_to_a_real_broker_byte_for_byte() {
    let began = Instant::now();
    let kafka = RealKafka::shared();
    let topic = unique(TOPIC);
    kafka.create_topic(&topic, 3).await;
    let (db, pool, log, _dir) = fresh().await;
    let service = SERVICE.start(&db, kafka.bootstrap(), &[], &log).await;
    let producer = shop(&service).await;
    let mut reader = kafka.reader(&topic);

    let sent = five_delivered_byte_for_byte(&producer, &topic, &mut reader, &pool, 60).await;
    assert_eq!(reader.records.len(), 5, "{:?}", reader.records);
    // SENT where the broker put it: the partition and offset stored are the
    // record's own.
    for r in &reader.records {
        let (_, _, _, _, partition, offset) = row(&pool, &sent[&r.message_id]).await;
        assert_eq!((partition, offset), (Some(r.partition), Some(r.offset)));
    }
    eprintln!(
        "the_core_loop_delivers_to_a_real_broker_byte_for_byte: broker {:?}, all {:?}",
        kafka.started_in,
        began.elapsed()
    );
}

/// A broker that knows the user `trustmsg` (SCRAM-SHA-256 and -512
/// credentials and a PLAIN login) and lets it write only to `topics`; with
/// `tls`, its listener is SASL_SSL with a certificate for `localhost` from
/// that CA.
async fn sasl_broker(topics: &[&str], tls: Option<&TestCa>) -> RealKafka {
    let user = format!("{USER}:{PASSWORD}");
    let mut options = vec!["--sasl", "--user", &user];
    let certs = tls.map(|ca| {
        ca.server_cert("kafka", &["localhost"]);
        ca.dir().display().to_string()
    });
    if let Some(certs) = &certs {
        options.extend(["--tls", certs, "--host", "localhost"]);
    }
    let kafka = RealKafka::start_with(&options);
    for topic in topics {
        kafka.create_topic(topic, 1).await;
        kafka.acl(&[
            "--add",
            "--allow-principal",
            "User:trustmsg",
            "--operation",
            "Write",
            "--operation",
            "Describe",
            "--topic",
            topic,
        ]);
    }
    kafka
}

/// With `mechanism` (over TLS with `tls`, as PLAIN should be): a wrong
/// password delivers nothing and is refused by the broker, saying so in the
/// log without the password; the right one, read from a file, delivers the
/// same message byte for byte.
async fn sasl_refuses_a_wrong_password_and_delivers_with_the_right_one(mechanism: &str, tls: bool) {
    let began = Instant::now();
    let ca = tls.then(TestCa::new);
    let kafka = sasl_broker(&[TOPIC], ca.as_ref()).await;
    let (db, pool, log, dir) = fresh().await;
    let ca_file = ca.as_ref().map(|ca| ca.ca_file().display().to_string());
    let mut sasl = vec![
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", mechanism),
        ("sasl.username", USER),
    ];
    if let Some(ca_file) = &ca_file {
        sasl[0].1 = "SASL_SSL";
        sasl.push(("ssl.ca.location", ca_file));
    }

    let wrong = [&sasl[..], &[("sasl.password", WRONG_PASSWORD)]].concat();
    let mut refused = SERVICE.start(&db, kafka.bootstrap(), &wrong, &log).await;
    let producer = shop(&refused).await;
    let id = commit(&producer, &binary_message(TOPIC, "m")).await;
    assert_not_sent_once_logged(&pool, &kafka, "authentication failed", async || {
        let log = read_log(&log);
        log.contains("SASL authentication error") && log.contains("Authentication failed")
    })
    .await;
    refused.terminate();
    let logged = read_log(&log);
    assert!(
        !logged.contains(WRONG_PASSWORD) && !logged.contains("horse"),
        "the password is in the log:\n{logged}"
    );

    let properties = dir.path().join("kafka.properties");
    std::fs::write(&properties, format!("sasl.password={PASSWORD}\n")).unwrap();
    let properties = properties.display().to_string();
    let right = [&sasl[..], &[("@", properties.as_str())]].concat();
    let _service = SERVICE.start(&db, kafka.bootstrap(), &right, &log).await;
    let mut reader = kafka.reader(TOPIC);
    assert_delivered(&mut reader, "m", id).await;
    assert_eq!(reader.records.len(), 1, "{:?}", reader.records);
    eventually(30, "SENT", async || {
        row(&pool, "m").await.1.as_deref() == Some("SENT")
    })
    .await;
    let logged = read_log(&log);
    assert!(
        !logged.contains(PASSWORD) && !logged.contains("horse"),
        "a password is in the log:\n{logged}"
    );
    eprintln!(
        "sasl {mechanism}: broker {:?}, all {:?}",
        kafka.started_in,
        began.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_sha_256_refuses_a_wrong_password_and_delivers_with_the_right_one() {
    sasl_refuses_a_wrong_password_and_delivers_with_the_right_one("SCRAM-SHA-256", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_sha_512_refuses_a_wrong_password_and_delivers_with_the_right_one() {
    sasl_refuses_a_wrong_password_and_delivers_with_the_right_one("SCRAM-SHA-512", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_plain_over_tls_refuses_a_wrong_password_and_delivers_with_the_right_one() {
    sasl_refuses_a_wrong_password_and_delivers_with_the_right_one("PLAIN", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_the_brokers_acls_refuse_is_send_failed_with_its_reason_after_one_attempt() {
    let began = Instant::now();
    const REFUSED: &str = "e2e-real-kafka-refused";
    // Both topics exist; the broker lets trustmsg's user write to one only.
    let kafka = sasl_broker(&[TOPIC], None).await;
    kafka.create_topic(REFUSED, 1).await;
    let (db, pool, log, _dir) = fresh().await;
    let sasl = [
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "SCRAM-SHA-512"),
        ("sasl.username", USER),
        ("sasl.password", PASSWORD),
    ];
    let service = SERVICE.start(&db, kafka.bootstrap(), &sasl, &log).await;
    let producer = shop(&service).await;
    let mut reader = kafka.reader(TOPIC);

    let refused = commit(&producer, &binary_message(REFUSED, "refused")).await;
    let allowed = commit(&producer, &binary_message(TOPIC, "allowed")).await;
    reader
        .read_until(Duration::from_secs(60), "the allowed record", |rs| {
            rs.iter().any(|r| r.message_id == allowed)
        })
        .await;
    assert_binary_record_is(&reader.records[0], "allowed", allowed);
    eventually(60, "the refused message SEND_FAILED", async || {
        row(&pool, "refused").await.1.as_deref() == Some("SEND_FAILED")
    })
    .await;
    let (status, _, attempts, error, ..) = row(&pool, "refused").await;
    assert_eq!(status, "COMMITTED");
    // Permanent at the first answer: not retried until the attempt limit.
    assert_eq!(attempts, 1, "refused message {refused}: {error:?}");
    let error = error.unwrap_or_default();
    assert!(
        error.contains("TopicAuthorizationFailed") || error.contains("authorization"),
        "the broker's reason is not in the last error: {error}"
    );
    // Still refused a while later: SEND_FAILED is where it stays (only an
    // operator's redeliver moves it), and the broker holds nothing of it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(row(&pool, "refused").await.2, 1);
    assert_eq!(records_in_topic(&kafka, REFUSED, 1), 0);
    assert_eq!(row(&pool, "allowed").await.1.as_deref(), Some("SENT"));
    eprintln!(
        "acls: broker {:?}, all {:?}; the refused message's last error: {error}",
        kafka.started_in,
        began.elapsed()
    );
}

/// The Kafka way in's topics of a test: records submitted to `submit`,
/// dead letters in `dlq` (trustmsg's name for them), messages to `orders`.
struct WayIn {
    submit: String,
    dlq: String,
    orders: String,
}

impl WayIn {
    /// The topics named after `base`.
    fn named(base: &str) -> Self {
        Self {
            submit: format!("{base}.submit"),
            dlq: format!("{base}.submit.dlq"),
            orders: format!("{base}-orders"),
        }
    }

    /// Creates them on `kafka`: `submit` with 3 partitions, `orders` with
    /// `orders_partitions`.
    async fn create(&self, kafka: &RealKafka, orders_partitions: i32) {
        kafka.create_topic(&self.submit, 3).await;
        kafka.create_topic(&self.dlq, 1).await;
        kafka.create_topic(&self.orders, orders_partitions).await;
    }

    /// Prepares and commits `order-{from}` … `order-{to-1}` through the
    /// Kafka way in, each keyed `customer-{i % 3}` with its own payload.
    async fn submit_orders(&self, producer: &Submitter, range: std::ops::Range<usize>) {
        for i in range {
            let key = format!("order-{i}");
            let value = format!("{{\"order\":{i}}}");
            producer
                .prepare(
                    &key,
                    Submission {
                        topic: &self.orders,
                        key: Some(&format!("customer-{}", i % 3)),
                        headers: &[("content-type", "application/json")],
                        value: value.as_bytes(),
                        partition: None,
                    },
                )
                .await;
            producer.commit(&key).await;
        }
    }

    /// Registers `shop` for `orders` (checked back nowhere) with `service`;
    /// its submitter through the internal listener.
    async fn shop(&self, service: &ServiceProcess, kafka: &RealKafka) -> Submitter {
        let mut registration = settings(UNREACHABLE_VERIFY_URL, 3_600_000, 3);
        registration["topics"] = serde_json::json!([self.orders]);
        let (_, secret) = service.register("shop", registration).await;
        Submitter::new(kafka.internal_bootstrap(), &self.submit, "shop", &secret)
    }

    /// Waits until all `n` orders are COMMITTED and SENT; then every one's
    /// record is in `orders` as submitted (0 lost, 0 wrong; duplicates, at
    /// least once, are allowed and checked too) and nothing was
    /// dead-lettered. Returns the records.
    async fn assert_every_order_delivered(
        &self,
        kafka: &RealKafka,
        pool: &MySqlPool,
        producer: &Submitter,
        n: usize,
    ) -> Vec<Consumed> {
        eventually(120, "every order COMMITTED and SENT", async || {
            let rows = statuses(pool, "shop").await;
            rows.len() == n
                && rows
                    .values()
                    .all(|(_, s, ss)| s == "COMMITTED" && ss.as_deref() == Some("SENT"))
        })
        .await;
        let rows = statuses(pool, "shop").await;
        let mut orders = kafka.reader(&self.orders);
        orders
            .read_until(Duration::from_secs(60), "every order's record", |rs| {
                rows.values()
                    .all(|(id, _, _)| rs.iter().any(|r| r.message_id == *id))
            })
            .await;
        for r in orders.poll() {
            let (key, _) = rows
                .iter()
                .find(|(_, (id, _, _))| *id == r.message_id)
                .unwrap_or_else(|| panic!("a record of no stored message: {r:?}"));
            let i: usize = key.trim_start_matches("order-").parse().unwrap();
            assert_eq!(
                r.key.as_deref(),
                Some(format!("customer-{}", i % 3).as_bytes())
            );
            assert_eq!(
                r.payload.as_deref(),
                Some(format!("{{\"order\":{i}}}").as_bytes())
            );
        }
        assert_nothing_dead_lettered(kafka.internal_bootstrap(), producer, 3, &self.dlq).await;
        std::mem::take(&mut orders.records)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kafka_way_ins_group_applies_every_record_across_a_broker_restart() {
    let began = Instant::now();
    const N: usize = 40;
    let kafka = RealKafka::start();
    let way_in = WayIn::named("e2e-real-kafka");
    way_in.create(&kafka, 2).await;
    let (db, pool, log, _dir) = fresh().await;
    let mut extra = vec!["--submit-topic", &way_in.submit];
    extra.extend_from_slice(&[
        "--kafka-message-timeout",
        "10s",
        "--send-lease",
        "15s",
        "--sweep-interval",
        "200ms",
    ]);
    let service =
        ServiceProcess::start_logged(&db.url, kafka.bootstrap(), &extra, Some(log.clone())).await;
    let producer = way_in.shop(&service, &kafka).await;

    // Half before the restart, applied (so the group has joined and
    // committed offsets) and being forwarded when the broker goes down; the
    // other half once it is back.
    way_in.submit_orders(&producer, 0..N / 2).await;
    eventually(60, "the first half COMMITTED", async || {
        let rows = statuses(&pool, "shop").await;
        rows.len() == N / 2 && rows.values().all(|(_, s, _)| s == "COMMITTED")
    })
    .await;
    kafka.stop();
    let sent_before = statuses(&pool, "shop")
        .await
        .values()
        .filter(|(_, _, ss)| ss.as_deref() == Some("SENT"))
        .count();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let restarted_in = kafka.restart();
    way_in.submit_orders(&producer, N / 2..N).await;

    let records = way_in
        .assert_every_order_delivered(&kafka, &pool, &producer, N)
        .await;
    for r in &records {
        assert_eq!(r.header("content-type"), Some(&b"application/json"[..]));
    }
    let duplicates = records.len() - N;
    eprintln!(
        "kafka way in across a broker restart: broker {:?}, restarted in {restarted_in:?}, \
         {sent_before} of {N} SENT before the stop, {duplicates} duplicate record(s), \
         all {:?}",
        kafka.started_in,
        began.elapsed()
    );
}

/// A broker whose only client listener is TLS, with a certificate for
/// `names` from `ca`, advertised as `localhost`.
async fn tls_broker(ca: &TestCa, names: &[&str]) -> RealKafka {
    ca.server_cert("kafka", names);
    let certs = ca.dir().display().to_string();
    let kafka = RealKafka::start_with(&["--tls", &certs, "--host", "localhost"]);
    kafka.create_topic(TOPIC, 1).await;
    kafka
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_the_tests_own_ca_delivers_and_checks_the_brokers_name() {
    let began = Instant::now();
    let ca = TestCa::new();
    let ca_file = ca.ca_file().display().to_string();
    let tls = trusting(&ca_file);
    let (db, pool, log, _dir) = fresh().await;

    // A certificate for `localhost`, the name advertised: delivered, with
    // the name checked (librdkafka 2.x's default).
    let kafka = tls_broker(&ca, &["localhost"]).await;
    let service = SERVICE.start(&db, kafka.bootstrap(), &tls, &log).await;
    let producer = shop(&service).await;
    let mut reader = kafka.reader(TOPIC);
    let id = commit(&producer, &binary_message(TOPIC, "m")).await;
    assert_delivered(&mut reader, "m", id).await;
    eventually(30, "SENT", async || {
        row(&pool, "m").await.1.as_deref() == Some("SENT")
    })
    .await;
    eprintln!(
        "tls: broker {:?}, all {:?}",
        kafka.started_in,
        began.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_refuses_a_broker_certificate_for_another_name_unless_the_check_is_off() {
    let began = Instant::now();
    let ca = TestCa::new();
    let ca_file = ca.ca_file().display().to_string();
    let tls = trusting(&ca_file);
    let (db, pool, log, _dir) = fresh().await;
    let kafka = tls_broker(&ca, &["wrong.example"]).await;

    let mut first = SERVICE.start(&db, kafka.bootstrap(), &tls, &log).await;
    let producer = shop(&first).await;
    let id = commit(&producer, &binary_message(TOPIC, "m")).await;
    assert_not_sent_once_logged(&pool, &kafka, "the certificate was refused", async || {
        read_log(&log).contains("certificate verify failed")
    })
    .await;
    first.terminate();

    // The same certificate is otherwise good: with the name check off
    // (what nobody should do) the message goes through, so the refusal
    // above was the name's.
    let unchecked = without_the_name_check(&tls);
    let _second = SERVICE
        .start(&db, kafka.bootstrap(), &unchecked, &log)
        .await;
    let mut reader = kafka.reader(TOPIC);
    assert_delivered(&mut reader, "m", id).await;
    eprintln!(
        "tls name check: broker {:?}, all {:?}",
        kafka.started_in,
        began.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_reads_a_real_broker_over_sasl_ssl() {
    let began = Instant::now();
    let ca = TestCa::new();
    ca.server_cert("kafka", &["localhost"]);
    let certs = ca.dir().display().to_string();
    let user = format!("{USER}:{PASSWORD}");
    let kafka = RealKafka::start_with(&[
        "--sasl",
        "--user",
        &user,
        "--tls",
        &certs,
        "--host",
        "localhost",
    ]);
    kafka.create_topic("t", 1).await;
    kafka.acl(&[
        "--add",
        "--allow-principal",
        "User:trustmsg",
        "--operation",
        "Read",
        "--operation",
        "Describe",
        "--topic",
        "t",
        "--group",
        "*",
    ]);
    let producer: rdkafka::producer::FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", kafka.internal_bootstrap())
        .create()
        .unwrap();
    producer
        .send(
            rdkafka::producer::FutureRecord::to("t")
                .key("k")
                .payload("over SASL_SSL"),
            Duration::from_secs(30),
        )
        .await
        .map_err(|(e, _)| e)
        .unwrap();

    let ca_file = ca.ca_file().display().to_string();
    let out = tokio::process::Command::new(trustmsg_tests::process::binary())
        .args(["tail", "--brokers", kafka.bootstrap(), "--topic", "t"])
        .args(["--from-beginning", "--count", "1", "--json"])
        .args(["--kafka-config", "security.protocol=SASL_SSL"])
        .args(["--kafka-config", &format!("ssl.ca.location={ca_file}")])
        .args(["--kafka-config", "sasl.mechanism=SCRAM-SHA-256"])
        .args(["--kafka-config", &format!("sasl.username={USER}")])
        .args(["--kafka-config", &format!("sasl.password={PASSWORD}")])
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .expect("tail ends within 60 s")
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    line.as_object_mut().unwrap().remove("timestamp_ms");
    assert_eq!(
        line,
        serde_json::json!({"topic": "t", "partition": 0, "offset": 0, "key": "k",
                           "headers": [], "payload": "over SASL_SSL"})
    );
    eprintln!(
        "tail over SASL_SSL: broker {:?}, all {:?}",
        kafka.started_in,
        began.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdks_submitter_and_the_way_in_work_with_the_brokers_users_and_acls() {
    use trustmsg_client::submit::Submitter as SdkSubmitter;

    let began = Instant::now();
    const SHOP_PASSWORD: &str = "shop-battery-staple";
    let trustmsg_user = format!("{USER}:{PASSWORD}");
    let shop_user = format!("shop:{SHOP_PASSWORD}");
    let kafka = RealKafka::start_with(&["--sasl", "--user", &trustmsg_user, "--user", &shop_user]);
    let way_in = WayIn::named("e2e-real-kafka");
    way_in.create(&kafka, 1).await;
    let WayIn {
        submit,
        dlq,
        orders,
    } = &way_in;
    // trustmsg reads the submit topic in its group and writes letters and
    // orders; the shop may only write to the submit topic.
    kafka.acl(&[
        "--add",
        "--allow-principal",
        "User:trustmsg",
        "--operation",
        "Read",
        "--operation",
        "Write",
        "--operation",
        "Describe",
        "--topic",
        submit,
        "--topic",
        dlq,
        "--topic",
        orders,
    ]);
    kafka.acl(&[
        "--add",
        "--allow-principal",
        "User:trustmsg",
        "--operation",
        "Read",
        "--group",
        "trustmsg",
    ]);
    kafka.acl(&[
        "--add",
        "--allow-principal",
        "User:shop",
        "--operation",
        "Write",
        "--operation",
        "Describe",
        "--topic",
        submit,
    ]);
    let (db, pool, log, _dir) = fresh().await;
    let mut extra = vec!["--submit-topic", submit];
    for setting in [
        "security.protocol=SASL_PLAINTEXT",
        "sasl.mechanism=SCRAM-SHA-512",
        "sasl.username=trustmsg",
    ] {
        extra.extend_from_slice(&["--kafka-config", setting]);
    }
    let password = format!("sasl.password={PASSWORD}");
    extra.extend_from_slice(&["--kafka-config", &password, "--sweep-interval", "200ms"]);
    let service =
        ServiceProcess::start_logged(&db.url, kafka.bootstrap(), &extra, Some(log.clone())).await;
    let mut registration = settings(UNREACHABLE_VERIFY_URL, 3_600_000, 3);
    registration["topics"] = serde_json::json!([orders]);
    let (_, secret) = service.register("shop", registration).await;
    let sdk = SdkSubmitter::new(
        kafka.bootstrap(),
        &[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "SCRAM-SHA-256"),
            ("sasl.username", "shop"),
            ("sasl.password", SHOP_PASSWORD),
        ],
        submit,
        "shop",
        secret.clone(),
    )
    .unwrap();

    one_order_placed_one_failed(&sdk, orders, None).await;

    let mut orders = kafka.reader(orders);
    assert_the_placed_order_arrives(&mut orders, 60).await;
    eventually(60, "the rollback applied and the commit SENT", async || {
        let rows = statuses(&pool, "shop").await;
        rows.get("sdk-failed").map(|r| r.1.as_str()) == Some("ROLLED_BACK")
            && rows.get("sdk-ok").and_then(|r| r.2.as_deref()) == Some("SENT")
    })
    .await;
    let checker = Submitter::new(kafka.internal_bootstrap(), submit, "shop", &secret);
    assert_nothing_dead_lettered(kafka.internal_bootstrap(), &checker, 3, dlq).await;
    assert_eq!(orders.poll().len(), 1, "only the committed message");
    eprintln!(
        "sdk submitter with users and acls: broker {:?}, all {:?}",
        kafka.started_in,
        began.elapsed()
    );
}

/// The Kafka way in's consumer group through two rebalances on a real
/// broker: a second instance joins the group mid-stream (the partitions are
/// shared out again), then the first is killed with -9 (its partitions go
/// to the survivor once the broker's session timeout has passed). Every
/// submitted record is applied and every message reaches its topic as
/// submitted: 0 lost, 0 wrong; nothing dead-lettered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kafka_way_ins_group_applies_every_record_through_a_rebalance_and_a_kill() {
    const N: usize = 60;
    let kafka = RealKafka::shared();
    let way_in = WayIn::named(&unique("e2e-real-kafka-rebalance"));
    way_in.create(&kafka, 2).await;
    let group = unique("trustmsg-rebalance");
    let db = TestDb::create().await;
    let pool = db.pool().await;
    let dir = tempfile::tempdir().unwrap();
    let extra = [
        "--submit-topic",
        &way_in.submit,
        "--submit-group",
        &group,
        "--kafka-message-timeout",
        "10s",
        "--send-lease",
        "15s",
        "--sweep-interval",
        "200ms",
        // A dead member's partitions move after this (the broker's
        // minimum), not librdkafka's default 45 s.
        "--kafka-config",
        "session.timeout.ms=6000",
        "--kafka-config",
        "heartbeat.interval.ms=1000",
    ];
    let mut first = ServiceProcess::start_logged(
        &db.url,
        kafka.bootstrap(),
        &extra,
        Some(dir.path().join("first.log")),
    )
    .await;
    let producer = way_in.shop(&first, &kafka).await;
    let committed = async |n: usize| {
        let rows = statuses(&pool, "shop").await;
        rows.len() == n && rows.values().all(|(_, s, _)| s == "COMMITTED")
    };

    way_in.submit_orders(&producer, 0..N / 3).await;
    eventually(60, "the first third COMMITTED", async || {
        committed(N / 3).await
    })
    .await;
    // A second member joins: the group rebalances while records come.
    let second = ServiceProcess::start_logged(
        &db.url,
        kafka.bootstrap(),
        &extra,
        Some(dir.path().join("second.log")),
    )
    .await;
    way_in.submit_orders(&producer, N / 3..2 * N / 3).await;
    eventually(90, "the second third COMMITTED", async || {
        committed(2 * N / 3).await
    })
    .await;
    // The first dies without leaving the group: its partitions wait out
    // the session timeout, then the survivor takes them and what is
    // uncommitted in them is read again (applied once: a repeat is
    // recognised by key and content).
    first.kill_9();
    way_in.submit_orders(&producer, 2 * N / 3..N).await;
    way_in
        .assert_every_order_delivered(&kafka, &pool, &producer, N)
        .await;
    // The survivor took the killed member's partitions: every record
    // submitted after the kill (a prepare and a commit per order) was
    // applied by it.
    let applied = second.metrics().await.sum("trustmsg_submit_records_total");
    assert!(
        applied >= (2 * (N - 2 * N / 3)) as f64,
        "the second instance applied {applied} records"
    );
    drop(second);
}
