//! Kafka over TLS (issue 27, item 1), against the real binary: a
//! broker reachable only through a TLS listener (socat, OpenSSL) with a
//! certificate from the test's own CA, advertised as `localhost`.
//!
//! - With the CA trusted, committed messages reach the topic byte for byte,
//!   read back by a consumer that also goes through TLS.
//! - With another CA, or a certificate for another name, nothing is sent: the
//!   message stays COMMITTED/PENDING and the log says why.
//! - `trustmsg tail` reads over TLS.
//!
//! SASL (PLAIN over SASL_SSL, SCRAM-SHA-256 and -512) is tested against a
//! real Apache Kafka with broker-side users, in `real_kafka`; the SASL front
//! of our own that these tests used before is retired.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;
use serde_json::{json, Value};
use sqlx::MySqlPool;
use trustmsg_client::Message;
use trustmsg_tests::certs::TestCa;
use trustmsg_tests::kafka_tls::TlsKafka;
use trustmsg_tests::process::binary;
use trustmsg_tests::{eventually, ServiceProcess, TestDb};

use crate::harness::{
    binary_message, commit, five_delivered_byte_for_byte, shop, statuses, trusting,
    without_the_name_check, KafkaService,
};

const TOPIC: &str = "e2e-kafka-tls";

/// The service with these librdkafka settings, giving a send up after the
/// message timeout here.
const SERVICE: KafkaService = KafkaService {
    send: &["--kafka-message-timeout", "3s", "--send-lease", "8s"],
};

fn message(key: &str) -> Message {
    binary_message(TOPIC, key)
}

/// How many records partitions 0..3 of the topic hold, asked with these
/// client settings (over TLS, trusting the right CA).
fn records_in_topic(bootstrap: &str, client: &[(&str, &str)]) -> i64 {
    try_records_in_topic(bootstrap, client).unwrap()
}

fn try_records_in_topic(
    bootstrap: &str,
    client: &[(&str, &str)],
) -> rdkafka::error::KafkaResult<i64> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "e2e-kafka-tls-watermarks");
    for (k, v) in client {
        config.set(*k, *v);
    }
    let consumer: BaseConsumer = config.create().unwrap();
    (0..3)
        .map(|p| {
            let (low, high) = consumer.fetch_watermarks(TOPIC, p, Duration::from_secs(5))?;
            Ok(high - low)
        })
        .sum()
}

fn log_file(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("trustmsg.log")
}

fn read_log(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

/// The message committed under `key` is still COMMITTED and PENDING, with
/// no send attempt counted (the cluster was never reached).
async fn still_pending(pool: &MySqlPool, key: &str) {
    let rows = statuses(pool, "shop").await;
    let (_, status, send_status) = &rows[key];
    assert_eq!(
        (status.as_str(), send_status.as_deref()),
        ("COMMITTED", Some("PENDING"))
    );
    let (attempts,): (u32,) = sqlx::query_as(
        "SELECT send_attempts FROM messages WHERE biz_id = 'shop' AND message_key = ?",
    )
    .bind(key)
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(attempts, 0);
}

/// The service with these TLS settings, and a message `refused` it
/// committed: the log says the broker's certificate was refused and the
/// message is still pending, never sent.
async fn refused_for_its_certificate(
    db: &TestDb,
    kafka: &TlsKafka,
    tls: &[(&str, &str)],
    log: &Path,
) -> ServiceProcess {
    let service = SERVICE.start(db, &kafka.bootstrap(), tls, log).await;
    let producer = shop(&service).await;
    commit(&producer, &message("refused")).await;
    eventually(
        30,
        "the log to say the certificate was refused",
        async || read_log(log).contains("certificate verify failed"),
    )
    .await;
    still_pending(&db.pool().await, "refused").await;
    service
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_reach_a_tls_only_broker_byte_for_byte_with_its_ca_verified() {
    let ca = TestCa::new();
    let kafka = TlsKafka::start(&ca.server_cert("kafka", &["localhost"]));
    kafka.mock.create_topic(TOPIC, 3);
    let ca_file = ca.ca_file().display().to_string();
    let tls = trusting(&ca_file);
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().unwrap();
    let service = SERVICE
        .start(&db, &kafka.bootstrap(), &tls, &log_file(&dir))
        .await;
    let producer = shop(&service).await;
    let mut reader = kafka.reader(TOPIC, &tls);

    let pool = db.pool().await;
    five_delivered_byte_for_byte(&producer, TOPIC, &mut reader, &pool, 30).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_certificate_from_a_ca_the_service_does_not_trust_gets_nothing() {
    let ca = TestCa::new();
    let kafka = TlsKafka::start(&ca.server_cert("kafka", &["localhost"]));
    kafka.mock.create_topic(TOPIC, 3);
    let other_ca = TestCa::new();
    let other = other_ca.ca_file().display().to_string();
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().unwrap();
    let log = log_file(&dir);
    let untrusting = trusting(&other);
    let _service = refused_for_its_certificate(&db, &kafka, &untrusting, &log).await;
    let ca_file = ca.ca_file().display().to_string();
    let trusting = trusting(&ca_file);
    assert_eq!(records_in_topic(&kafka.bootstrap(), &trusting), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_certificate_for_another_name_is_refused_by_default() {
    let ca = TestCa::new();
    let kafka = TlsKafka::start(&ca.server_cert("wrong", &["wrong.example"]));
    kafka.mock.create_topic(TOPIC, 3);
    let ca_file = ca.ca_file().display().to_string();
    let db = TestDb::create().await;
    let pool = db.pool().await;
    let dir = tempfile::tempdir().unwrap();
    let log = log_file(&dir);
    // librdkafka 2.x checks the name (ssl.endpoint.identification.algorithm
    // defaults to https): nothing set here but the CA.
    let tls = trusting(&ca_file);
    let mut first = refused_for_its_certificate(&db, &kafka, &tls, &log).await;
    first.terminate();

    // The same certificate is otherwise good: with the name check turned off
    // (what nobody should do) the message goes through, so the refusal above
    // was the name's.
    let unchecked = without_the_name_check(&tls);
    let _second = SERVICE
        .start(&db, &kafka.bootstrap(), &unchecked, &log)
        .await;
    eventually(30, "SENT once the name is not checked", async || {
        statuses(&pool, "shop").await["refused"].2.as_deref() == Some("SENT")
    })
    .await;
    assert_eq!(records_in_topic(&kafka.bootstrap(), &unchecked), 1);
}

#[test]
fn tail_reads_a_tls_only_broker() {
    let ca = TestCa::new();
    let kafka = TlsKafka::start(&ca.server_cert("kafka", &["localhost"]));
    kafka.mock.create_topic("t", 1);
    let ca_file = ca.ca_file().display().to_string();
    let producer: rdkafka::producer::BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", kafka.bootstrap())
        .set("security.protocol", "SSL")
        .set("ssl.ca.location", &ca_file)
        .create()
        .unwrap();
    producer
        .send(
            rdkafka::producer::BaseRecord::to("t")
                .key("k")
                .payload("over TLS"),
        )
        .unwrap();
    rdkafka::producer::Producer::flush(&producer, Duration::from_secs(10)).unwrap();

    let out = Command::new(binary())
        .args(["tail", "--brokers", &kafka.bootstrap(), "--topic", "t"])
        .args(["--from-beginning", "--count", "1", "--json"])
        .args(["--kafka-config", "security.protocol=SSL"])
        .args(["--kafka-config", &format!("ssl.ca.location={ca_file}")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut line: Value = serde_json::from_slice(&out.stdout).unwrap();
    line.as_object_mut().unwrap().remove("timestamp_ms");
    assert_eq!(
        line,
        json!({"topic": "t", "partition": 0, "offset": 0, "key": "k",
               "headers": [], "payload": "over TLS"})
    );
}
