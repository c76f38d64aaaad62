//! Exactly once into Kafka (issue 63), against the real Apache Kafka of
//! the run (`scripts/kafka-broker`): `serve --exactly-once`, read back as
//! a consumer with `isolation.level=read_committed` reads.
//!
//! - The crash at the worst point: the process exits right after Kafka
//!   committed a transaction and before the SENT marks were written
//!   (`TRUSTMSG_FAULT_EXIT_AFTER_KAFKA_COMMITS`), on MariaDB and on
//!   PostgreSQL. Its records are in Kafka and their rows still PENDING;
//!   the restarted instance (same `--instance-id`) marks them from its
//!   progress record instead of sending them again, and sends the rest of
//!   what it had claimed at once, not after `--send-lease` (60 s): every
//!   committed message in Kafka exactly once within 5 s of the restart.
//! - The crash inside a transaction: its records written and acknowledged,
//!   the process gone before the commit. A `read_committed` consumer never
//!   sees them; the restart fences the open transaction (aborted), gives
//!   the claims back at once and sends them again, each seen once.
//! - The same crash with a twist: another producer's transaction held open
//!   on the progress topic across the crashed commit and the restart (the
//!   restart reads its progress past it, not to the last stable offset);
//!   and a batch held past its lease before its send, so that the instance
//!   claims its rows again and its progress names them under the claim
//!   before (the restart marks them under the claim held now). Each failed
//!   with 39-40 of 40 messages twice before its fix.
//! - A zombie: instance `a` stops itself (SIGSTOP) with its claims taken
//!   and no transaction begun; `b` fences it once its claims have run out
//!   and sends its rows; `a`, woken, goes on with the same rows in hand and
//!   is refused by Kafka (fenced): each order once. Without the fencing
//!   every order was in the topic twice.
//! - The campaign: two instances under a steady load of orders (8
//!   producers, each call tried on the other instance when one does not
//!   answer), `kill -9` of one, one stopped past its lease and woken, and
//!   a restart of the broker (a broker of its own), the broker frozen past
//!   the send timeout, and (MariaDB) an instance cut off from its database
//!   past its lease; read back `read_committed`: 0 lost, 0 wrong, 0
//!   duplicates.
//!
//! - Ordered keys and delivery times: an ordered producer's keys reach
//!   Kafka in commit order, each message once; a message delayed by an
//!   hour is not sent before an operator's send-now, then once.
//! - Readiness: an instance started while its broker is down answers
//!   `/readyz` 503 (the forwarder still starting) until it could fence its
//!   predecessor and take back its claims, then 200.
//!
//! Run alone: `cargo test -p trustmsg-tests --test e2e exactly_once`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use trustmsg::store::DynStore;
use trustmsg_client::Message;
use trustmsg_tests::db_proxy::DbProxy;
use trustmsg_tests::kafka::{committed_records_in, records_in};
use trustmsg_tests::pg::PgTestDb;
use trustmsg_tests::real_kafka::unique;
use trustmsg_tests::{RealKafka, ServiceProcess, TestDb};
use trustmsg_verify_api::{kafka_headers, MessageStatus, SendStatus};

use crate::harness::shop;

/// Where the process is made to end.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Crash {
    /// Right after Kafka committed a transaction, before the SENT marks.
    AfterKafkasCommit,
    /// With a transaction's records acknowledged, before its commit.
    BeforeKafkasCommit,
}

impl Crash {
    /// The test hook's variable.
    fn hook(self) -> (&'static str, &'static str) {
        match self {
            Self::AfterKafkasCommit => ("TRUSTMSG_FAULT_EXIT_AFTER_KAFKA_COMMITS", "1"),
            Self::BeforeKafkasCommit => ("TRUSTMSG_FAULT_EXIT_BEFORE_KAFKA_COMMIT", "1"),
        }
    }
}

/// Messages committed at once before the crash.
const MESSAGES: usize = 40;

/// The message id a record carries.
fn id_of(r: &trustmsg_tests::submit::RawRecord) -> u64 {
    r.headers
        .iter()
        .find(|(k, _)| k == kafka_headers::MESSAGE_ID)
        .and_then(|(_, v)| v.as_deref())
        .map(|v| String::from_utf8_lossy(v).parse::<u64>().unwrap())
        .expect("every record carries its message id")
}

/// Each message id in `topic` on the broker at `bootstrap` (read
/// committed) and how many records carry it.
async fn committed_copies(bootstrap: &str, topic: &str) -> BTreeMap<u64, usize> {
    let mut copies = BTreeMap::new();
    for r in committed_records_in(bootstrap, topic).await {
        *copies.entry(id_of(&r)).or_insert(0) += 1;
    }
    copies
}

/// The committed messages of `keys` (id and send status), read from the store.
async fn committed(store: &DynStore, keys: &[String]) -> BTreeMap<u64, Option<SendStatus>> {
    let mut out = BTreeMap::new();
    for key in keys {
        if let Some(m) = store.find_message("shop", key).await.unwrap() {
            if m.status == MessageStatus::Committed {
                out.insert(m.id, m.send_status);
            }
        }
    }
    out
}

/// `serve` flags of an exactly-once instance named `name` writing its
/// progress to `progress`, sweeping every 200 ms; with `short_lease`, a
/// send lease of 4 s (and Kafka sends of 3 s at most) instead of 60 s.
fn eos_flags(name: &str, progress: &str, short_lease: bool) -> Vec<String> {
    let mut flags = vec![
        "--exactly-once",
        "--instance-id",
        name,
        "--progress-topic",
        progress,
        "--sweep-interval",
        "200ms",
    ];
    if short_lease {
        flags.extend(["--send-lease", "4s", "--kafka-message-timeout", "3s"]);
    }
    flags.into_iter().map(String::from).collect()
}

/// An exactly-once instance over `database_url`, its output appended to
/// `log`, with `env` set for it and its restarts.
async fn eos_instance(
    database_url: &str,
    kafka: &RealKafka,
    flags: &[String],
    log: &std::path::Path,
    env: &[(&str, &str)],
) -> ServiceProcess {
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    ServiceProcess::start_logged_with_env(database_url, kafka.bootstrap(), &flags, log.into(), env)
        .await
}

/// Waits until every committed message of `keys` (at least `at_least`
/// of them) is SENT, failing once `within` has passed since `began` with
/// `log`'s text; the messages, and how long after `began` it was.
async fn all_sent(
    store: &DynStore,
    keys: &[String],
    at_least: usize,
    (began, within): (Instant, Duration),
    log: &std::path::Path,
) -> (BTreeMap<u64, Option<SendStatus>>, Duration) {
    loop {
        let now = committed(store, keys).await;
        if now.len() >= at_least && now.values().all(|s| *s == Some(SendStatus::Sent)) {
            return (now, began.elapsed());
        }
        assert!(
            began.elapsed() < within,
            "every committed message SENT within {within:?}; now {now:?}\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A transactional producer of another name (another instance, as the
/// restarted one sees it) with a transaction open on `progress`: a progress
/// record of its own written and not committed, so a `read_committed`
/// reader's last stable offset stays below everything written after it.
fn a_transaction_held_open_on(kafka: &RealKafka, progress: &str, name: &str) -> BaseProducer {
    let other: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", kafka.bootstrap())
        .set("transactional.id", name)
        .create()
        .unwrap();
    other.init_transactions(Duration::from_secs(30)).unwrap();
    other.begin_transaction().unwrap();
    other
        .send(BaseRecord::to(progress).key(name).payload(r#"{"sent":[]}"#))
        .map_err(|(e, _)| e)
        .unwrap();
    other.flush(Duration::from_secs(30)).unwrap();
    other
}

/// What else happens around the crash.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Around {
    /// Nothing.
    Nothing,
    /// Another producer holds a transaction open on the progress topic
    /// from before the crashed transaction's commit until 2 s into the
    /// restart.
    AnotherOpenTransaction,
    /// The messages are due at one time and claimed in one batch, which
    /// waits 3 s before it is sent, past a send lease of 2 s: the instance
    /// claims its rows again meanwhile, and its progress record names each
    /// under the claim before.
    ClaimedAgainBeforeTheSend,
}

async fn a_crash_sends_nothing_twice_and_recovers_at_once(database_url: &str, crash: Crash) {
    a_crash_sends_nothing_twice(database_url, crash, Around::Nothing).await;
}

/// The crash `crash` and the restart, with `around`.
async fn a_crash_sends_nothing_twice(database_url: &str, crash: Crash, around: Around) {
    let kafka = RealKafka::shared();
    let topic = unique(&format!("e2e-eos-{}", &database_url[..5]));
    let progress = format!("{topic}-progress");
    kafka.create_topic(&topic, 3).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("trustmsg.log");
    let owner = format!("{topic}-instance");
    let mut flags = eos_flags(&owner, &progress, false);
    if around == Around::ClaimedAgainBeforeTheSend {
        flags.extend(["--send-lease", "2s", "--kafka-message-timeout", "1500ms"].map(String::from));
    }
    let mut service = eos_instance(database_url, &kafka, &flags, &log, &[]).await;
    let producer = shop(&service).await;
    let keys: Vec<String> = (0..MESSAGES).map(|i| format!("order-{i}")).collect();
    // Claimed again before the send: all due at one time, after the
    // restart below and every commit, so that one claim takes them all.
    let due = (around == Around::ClaimedAgainBeforeTheSend)
        .then(|| chrono::Utc::now() + chrono::Duration::seconds(5));
    for key in &keys {
        let m = Message::new(key, &topic, format!(r#"{{"order":"{key}"}}"#)).key(key);
        let m = match due {
            Some(due) => m.deliver_at(due),
            None => m,
        };
        producer.prepare(&m).await.unwrap();
    }

    // The crash, in the first transaction.
    match around {
        Around::ClaimedAgainBeforeTheSend => {
            service.set_env(&[crash.hook(), ("TRUSTMSG_FAULT_HOLD_FIRST_SEND_MS", "3000")]);
        }
        _ => service.set_env(&[crash.hook()]),
    }
    service.restart().await;
    let other = (around == Around::AnotherOpenTransaction)
        .then(|| a_transaction_held_open_on(&kafka, &progress, &format!("{topic}-other")));
    let commits = keys.iter().map(|k| producer.commit(k));
    let answered = futures::future::join_all(commits).await;
    let status = service.exited_within(Duration::from_secs(30)).await;
    assert_eq!(
        status.code(),
        Some(86),
        "it exited through the hook, after Kafka's commit: {status:?}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let acknowledged = answered.iter().filter(|a| a.is_ok()).count();
    assert!(acknowledged > 0, "some commits were acknowledged");

    let url = trustmsg::store::DatabaseUrl::parse(database_url).unwrap();
    let store = trustmsg::store::connect(&url).await.unwrap();
    let before = committed(&store, &keys).await;
    let (in_kafka, unmarked) = match crash {
        Crash::AfterKafkasCommit => {
            let in_kafka = committed_copies(kafka.bootstrap(), &topic).await;
            let unmarked: Vec<u64> = in_kafka
                .keys()
                .filter(|id| before.get(id) == Some(&Some(SendStatus::Pending)))
                .copied()
                .collect();
            assert!(
                !unmarked.is_empty(),
                "records in Kafka whose rows are still PENDING: the crash fell between the \
                 commit and the marks ({in_kafka:?}, rows {before:?})"
            );
            (in_kafka.len(), unmarked.len())
        }
        // Written and acknowledged, and no more: the transaction is open
        // (a read_committed consumer waits at its first record until the
        // restart aborts it).
        Crash::BeforeKafkasCommit => {
            let written = records_in(kafka.bootstrap(), &topic).await;
            assert!(
                !written.is_empty(),
                "the open transaction's records reached the broker (read uncommitted)"
            );
            assert!(
                before.values().all(|s| *s == Some(SendStatus::Pending)),
                "nothing marked: {before:?}"
            );
            (0, 0)
        }
    };

    // The restart: the same name, its predecessor fenced, its claims
    // taken back at once.
    service.set_env(&[]);
    let restarted = Instant::now();
    // Aborted 2 s into the restart (the start's recovery waits for it).
    let aborted = other.map(|other| {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(2));
            other.abort_transaction(Duration::from_secs(30)).unwrap();
        })
    });
    service.start_again().await;
    if let Some(aborted) = aborted {
        aborted.join().unwrap();
    }
    // Within 5 s of the restart: not after the 60 s lease.
    let within = (restarted, Duration::from_secs(5));
    let (all_sent, took) = all_sent(&store, &keys, 0, within, &log).await;
    let copies = committed_copies(kafka.bootstrap(), &topic).await;
    let twice: Vec<_> = copies.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "sent twice: {twice:?}");
    assert_eq!(
        copies.keys().collect::<Vec<_>>(),
        all_sent.keys().collect::<Vec<_>>(),
        "every committed message is in Kafka, and nothing else"
    );
    assert!(
        all_sent.len() >= acknowledged,
        "every acknowledged commit is there"
    );
    eprintln!(
        "{crash:?}: {} committed ({acknowledged} acknowledged), {in_kafka} in Kafka at the \
         crash ({unmarked} of them unmarked); all SENT {took:?} after the restart began, \
         each once",
        all_sent.len(),
    );
    service.terminate_cleanly();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_kafkas_commit_and_the_marks_sends_nothing_twice_on_mariadb() {
    let db = TestDb::create().await;
    a_crash_sends_nothing_twice_and_recovers_at_once(&db.url, Crash::AfterKafkasCommit).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_kafkas_commit_and_the_marks_sends_nothing_twice_on_postgres() {
    let db = PgTestDb::create().await;
    a_crash_sends_nothing_twice_and_recovers_at_once(&db.url, Crash::AfterKafkasCommit).await;
}

/// The restart reads its progress past another instance's transaction,
/// open on the progress topic since before the crashed commit: up to the
/// last stable offset alone, it found no progress of its own and sent all
/// 40 again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_reads_its_progress_past_another_instances_open_transaction_on_mariadb() {
    let db = TestDb::create().await;
    a_crash_sends_nothing_twice(
        &db.url,
        Crash::AfterKafkasCommit,
        Around::AnotherOpenTransaction,
    )
    .await;
}

/// The restart marks a row its predecessor claimed again after naming it
/// in its progress under the claim it holds now: under the progress's
/// version the mark matched nothing and the row was sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_marks_a_row_claimed_again_after_its_progress_named_it_on_postgres() {
    let db = PgTestDb::create().await;
    a_crash_sends_nothing_twice(
        &db.url,
        Crash::AfterKafkasCommit,
        Around::ClaimedAgainBeforeTheSend,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_inside_a_kafka_transaction_is_sent_again_at_once_and_seen_once_on_mariadb() {
    let db = TestDb::create().await;
    a_crash_sends_nothing_twice_and_recovers_at_once(&db.url, Crash::BeforeKafkasCommit).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_inside_a_kafka_transaction_is_sent_again_at_once_and_seen_once_on_postgres() {
    let db = PgTestDb::create().await;
    a_crash_sends_nothing_twice_and_recovers_at_once(&db.url, Crash::BeforeKafkasCommit).await;
}

/// Whether process `pid` is stopped (SIGSTOP): its state in
/// `/proc/<pid>/stat` is `T`.
fn stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let after = stat.rsplit_once(')')?.1;
            after.split_whitespace().next().map(|s| s == "T")
        })
        .unwrap_or(false)
}

/// A zombie: instance `a` claims the orders (all due at one time) and
/// stops (SIGSTOP) before its transaction begins; instance `b`, once `a`'s claims have run out
/// (`--send-lease` 4 s), fences `a` in Kafka, gives its claims back and
/// sends them; then `a` is woken and goes on from where it stopped, with
/// the same rows in hand. Its transaction must fail (fenced), and every
/// order be in Kafka once.
async fn a_zombie_woken_after_its_lease_sends_nothing(database_url: &str) {
    let kafka = RealKafka::shared();
    let topic = unique(&format!("e2e-eos-zombie-{}", &database_url[..5]));
    let progress = format!("{topic}-progress");
    kafka.create_topic(&topic, 3).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("trustmsg.log");
    let mut a = eos_instance(
        database_url,
        &kafka,
        &eos_flags(&format!("{topic}-a"), &progress, true),
        &log,
        &[],
    )
    .await;
    a.set_env(&[("TRUSTMSG_FAULT_STOP_AFTER_CLAIM", "1")]);
    a.restart().await;
    let producer = shop(&a).await;
    let keys: Vec<String> = (0..MESSAGES).map(|i| format!("order-{i}")).collect();
    // All due at one time, 3 s from now: every commit is answered before
    // `a` claims them, and one claim takes them all.
    let due = chrono::Utc::now() + chrono::Duration::seconds(3);
    for key in &keys {
        let m = Message::new(key, &topic, format!(r#"{{"order":"{key}"}}"#));
        producer.prepare(&m.key(key).deliver_at(due)).await.unwrap();
    }
    // The commits are answered before `a` claims them; it stops then.
    for answer in futures::future::join_all(keys.iter().map(|k| producer.commit(k))).await {
        answer.unwrap();
    }
    let pid = a.pid().unwrap();
    let waited = Instant::now();
    while !stopped(pid) {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "a stopped itself with a claim taken\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let mut b = eos_instance(
        database_url,
        &kafka,
        &eos_flags(&format!("{topic}-b"), &progress, true),
        &log,
        &[],
    )
    .await;
    let url = trustmsg::store::DatabaseUrl::parse(database_url).unwrap();
    let store = trustmsg::store::connect(&url).await.unwrap();
    let within = (Instant::now(), Duration::from_secs(30));
    let (_, took_over) = all_sent(&store, &keys, keys.len(), within, &log).await;

    // The zombie wakes, its claimed rows in hand, and tries.
    a.resume();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let copies = committed_copies(kafka.bootstrap(), &topic).await;
    let twice: Vec<_> = copies.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "the zombie sent again: {twice:?}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert_eq!(copies.len(), keys.len(), "every order once: {copies:?}");
    let after = committed(&store, &keys).await;
    assert!(after.values().all(|s| *s == Some(SendStatus::Sent)));
    eprintln!(
        "zombie: {} orders claimed by a, sent by b {took_over:?} after it started, none again \
         by a once woken",
        keys.len()
    );
    a.terminate_cleanly();
    b.terminate_cleanly();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombie_woken_after_its_lease_sends_nothing_on_mariadb() {
    let db = TestDb::create().await;
    a_zombie_woken_after_its_lease_sends_nothing(&db.url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombie_woken_after_its_lease_sends_nothing_on_postgres() {
    let db = PgTestDb::create().await;
    a_zombie_woken_after_its_lease_sends_nothing(&db.url).await;
}

/// What the campaign's producers were told.
#[derive(Default)]
struct Told {
    /// Keys whose commit was acknowledged.
    acknowledged: std::sync::Mutex<Vec<String>>,
    /// Keys prepared (committed or not).
    prepared: std::sync::atomic::AtomicUsize,
    /// Every key a prepare was sent for, answered or not: the store may
    /// hold any of them.
    tried: std::sync::Mutex<Vec<String>>,
}

/// Producers running prepare + commit on `urls` (one instance after the
/// other when one does not answer) until `stop`, `workers` at once.
fn run_orders(
    urls: Vec<String>,
    token: String,
    topic: String,
    workers: usize,
    told: std::sync::Arc<Told>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinSet<()> {
    use std::sync::atomic::Ordering;
    let mut set = tokio::task::JoinSet::new();
    for w in 0..workers {
        let (urls, token, topic, told, stop) = (
            urls.clone(),
            token.clone(),
            topic.clone(),
            told.clone(),
            stop.clone(),
        );
        set.spawn(async move {
            let producers: Vec<trustmsg_client::Producer> = urls
                .iter()
                .map(|u| trustmsg_client::Producer::new(u, "shop", token.clone()).unwrap())
                .collect();
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("w{w}-{i}");
                i += 1;
                told.tried.lock().unwrap().push(key.clone());
                let message =
                    Message::new(&key, &topic, format!(r#"{{"order":"{key}"}}"#)).key(&key);
                // Each call tried on one instance after the other for up to
                // 20 s: instances are killed and paused under it.
                let began = Instant::now();
                let mut prepared = false;
                let mut turn = w;
                while !prepared && began.elapsed() < Duration::from_secs(20) {
                    prepared = producers[turn % producers.len()]
                        .prepare(&message)
                        .await
                        .is_ok();
                    turn += 1;
                    if !prepared {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
                if !prepared {
                    continue;
                }
                told.prepared.fetch_add(1, Ordering::Relaxed);
                let began = Instant::now();
                while began.elapsed() < Duration::from_secs(20) {
                    if producers[turn % producers.len()].commit(&key).await.is_ok() {
                        told.acknowledged.lock().unwrap().push(key.clone());
                        break;
                    }
                    turn += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        });
    }
    set
}

/// Keeps `dir` (the instances' logs) with a copy of the broker's directory
/// (its log, and its data for kafka-dump-log: the transactions' markers),
/// to be read after a failure, and says where.
fn keep_for_a_look(kafka: &RealKafka, dir: tempfile::TempDir) {
    let _ = std::process::Command::new("cp")
        .arg("-r")
        .arg(kafka.dir())
        .arg(dir.path().join("kafka"))
        .status();
    eprintln!(
        "campaign: the instances' logs and the broker's are kept in {}",
        dir.keep().display()
    );
}

/// The campaign of the exactly-once mode on a broker of its own: two
/// instances under a steady load of orders, and in turn: `kill -9` of one
/// (restarted), SIGSTOP of one past its send lease (a zombie, then
/// SIGCONT), a crash (`kill -9`) and restart of the broker. Then, read
/// `read_committed`: every acknowledged commit once, nothing twice,
/// nothing not committed.
/// The broker is also frozen (SIGSTOP: to its clients, a network cut) past
/// the send timeout, and on MariaDB instance 0 is cut off from its database
/// (a proxy that holds every byte) past its send lease.
/// `TRUSTMSG_EOS_CAMPAIGN_CYCLES` sets the cycles (default 5, one of each).
async fn the_campaign(database_url: &str, cut: Option<(&DbProxy, &str)>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let cycles: usize = std::env::var("TRUSTMSG_EOS_CAMPAIGN_CYCLES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(5);
    let kafka = RealKafka::start();
    let topic = unique("e2e-eos-campaign");
    let progress = format!("{topic}-progress");
    kafka.create_topic(&topic, 3).await;
    let dir = tempfile::tempdir().unwrap();
    let mut services = Vec::new();
    for i in 0..2 {
        let flags = eos_flags(&format!("{topic}-{i}"), &progress, true);
        let log = dir.path().join(format!("instance-{i}.log"));
        // Instance 0 reaches the database through the proxy, when there is one.
        let url = match (i, cut) {
            (0, Some((_, proxied))) => proxied,
            _ => database_url,
        };
        // The forwarder's INFO lines too (recoveries, takeovers, marks that
        // matched nothing): what a failed run is read by.
        let env = [("TRUSTMSG_LOG", "warn,trustmsg::forwarder=info")];
        services.push(eos_instance(url, &kafka, &flags, &log, &env).await);
    }
    let (token, _) = services[0]
        .register(
            "shop",
            crate::harness::settings(trustmsg_tests::UNREACHABLE_VERIFY_URL, 3_600_000, 3),
        )
        .await;
    let told = Arc::new(Told::default());
    let stop = Arc::new(AtomicBool::new(false));
    let urls = services.iter().map(ServiceProcess::url).collect();
    let mut load = run_orders(urls, token, topic.clone(), 8, told.clone(), stop.clone());

    let began = Instant::now();
    for cycle in 0..cycles {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let victim = cycle % 2;
        match cycle % 5 {
            0 => {
                eprintln!("campaign: kill -9 of instance {victim}, restarted");
                services[victim].restart().await;
            }
            1 => {
                eprintln!("campaign: instance {victim} stopped past its lease, then woken");
                services[victim].pause();
                tokio::time::sleep(Duration::from_secs(6)).await;
                services[victim].resume();
            }
            2 => {
                // A crash, not a controlled shutdown: the only broker of
                // topics with one replica, shut down cleanly, takes the
                // partitions of a commit it has just acknowledged for
                // deleted and skips their markers (operations.md).
                eprintln!("campaign: the broker killed (kill -9) and restarted");
                kafka.kill();
                tokio::time::sleep(Duration::from_secs(1)).await;
                kafka.restart();
            }
            3 => {
                // Cut off from every client, as a partition would: nothing
                // answers and nothing closes, past the send timeout (3 s).
                eprintln!("campaign: the broker frozen (SIGSTOP) for 5 s");
                let pid = std::fs::read_to_string(kafka.dir().join("pid")).unwrap();
                let signal = |s: &str| {
                    std::process::Command::new("kill")
                        .args([s, pid.trim()])
                        .status()
                        .unwrap()
                };
                signal("-STOP");
                tokio::time::sleep(Duration::from_secs(5)).await;
                signal("-CONT");
            }
            _ => match cut {
                Some((proxy, _)) => {
                    eprintln!("campaign: instance 0 cut off from its database for 6 s");
                    proxy.hang();
                    tokio::time::sleep(Duration::from_secs(6)).await;
                    proxy.restore();
                }
                None => {
                    eprintln!("campaign: kill -9 of instance {victim}, restarted");
                    services[victim].restart().await;
                }
            },
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    while load.join_next().await.is_some() {}
    let loaded = began.elapsed();

    let url = trustmsg::store::DatabaseUrl::parse(database_url).unwrap();
    let store = trustmsg::store::connect(&url).await.unwrap();
    let acknowledged = told.acknowledged.lock().unwrap().clone();
    let prepared = told.prepared.load(Ordering::Relaxed);
    let keys = told.tried.lock().unwrap().clone();
    let log = dir.path().join("instance-0.log");
    let within = (Instant::now(), Duration::from_secs(60));
    let (committed_now, _) = all_sent(&store, &keys, 0, within, &log).await;
    // Read in a task of its own: a read that cannot get past a transaction
    // left open (the sentinels not read) keeps the logs and the broker's
    // data too before it fails the test.
    let read = {
        let (bootstrap, topic) = (kafka.bootstrap().to_string(), topic.clone());
        tokio::spawn(async move { committed_copies(&bootstrap, &topic).await }).await
    };
    let copies = match read {
        Ok(copies) => copies,
        Err(e) => {
            keep_for_a_look(&kafka, dir);
            std::panic::resume_unwind(e.into_panic());
        }
    };
    let twice: Vec<_> = copies.iter().filter(|(_, n)| **n > 1).collect();
    let wrong: Vec<_> = copies
        .keys()
        .filter(|id| !committed_now.contains_key(id))
        .collect();
    let mut lost = Vec::new();
    for key in &acknowledged {
        let m = store.find_message("shop", key).await.unwrap().unwrap();
        if !copies.contains_key(&m.id) {
            lost.push(key.clone());
        }
    }
    eprintln!(
        "campaign: {cycles} faults in {loaded:?}; {prepared} prepared, {} acknowledged, {} \
         committed, {} in Kafka (read_committed): lost {}, wrong {}, duplicates {}",
        acknowledged.len(),
        committed_now.len(),
        copies.len(),
        lost.len(),
        wrong.len(),
        twice.len()
    );
    if !(lost.is_empty() && wrong.is_empty() && twice.is_empty()) {
        // Where each lost message was said to be.
        for key in &lost {
            let m = store.find_message("shop", key).await.unwrap().unwrap();
            eprintln!(
                "campaign: lost {key}: id {}, {:?} at partition {:?} offset {:?}, sent at {:?}",
                m.id, m.send_status, m.kafka_partition, m.kafka_offset, m.sent_at
            );
        }
        keep_for_a_look(&kafka, dir);
    }
    assert!(lost.is_empty(), "lost: {lost:?}");
    assert!(wrong.is_empty(), "in Kafka, not committed: {wrong:?}");
    assert!(twice.is_empty(), "sent twice: {twice:?}");
    assert_eq!(
        copies.len(),
        committed_now.len(),
        "every committed message once"
    );
    for mut s in services {
        s.kill_9();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn under_kills_zombies_and_a_broker_restart_each_message_is_seen_once_on_mariadb() {
    let db = TestDb::create().await;
    let proxy = DbProxy::start().await;
    let proxied = proxy.url_of(&db);
    the_campaign(&db.url, Some((&proxy, &proxied))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn under_kills_zombies_and_a_broker_restart_each_message_is_seen_once_on_postgres() {
    let db = PgTestDb::create().await;
    the_campaign(&db.url, None).await;
}

/// `/readyz`'s status and body, or None while nothing answers.
async fn readyz(service: &ServiceProcess) -> Option<(u16, String)> {
    let answer = service
        .http_client()
        .get(format!("{}/readyz", service.url()))
        .send()
        .await
        .ok()?;
    let status = answer.status().as_u16();
    Some((status, answer.text().await.unwrap_or_default()))
}

#[tokio::test]
async fn an_instance_is_ready_only_once_it_has_fenced_its_predecessor_and_taken_back_its_claims() {
    let db = TestDb::create().await;
    let kafka = RealKafka::start();
    let topic = unique("e2e-eos-ready");
    kafka.stop();
    let flags = eos_flags(&topic, &format!("{topic}-progress"), false);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut service = ServiceProcess::start_unready(&db.url, kafka.bootstrap(), &flags);

    // The broker is down: the API answers, and is not ready, for as long
    // as that lasts.
    let answered = Instant::now() + Duration::from_secs(30);
    while readyz(&service).await.is_none() {
        assert!(Instant::now() < answered, "the service never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let down = Instant::now();
    while down.elapsed() < Duration::from_secs(3) {
        let (status, body) = readyz(&service).await.expect("it answers");
        assert_eq!(status, 503, "ready with its broker down: {body}");
        assert!(
            body.contains("starting: forwarder (exactly once"),
            "the body names what it waits for: {body}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    kafka.restart();
    let back = Instant::now();
    loop {
        match readyz(&service).await {
            Some((200, _)) => break,
            other => assert!(
                back.elapsed() < Duration::from_secs(60),
                "not ready 60 s after the broker came back: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("ready {:?} after the broker came back", back.elapsed());
    service.kill_9();
}

async fn ordered_keys_in_commit_order_and_a_send_now_once_each(database_url: &str) {
    const KEYS: usize = 6;
    const PER_KEY: usize = 8;
    let kafka = RealKafka::shared();
    let topic = unique(&format!("e2e-eos-ordered-{}", &database_url[..5]));
    kafka.create_topic(&topic, 3).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("trustmsg.log");
    let flags = eos_flags(&format!("{topic}-i"), &format!("{topic}-progress"), false);
    let service = eos_instance(database_url, &kafka, &flags, &log, &[]).await;
    let mut ordered =
        crate::harness::settings(trustmsg_tests::UNREACHABLE_VERIFY_URL, 3_600_000, 3);
    ordered["ordered"] = serde_json::json!(true);
    let (token, _) = service.register("shop", ordered).await;
    let producer = trustmsg_client::Producer::new(&service.url(), "shop", token).unwrap();

    // Each key's messages committed one after another, the keys at once.
    let commits = (0..KEYS).map(|k| {
        let producer = producer.clone();
        let topic = topic.clone();
        async move {
            let mut ids = Vec::new();
            for i in 0..PER_KEY {
                let key = format!("order-{k}-{i}");
                let m = Message::new(&key, &topic, format!(r#"{{"n":{i}}}"#)).key(format!("k{k}"));
                ids.push(crate::harness::commit(&producer, &m).await);
            }
            (format!("k{k}"), ids)
        }
    });
    let commit_order: BTreeMap<String, Vec<u64>> = futures::future::join_all(commits)
        .await
        .into_iter()
        .collect();
    let keys: Vec<String> = (0..KEYS)
        .flat_map(|k| (0..PER_KEY).map(move |i| format!("order-{k}-{i}")))
        .collect();
    let url = trustmsg::store::DatabaseUrl::parse(database_url).unwrap();
    let store = trustmsg::store::connect(&url).await.unwrap();
    all_sent(
        &store,
        &keys,
        keys.len(),
        (Instant::now(), Duration::from_secs(30)),
        &log,
    )
    .await;

    let mut records = committed_records_in(kafka.bootstrap(), &topic).await;
    records.sort_by_key(|r| (r.partition, r.offset));
    let mut in_log: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for r in &records {
        let key = String::from_utf8(r.key.clone().unwrap()).unwrap();
        in_log.entry(key).or_default().push(id_of(r));
    }
    assert_eq!(
        in_log, commit_order,
        "each key in commit order, each message once"
    );

    // A message delayed by an hour, sent now by an operator: once, and
    // nothing else again.
    let later = producer
        .prepare(&Message::new("later", &topic, "l").deliver_after(Duration::from_secs(3600)))
        .await
        .unwrap();
    producer.commit("later").await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert!(
        !committed_copies(kafka.bootstrap(), &topic)
            .await
            .contains_key(&later.id),
        "delayed by an hour"
    );
    let (status, body) = service
        .admin(
            reqwest::Method::POST,
            &format!("/v1/admin/messages/{}/send-now", later.id),
            Some(&serde_json::json!({"reason": "the customer is waiting"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let began = Instant::now();
    loop {
        let copies = committed_copies(kafka.bootstrap(), &topic).await;
        if copies.contains_key(&later.id) {
            let twice: Vec<_> = copies.iter().filter(|(_, n)| **n != 1).collect();
            assert!(twice.is_empty(), "each message once: {twice:?}");
            assert_eq!(copies.len(), KEYS * PER_KEY + 1);
            break;
        }
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "sent within 30 s of the send-now\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut keys = keys;
    keys.push("later".into());
    all_sent(
        &store,
        &keys,
        keys.len(),
        (Instant::now(), Duration::from_secs(30)),
        &log,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_keys_in_commit_order_and_a_delayed_message_sent_now_each_once_on_mariadb() {
    let db = TestDb::create().await;
    ordered_keys_in_commit_order_and_a_send_now_once_each(&db.url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_keys_in_commit_order_and_a_delayed_message_sent_now_each_once_on_postgres() {
    let db = PgTestDb::create().await;
    ordered_keys_in_commit_order_and_a_send_now_once_each(&db.url).await;
}
