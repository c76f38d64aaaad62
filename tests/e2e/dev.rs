//! `trustmsg dev` as a newcomer runs it: the real binary in an empty
//! directory, no database server and no Kafka, driven through what its banner
//! prints (API address, Kafka bootstrap, demo token, the demo outbox and the
//! statement that fills it) and the credentials file.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use sqlx::SqlitePool;
use trustmsg_client::{outbox, Error, Message, MessageStatus, Producer};
use trustmsg_tests::kafka::{Consumed, TopicReader};
use trustmsg_tests::process::{binary, free_port};
use trustmsg_tests::real_kafka::{unique, RealKafka};
use trustmsg_tests::submit::{Submission, Submitter};
use trustmsg_tests::{CheckServer, Reply};

/// A `trustmsg dev` child process; killed when dropped.
struct Dev {
    child: Child,
    /// The banner's `label value` lines, by label.
    banner: HashMap<String, String>,
    /// What it prints after the banner's table.
    lines: mpsc::Receiver<String>,
}

impl Dev {
    /// Starts `trustmsg dev` in `dir` with `args` and reads its banner.
    fn start(dir: &Path, args: &[String]) -> Self {
        let mut child = Command::new(binary())
            .arg("dev")
            .args(args)
            .current_dir(dir)
            .env("TRUSTMSG_LOG", "warn")
            .env_remove("TRUSTMSG_DATABASE_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn trustmsg dev");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                println!("dev| {line}");
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut banner = HashMap::new();
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(60))
                .expect("trustmsg dev printed its banner within 60 s");
            if line.starts_with("Try it") {
                break;
            }
            // "  label   value …": the label is one or two words, then 2+ spaces.
            if let Some((label, value)) = line.trim_start().split_once("  ") {
                banner.insert(label.trim().to_string(), value.trim().to_string());
            }
        }
        Self {
            child,
            banner,
            lines: rx,
        }
    }

    /// The first line printed after the banner's table that contains `needle`.
    fn line_containing(&self, needle: &str) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("no line with {needle:?} after the banner's table"));
            if line.contains(needle) {
                return line;
            }
        }
    }

    /// The first word printed after `label`.
    fn printed(&self, label: &str) -> String {
        let line = self
            .banner
            .get(label)
            .unwrap_or_else(|| panic!("no {label:?} in the banner: {:?}", self.banner));
        line.split_whitespace().next().unwrap().to_string()
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `KEY` from the `export KEY='value'` lines of the credentials file.
fn exported(env_file: &Path, key: &str) -> String {
    let text = std::fs::read_to_string(env_file).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("export {key}=")))
        .unwrap_or_else(|| panic!("{key} in {text}"))
        .trim_matches('\'')
        .to_string()
}

/// Among `records` is `order-1`'s, message `id`, as the tests prepare it:
/// keyed `42`, its payload `{"total":42}`.
fn assert_first_order(records: &[Consumed], id: u64) {
    let record = records.iter().find(|r| r.message_id == id).unwrap();
    assert_eq!(record.payload.as_deref(), Some(&br#"{"total":42}"#[..]));
    assert_eq!(record.key.as_deref(), Some(&b"42"[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_mode_in_an_empty_directory_runs_the_whole_loop_with_check_back() {
    let dir = tempfile::tempdir().unwrap();
    let check = CheckServer::start().await;
    let (api_port, kafka_port) = (free_port(), free_port());
    let dev = Dev::start(
        dir.path(),
        &[
            format!("--listen=127.0.0.1:{api_port}"),
            format!("--kafka-listen=127.0.0.1:{kafka_port}"),
            format!("--demo-verify-url={}", check.url()),
        ],
    );

    let api = dev.printed("API");
    let brokers = dev.printed("Kafka");
    assert_eq!(api, format!("http://127.0.0.1:{api_port}"));
    assert_eq!(
        brokers,
        format!("127.0.0.1:{kafka_port}"),
        "the fixed address"
    );
    let producer_line = &dev.banner["producer"];
    let words: Vec<&str> = producer_line.split_whitespace().collect();
    assert_eq!(words[0], "order-service", "{producer_line}");
    assert_eq!(words[1], "token", "{producer_line}");
    let token = words[2].to_string();
    let env_file = dir.path().join("trustmsg-dev/env");
    assert_eq!(exported(&env_file, "TRUSTMSG_DEMO_TOKEN"), token);
    check.set_secret(&exported(&env_file, "TRUSTMSG_DEMO_SIGNING_SECRET"));
    assert!(dir.path().join("trustmsg-dev/trustmsg.db").exists());

    // The console and the admin API, with the printed admin token.
    let http = trustmsg_tests::http_client();
    let console = http.get(format!("{api}/console")).send().await.unwrap();
    assert_eq!(console.status(), 200);
    let admin = dev.printed("admin token");
    assert_eq!(exported(&env_file, "TRUSTMSG_ADMIN_TOKEN"), admin);
    let producers: serde_json::Value = http
        .get(format!("{api}/v1/producers"))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        producers.to_string().contains(&check.url()),
        "the demo producer calls the local check endpoint: {producers}"
    );

    // prepare → commit → the record, from the printed bootstrap address.
    let producer = Producer::new(&api, "order-service", token).unwrap();
    let committed = producer
        .prepare(&Message::new("order-1", "orders", r#"{"total":42}"#).key("42"))
        .await
        .unwrap();
    producer.commit("order-1").await.unwrap();
    let mut reader = TopicReader::new(&brokers, "orders");
    reader
        .read_until(Duration::from_secs(30), "the committed record", |r| {
            r.iter().any(|r| r.message_id == committed.id)
        })
        .await;
    assert_first_order(&reader.records, committed.id);

    // A prepare nobody decides is checked back at the demo producer's local
    // endpoint (first after 5 s in dev mode), which says commit.
    check.script("order-2", Reply::Decide("commit"));
    let hanging = producer
        .prepare(&Message::new("order-2", "orders", "left hanging"))
        .await
        .unwrap();
    reader
        .read_until(
            Duration::from_secs(40),
            "the record decided by check-back",
            |r| r.iter().any(|r| r.message_id == hanging.id),
        )
        .await;
    assert!(check.calls("order-2") >= 1);
    assert_eq!(check.bad_signatures(), 0, "signed with the printed secret");
    assert_eq!(reader.id_counts()[&committed.id], 1);

    // The Kafka way in, as the banner and the credentials file name it.
    let topic = dev.printed("Kafka way in");
    assert_eq!(topic, "trustmsg.submit");
    assert_eq!(exported(&env_file, "TRUSTMSG_SUBMIT_TOPIC"), topic);
    let kafka_producer = Submitter::new(
        &brokers,
        &topic,
        "order-service",
        &exported(&env_file, "TRUSTMSG_DEMO_SIGNING_SECRET"),
    );
    kafka_producer
        .prepare(
            "order-3",
            Submission {
                topic: "orders",
                key: Some("43"),
                value: br#"{"total":43}"#,
                ..Default::default()
            },
        )
        .await;
    kafka_producer.commit("order-3").await;
    reader
        .read_until(
            Duration::from_secs(30),
            "the record submitted through Kafka",
            |r| {
                r.iter()
                    .any(|r| r.payload.as_deref() == Some(&br#"{"total":43}"#[..]))
            },
        )
        .await;
    let submitted = producer.get("order-3").await.unwrap();
    assert_eq!(submitted.status, MessageStatus::Committed);
    drop(dev);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_the_messages_and_tokens_and_reset_starts_clean() {
    let dir = tempfile::tempdir().unwrap();
    let ports = [
        format!("--listen=127.0.0.1:{}", free_port()),
        format!("--kafka-listen=127.0.0.1:{}", free_port()),
    ];
    let first = Dev::start(dir.path(), &ports);
    let api = first.printed("API");
    let admin = first.printed("admin token");
    let demo = first.banner["producer"].clone();
    let token = demo.split_whitespace().nth(2).unwrap().to_string();
    let env_file = dir.path().join("trustmsg-dev/env");
    let secret = exported(&env_file, "TRUSTMSG_DEMO_SIGNING_SECRET");
    assert!(secret.starts_with("whsec_"), "{secret}");
    let producer = Producer::new(&api, "order-service", token.clone()).unwrap();
    producer
        .prepare(&Message::new("kept", "orders", "p"))
        .await
        .unwrap();
    drop(first);

    let second = Dev::start(dir.path(), &ports);
    assert_eq!(second.printed("admin token"), admin);
    assert_eq!(second.banner["producer"], demo, "same demo token");
    // The update of the demo producer does not show its secret: dev asks for it.
    assert_eq!(
        exported(&env_file, "TRUSTMSG_DEMO_SIGNING_SECRET"),
        secret,
        "same signing secret"
    );
    let producer = Producer::new(&api, "order-service", token.clone()).unwrap();
    let view = producer.commit("kept").await.unwrap();
    assert_eq!(view.status, MessageStatus::Committed);
    drop(second);

    let mut args = ports.to_vec();
    args.push("--reset".into());
    let third = Dev::start(dir.path(), &args);
    assert_ne!(third.printed("admin token"), admin);
    assert_ne!(third.banner["producer"], demo);
    let fresh = third.banner["producer"]
        .split_whitespace()
        .nth(2)
        .unwrap()
        .to_string();
    let producer = Producer::new(&api, "order-service", fresh).unwrap();
    let err = producer.commit("kept").await.unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    let stale = Producer::new(&api, "order-service", token).unwrap();
    assert!(stale.commit("kept").await.is_err(), "the old token is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_inserted_into_the_demo_outbox_is_relayed_to_its_topic() {
    let dir = tempfile::tempdir().unwrap();
    let dev = Dev::start(
        dir.path(),
        &[
            format!("--listen=127.0.0.1:{}", free_port()),
            format!("--kafka-listen=127.0.0.1:{}", free_port()),
        ],
    );
    let brokers = dev.printed("Kafka");
    let file = dev.printed("outbox");
    assert_eq!(file, "trustmsg-dev/trustmsg-dev-outbox.db");
    let path = dir.path().join(&file);
    assert!(
        path.exists(),
        "its table is made at start: {}",
        path.display()
    );

    // The banner's own statement, as a newcomer pastes it into a shell:
    // `sqlite3 … FILE "INSERT …"`.
    let line = dev.line_containing("sqlite3 ");
    assert!(line.contains(&format!(" {file} \"")), "{line}");
    let (start, end) = (line.find('"').unwrap(), line.rfind('"').unwrap());
    let statement = line[start + 1..end].to_string();
    assert!(
        statement.starts_with("INSERT INTO trustmsg_outbox (message_key, topic, payload)"),
        "{statement}"
    );
    let pool = SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(statement))
        .execute(&pool)
        .await
        .unwrap();
    // And what an application does: the SDK's row, in its transaction.
    let mut tx = pool.begin().await.unwrap();
    outbox::enqueue(
        &mut tx,
        &Message::new("outbox-2", "orders", r#"{"total":7}"#)
            .key("7")
            .header("content-type", "application/json"),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();

    let mut reader = TopicReader::new(&brokers, "orders");
    let from_outbox = |r: &trustmsg_tests::kafka::Consumed| {
        matches!(
            r.header("trustmsg-message-key"),
            Some(b"outbox-1" | b"outbox-2")
        )
    };
    reader
        .read_until(Duration::from_secs(30), "both outbox rows", |r| {
            r.iter().filter(|r| from_outbox(r)).count() == 2
        })
        .await;
    let mut records: Vec<_> = reader.records.iter().filter(|r| from_outbox(r)).collect();
    records.sort_by_key(|r| r.header("trustmsg-message-key").map(<[u8]>::to_vec));
    assert_eq!(
        records[0].payload.as_deref(),
        Some(&b"hello from the outbox"[..])
    );
    assert_eq!(records[1].payload.as_deref(), Some(&br#"{"total":7}"#[..]));
    assert_eq!(records[1].key.as_deref(), Some(&b"7"[..]));
    assert_eq!(
        records[1].header("content-type"),
        Some(&b"application/json"[..])
    );
    for r in &records {
        assert_eq!(r.header("trustmsg-biz-id"), Some(&b"order-service"[..]));
    }

    trustmsg_tests::eventually(10, "both rows marked relayed", async || {
        let statuses: Vec<i64> = sqlx::query_scalar("SELECT status FROM trustmsg_outbox")
            .fetch_all(&pool)
            .await
            .unwrap();
        statuses == [2, 2]
    })
    .await;
    pool.close().await;
    drop(dev);
}

/// `--kafka-brokers`: dev mode on a real Apache Kafka instead of its
/// in-process broker. It starts none, names the given bootstrap in its
/// banner and `env`, creates the Kafka way in's topic there, and the loop
/// and the way in work on it (the SDKs' contract kit runs so with
/// `--real-kafka`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_real_broker_of_your_own_the_loop_and_the_way_in_use_it() {
    // The run's shared broker: the way in's topic and group, and the
    // orders' topic, are this test's own.
    let kafka = RealKafka::shared();
    let orders = unique("dev-orders");
    let dir = tempfile::tempdir().unwrap();
    let dev = Dev::start(
        dir.path(),
        &[
            format!("--listen=127.0.0.1:{}", free_port()),
            format!("--kafka-brokers={}", kafka.bootstrap()),
            "--".to_string(),
            format!("--submit-topic={}", unique("dev.submit")),
            format!("--submit-group={}", unique("dev")),
        ],
    );
    assert_eq!(dev.printed("Kafka"), kafka.bootstrap());
    assert!(
        dev.banner["Kafka"].contains("a broker of your own"),
        "{:?}",
        dev.banner["Kafka"]
    );
    let env_file = dir.path().join("trustmsg-dev/env");
    assert_eq!(exported(&env_file, "TRUSTMSG_BROKERS"), kafka.bootstrap());

    let producer = Producer::new(
        &dev.printed("API"),
        "order-service",
        exported(&env_file, "TRUSTMSG_DEMO_TOKEN"),
    )
    .unwrap();
    let committed = producer
        .prepare(&Message::new("order-1", &orders, r#"{"total":42}"#).key("42"))
        .await
        .unwrap();
    producer.commit("order-1").await.unwrap();

    // The way in's topic was made on the broker, with dev's 3 partitions
    // (one the broker made by itself on a first record would have its
    // default, 1), and a record submitted there is applied.
    let topic = exported(&env_file, "TRUSTMSG_SUBMIT_TOPIC");
    let metadata_reader: rdkafka::consumer::BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka.internal_bootstrap())
        .create()
        .unwrap();
    let metadata = tokio::task::spawn_blocking({
        let topic = topic.clone();
        move || {
            rdkafka::consumer::Consumer::fetch_metadata(
                &metadata_reader,
                Some(&topic),
                Duration::from_secs(10),
            )
        }
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(
        metadata.topics()[0].partitions().len(),
        3,
        "{topic} as dev mode made it"
    );
    let submitter = Submitter::new(
        kafka.bootstrap(),
        &topic,
        "order-service",
        &exported(&env_file, "TRUSTMSG_DEMO_SIGNING_SECRET"),
    );
    submitter
        .prepare(
            "order-2",
            Submission {
                topic: &orders,
                key: Some("43"),
                value: br#"{"total":43}"#,
                ..Default::default()
            },
        )
        .await;
    submitter.commit("order-2").await;

    let mut reader = kafka.reader(&orders);
    reader
        .read_until(
            Duration::from_secs(60),
            "both records on the real broker",
            |r| {
                r.iter().any(|r| r.message_id == committed.id)
                    && r.iter()
                        .any(|r| r.payload.as_deref() == Some(&br#"{"total":43}"#[..]))
            },
        )
        .await;
    assert_first_order(&reader.records, committed.id);
    assert_eq!(
        producer.get("order-2").await.unwrap().status,
        MessageStatus::Committed
    );
    drop(dev);
}
