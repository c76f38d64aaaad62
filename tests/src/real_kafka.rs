//! A real Apache Kafka broker for a test: `scripts/kafka-broker` (one KRaft
//! node, broker and controller, its jars from Maven in a cache outside the
//! repository), started in a temporary directory of the test's own on free
//! ports of 127.0.0.1 and stopped when the [`RealKafka`] is dropped.
//!
//! A test that changes its broker (users, ACLs, TLS, a restart) starts its
//! own ([`RealKafka::start`], [`RealKafka::start_with`]; 10–15 s of CPU on a
//! 2-core machine, the first run on a machine also fetches the jars once):
//! nothing it does to it can reach another test. A test that only needs a
//! plain broker takes the run's shared one ([`RealKafka::shared`]) and keeps
//! to topics and groups of its own ([`unique`]).
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
    dir: PathBuf,
    /// The test's own broker's directory, deleted when dropped; `None` for
    /// the shared broker, which outlives the test.
    own: Option<tempfile::TempDir>,
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
    // Stopped with this process should it die before dropping it.
    run(Command::new(script()).args(args), std::process::id(), args)
}

/// `command` (the script, or the script under `flock`) with the broker it
/// starts stopped once `owner` is gone; its output.
fn run(command: &mut Command, owner: u32, args: &[&str]) -> String {
    let out = command
        .env("TRUSTMSG_KAFKA_OWNER_PID", owner.to_string())
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
        let own = tempfile::tempdir().expect("a temporary directory");
        let dir = own.path().to_path_buf();
        let path = dir.display().to_string();
        let began = Instant::now();
        let mut args = vec!["start", path.as_str()];
        args.extend_from_slice(options);
        let bootstrap = run_script(&args).trim().to_string();
        Self::at(dir, Some(own), bootstrap, began.elapsed())
    }

    /// The plain broker (no SASL, TLS or ACLs) the tests of this nextest
    /// run share: the first test to ask starts it, the others wait for it
    /// on a lock and use it, and the script's watchdog stops it once the
    /// run (the test processes' parent, nextest) is over. Its directory is
    /// under the target directory (`<profile>/real-kafka-shared/<run id>`). A test on it must not
    /// stop, restart or reconfigure it, and must use topics and consumer
    /// groups of its own ([`unique`]): a retried test meets its first
    /// attempt's.
    ///
    /// Outside nextest (no `NEXTEST_RUN_ID`): a broker of the test's own.
    pub fn shared() -> Self {
        let Ok(run_id) = std::env::var("NEXTEST_RUN_ID") else {
            return Self::start();
        };
        // `<target>/<profile>/deps/<test binary>`: beside `deps`.
        let exe = std::env::current_exe().expect("the test binary's path");
        let root = exe
            .ancestors()
            .nth(2)
            .expect("the target directory")
            .join("real-kafka-shared");
        std::fs::create_dir_all(&root).expect("the shared brokers' directory");
        let dir = root.join(run_id);
        let began = Instant::now();
        // One test at a time configures and starts it (starting it again
        // once it runs only prints its address), and clears away the
        // directories of earlier runs' brokers (stopped: no pid file).
        let lock = std::fs::File::create(root.join(".lock")).expect("the lock file");
        lock.lock().expect("the shared broker's lock");
        for entry in std::fs::read_dir(&root).expect("the shared brokers' directory") {
            let old = entry.expect("a directory entry").path();
            if old.is_dir() && old != dir && !old.join("pid").exists() {
                let _ = std::fs::remove_dir_all(&old);
            }
        }
        // The watchdog's owner is nextest itself, every test's parent.
        let path = dir.display().to_string();
        let args = ["start", path.as_str()];
        let bootstrap = run(
            Command::new(script()).args(args),
            std::os::unix::process::parent_id(),
            &args,
        )
        .trim()
        .to_string();
        drop(lock);
        Self::at(dir, None, bootstrap, began.elapsed())
    }

    fn at(dir: PathBuf, own: Option<tempfile::TempDir>, bootstrap: String, took: Duration) -> Self {
        let internal = std::fs::read_to_string(dir.join("internal-bootstrap"))
            .expect("the internal bootstrap address")
            .trim()
            .to_string();
        eprintln!("real kafka at {bootstrap} (internal {internal}) ready in {took:?}");
        Self {
            dir,
            own,
            bootstrap,
            internal,
            started_in: took,
        }
    }

    /// This test's own broker's directory; the shared broker is no test's
    /// to stop or change.
    fn own_dir(&self) -> String {
        assert!(
            self.own.is_some(),
            "the shared broker is not a test's to stop, restart or change"
        );
        self.dir.display().to_string()
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
        &self.dir
    }

    /// Stops the broker (a controlled shutdown); its storage stays.
    pub fn stop(&self) {
        run_script(&["stop", &self.own_dir()]);
    }

    /// Kills the broker (SIGKILL), as a crash would: no controlled
    /// shutdown, so what its logs hold (a transaction's prepared commit,
    /// say) is taken up again by [`RealKafka::restart`]. Its storage stays.
    pub fn kill(&self) {
        let dir = self.own_dir();
        let pid: u32 = std::fs::read_to_string(self.dir.join("pid"))
            .ok()
            .and_then(|p| p.trim().parse().ok())
            .expect("the broker runs (its pid file)");
        run_script(&["kill", &dir]);
        // The script returns once the broker's command line is gone, which
        // a JVM killed with many threads loses before its exit is done (its
        // state not yet a zombie's): give the exit a moment, not a pass.
        let deadline = Instant::now() + Duration::from_secs(10);
        while crate::postgres::alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !crate::postgres::alive(pid),
            "the broker (pid {pid}) still runs 10 s after its kill"
        );
    }

    /// Starts the stopped broker again: the same ports, storage and users.
    pub fn restart(&self) -> Duration {
        let began = Instant::now();
        run_script(&["start", &self.own_dir()]);
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
        let mut all = vec!["acl".to_string(), self.own_dir()];
        all.extend(args.iter().map(|a| a.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        run_script(&all);
    }

    /// A reader of `topic` through the internal listener.
    pub fn reader(&self, topic: &str) -> TopicReader {
        TopicReader::new(&self.internal, topic)
    }
}

/// `name` made this test process's own (its pid appended): a topic or
/// group on the shared broker no other test, and no earlier attempt of this
/// one, uses.
pub fn unique(name: &str) -> String {
    format!("{name}-{}", std::process::id())
}

impl Drop for RealKafka {
    fn drop(&mut self) {
        if self.own.is_none() {
            return;
        }
        let dir = self.dir.display().to_string();
        if let Err(e) = Command::new(script()).args(["stop", &dir]).status() {
            eprintln!("scripts/kafka-broker stop {dir}: {e}");
        }
    }
}
