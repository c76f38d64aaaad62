//! A real Apache Kafka broker for a test: `scripts/kafka-broker` (one KRaft
//! node, broker and controller, its jars from Maven in a cache outside the
//! repository), started in a temporary directory of the test's own on free
//! ports of 127.0.0.1 and stopped when the [`RealKafka`] is dropped.
//!
//! Each test starts its own broker (10–15 s on a 2-core machine, the first
//! run on a machine also fetches the jars once): nothing a test does to its
//! broker (users, ACLs, a restart) can reach another test.
//!
//! The broker has two listeners: [`RealKafka::bootstrap`], what the service
//! under test is given, with the SASL, TLS and ACLs the test asked for; and
//! [`RealKafka::internal_bootstrap`], plaintext and not authorized (its
//! anonymous principal is a super user), the test's own way in to create
//! topics and to read back what reached them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;

use crate::kafka::TopicReader;

/// A broker started by `scripts/kafka-broker` in a directory of its own;
/// stopped (that process only) when dropped.
pub struct RealKafka {
    dir: tempfile::TempDir,
    bootstrap: String,
    internal: String,
    /// How long the first start took (the jars' fetch included, if any).
    pub started_in: Duration,
}

/// The script, from the workspace's `scripts/`.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/kafka-broker")
}

fn run_script(args: &[&str]) -> String {
    let out = Command::new(script())
        .args(args)
        // Stopped with this process should it die before dropping it.
        .env("TRUSTMSG_KAFKA_OWNER_PID", std::process::id().to_string())
        .output()
        .unwrap_or_else(|e| panic!("scripts/kafka-broker {args:?}: {e}"));
    assert!(
        out.status.success(),
        "scripts/kafka-broker {args:?} failed ({}); it needs java 17+, python3 and, \
         the first time, mvn:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

impl RealKafka {
    /// A plaintext broker without authentication or ACLs.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// A broker started with these options of `scripts/kafka-broker start`
    /// (`--sasl`, `--user NAME:PASSWORD`, `--tls CERTDIR`, `--host NAME`).
    pub fn start_with(options: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().display().to_string();
        let began = Instant::now();
        let mut args = vec!["start", path.as_str()];
        args.extend_from_slice(options);
        let bootstrap = run_script(&args).trim().to_string();
        let started_in = began.elapsed();
        let internal = std::fs::read_to_string(dir.path().join("internal-bootstrap"))
            .expect("the internal bootstrap address")
            .trim()
            .to_string();
        eprintln!("real kafka at {bootstrap} (internal {internal}) started in {started_in:?}");
        Self {
            dir,
            bootstrap,
            internal,
            started_in,
        }
    }

    /// What the service under test connects to.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// The plaintext listener for the test's own setup and reading.
    pub fn internal_bootstrap(&self) -> &str {
        &self.internal
    }

    /// The broker's directory (its log is `broker.log` there).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Stops the broker (a controlled shutdown); its storage stays.
    pub fn stop(&self) {
        run_script(&["stop", &self.dir.path().display().to_string()]);
    }

    /// Starts the stopped broker again: the same ports, storage and users.
    pub fn restart(&self) -> Duration {
        let began = Instant::now();
        run_script(&["start", &self.dir.path().display().to_string()]);
        began.elapsed()
    }

    /// Creates `topic` with `partitions` partitions and waits until every
    /// partition has its leader.
    pub async fn create_topic(&self, topic: &str, partitions: i32) {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", &self.internal)
            .create()
            .expect("an admin client");
        let results = admin
            .create_topics(
                &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
                &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
            )
            .await
            .expect("create_topics");
        for r in results {
            r.unwrap_or_else(|(t, e)| panic!("topic {t} not created: {e}"));
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let md = admin
                .inner()
                .fetch_metadata(Some(topic), Duration::from_secs(5));
            let ready = md.ok().is_some_and(|md| {
                md.topics().iter().any(|t| {
                    t.name() == topic
                        && t.error().is_none()
                        && t.partitions().len() == partitions as usize
                        && t.partitions().iter().all(|p| p.leader() >= 0)
                })
            });
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{topic} has no leaders after 30 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `kafka-acls` on the broker with these arguments, e.g. `["--add",
    /// "--allow-principal", "User:trustmsg", "--operation", "Write",
    /// "--topic", "orders"]`.
    pub fn acl(&self, args: &[&str]) {
        let mut all = vec!["acl".to_string(), self.dir.path().display().to_string()];
        all.extend(args.iter().map(|a| a.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        run_script(&all);
    }

    /// A reader of `topic` through the internal listener.
    pub fn reader(&self, topic: &str) -> TopicReader {
        TopicReader::new(&self.internal, topic)
    }
}

impl Drop for RealKafka {
    fn drop(&mut self) {
        let dir = self.dir.path().display().to_string();
        if let Err(e) = Command::new(script()).args(["stop", &dir]).status() {
            eprintln!("scripts/kafka-broker stop {dir}: {e}");
        }
    }
}
