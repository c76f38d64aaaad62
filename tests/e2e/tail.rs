//! `trustmsg tail` against a broker it did not start: records written by a
//! plain librdkafka producer (text, binary, null key, headers) printed as they
//! arrive, from the beginning or only new ones, and a topic waited for.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::ClientConfig;
use serde_json::{json, Value};
use trustmsg_tests::kafka::MockKafka;
use trustmsg_tests::process::binary;

fn producer(bootstrap: &str) -> ThreadedProducer<DefaultProducerContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap()
}

/// Writes the three test records to partition 0 of `topic` and waits for their acks.
fn write_three(p: &ThreadedProducer<DefaultProducerContext>, topic: &str) {
    let headers = OwnedHeaders::new()
        .insert(Header {
            key: "trustmsg-message-id",
            value: Some("17"),
        })
        .insert(Header {
            key: "blob",
            value: Some(&[0xffu8, 0x00][..]),
        })
        .insert(Header::<&str> {
            key: "empty",
            value: None,
        });
    p.send(
        BaseRecord::to(topic)
            .partition(0)
            .key("42")
            .payload("{\"total\":42}\nsecond line")
            .headers(headers),
    )
    .unwrap();
    p.send(
        BaseRecord::<(), _>::to(topic)
            .partition(0)
            .payload(&[0u8, 159, 146, 150][..]),
    )
    .unwrap();
    p.send(BaseRecord::<_, ()>::to(topic).partition(0).key("no value"))
        .unwrap();
    p.flush(Duration::from_secs(10)).unwrap();
}

/// Runs `trustmsg tail` to completion (it stops after `--count`).
fn tail(args: &[&str]) -> Output {
    let child = Command::new(binary())
        .arg("tail")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn tail_prints_each_record_key_headers_and_payload_text_or_base64() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("t", 2);
    write_three(&producer(kafka.bootstrap()), "t");
    let b = kafka.bootstrap();
    let base = [
        "--brokers",
        b,
        "--topic",
        "t",
        "--from-beginning",
        "--count",
        "3",
    ];

    // A setting librdkafka warns about (a producer's, on tail's consumer):
    // the warning goes to stderr, and stdout holds the JSON lines alone.
    let out = tail(&[&base[..], &["--json", "--kafka-config", "linger.ms=5"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("CONFWARN") && stderr.contains("will be ignored by this consumer"),
        "librdkafka's warning on stderr: {stderr}"
    );
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let strip = |mut v: Value| {
        v.as_object_mut().unwrap().remove("timestamp_ms").unwrap();
        v
    };
    let lines: Vec<Value> = lines.into_iter().map(strip).collect();
    assert_eq!(
        lines,
        vec![
            json!({"topic": "t", "partition": 0, "offset": 0, "key": "42",
                   "headers": [{"name": "trustmsg-message-id", "value": "17"},
                               {"name": "blob", "value_base64": "/wA="},
                               {"name": "empty", "value": null}],
                   "payload": "{\"total\":42}\nsecond line"}),
            json!({"topic": "t", "partition": 0, "offset": 1, "key": null,
                   "headers": [], "payload_base64": "AJ+Slg=="}),
            json!({"topic": "t", "partition": 0, "offset": 2, "key": "no value",
                   "headers": [], "payload": null}),
        ]
    );

    let text = String::from_utf8(tail(&base).stdout).unwrap();
    let first: Vec<&str> = text.lines().take(5).collect();
    assert!(first[0].starts_with("t/0@0 "), "{text}");
    assert!(first[0].ends_with(" key \"42\""), "{text}");
    assert_eq!(
        &first[1..],
        [
            "  trustmsg-message-id: \"17\"",
            "  blob: base64:/wA=",
            "  empty: (null)",
            "  {\"total\":42}",
        ],
        "{text}"
    );
    assert!(text.contains("\n  second line\n"), "{text}");
    assert!(
        text.contains("key (null)\n  (4 bytes) base64:AJ+Slg==\n"),
        "{text}"
    );
    assert!(
        text.contains("key \"no value\"\n  (null payload)"),
        "{text}"
    );
}

#[test]
fn without_from_beginning_tail_prints_only_new_records_and_waits_for_a_missing_topic() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("old", 1);
    let p = producer(kafka.bootstrap());
    write_three(&p, "old");
    let b = kafka.bootstrap().to_string();
    let on_old = Tail::spawn(&b, "old");
    // A topic nobody created yet: tail waits, then reads all of it.
    let on_new = Tail::spawn(&b, "new");
    on_old.stderr_says("from the end");
    on_new.stderr_says("waiting for topic new to exist");
    write_three(&p, "old");
    kafka.create_topic("new", 1);
    write_three(&p, "new");

    let offsets = |t: Tail| -> Vec<i64> {
        let out = t.child.wait_with_output().unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["offset"]
                    .as_i64()
                    .unwrap()
            })
            .collect()
    };
    assert_eq!(
        offsets(on_old),
        vec![3, 4, 5],
        "only what came after it started"
    );
    assert_eq!(offsets(on_new), vec![0, 1, 2]);
}

/// A `trustmsg tail --count 3 --json` in the background, its stderr read line by line.
struct Tail {
    child: std::process::Child,
    stderr: mpsc::Receiver<String>,
}

impl Tail {
    fn spawn(brokers: &str, topic: &str) -> Self {
        let mut child = Command::new(binary())
            .args([
                "tail",
                "--brokers",
                brokers,
                "--topic",
                topic,
                "--count",
                "3",
                "--json",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Self { child, stderr: rx }
    }

    /// Waits (30 s at most) for a stderr line containing `what`.
    fn stderr_says(&self, what: &str) {
        loop {
            let line = self
                .stderr
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("tail never said {what:?}"));
            if line.contains(what) {
                return;
            }
        }
    }
}
