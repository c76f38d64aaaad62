//! The Kafka way in (issue 29) under faults, against the real binary: "a
//! record's offset is committed only after what it did is durable in the
//! database. kill -9 at any point, a rebalance between several instances, or
//! the database going away mid-batch loses no record and applies none twice
//! in a way anyone can see."
//!
//! Each test streams signed prepare, commit and rollback records (every
//! tenth message rolled back) to a 3-partition submit topic while the fault
//! happens, then checks the ledger a user sees: one row per message in its
//! final state, each committed message's payload in the target topic byte
//! for byte (the forwarder may send a record twice, so distinct message ids
//! are counted) and no rolled-back one there, exactly one decision in each
//! message's audit trail, by `kafka`, and an empty dead-letter topic (a
//! replayed record is the same message or an already taken decision, never
//! a dead letter; an unreachable database is waited out, never
//! dead-lettered).
//!
//! A kill is aimed, not timed: the service is frozen (SIGSTOP) until it is
//! caught with records applied whose offsets the group has not committed
//! (those must be read again), and killed while frozen; every freeze also
//! checks the guarantee directly, that no committed offset is ahead of what
//! the database holds.
//!
//! The consumer's `session.timeout.ms` is lowered to 6 s (through
//! `--kafka-config`) so that the group notices a killed member in seconds,
//! not the default 45 s, and `--send-lease` to 5 s so that what a killed
//! instance was sending is sent again soon; nothing else is changed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::MySqlPool;
use tokio::task::JoinHandle;
use trustmsg_tests::kafka::{MockKafka, TopicReader};
use trustmsg_tests::submit::{
    assert_nothing_dead_lettered, committed_offsets, Submission, Submitter,
};
use trustmsg_tests::{eventually, within, DbProxy, ServiceProcess, TestDb, UNREACHABLE_VERIFY_URL};
use trustmsg_verify_api::submit::Op;

use crate::harness::{settings, statuses};

const SUBMIT: &str = "e2e.faults";
const DLQ: &str = "e2e.faults.dlq";
const ORDERS: &str = "orders";
const PARTITIONS: i32 = 3;
/// `--submit-group`'s default.
const GROUP: &str = "trustmsg";

/// Every tenth message is rolled back, the others committed.
fn rolled_back(i: usize) -> bool {
    i.is_multiple_of(10)
}

fn message_key(i: usize) -> String {
    format!("m-{i:04}")
}

/// Not UTF-8, so a payload changed on the way (re-encoded, trimmed) shows.
fn payload(i: usize) -> Vec<u8> {
    let mut p = format!("payload {i} ").into_bytes();
    p.extend_from_slice(&[0x00, 0xff, 0xfe, (i % 256) as u8, b' ']);
    p
}

/// The service's flags: small batches (many offset commits to land a kill
/// between), a group that notices a dead member within seconds, and send
/// claims that a killed instance leaves behind for seconds, not a minute.
fn serve_flags<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut flags = vec![
        "--submit-topic",
        SUBMIT,
        "--submit-batch",
        "50",
        "--kafka-config",
        "session.timeout.ms=6000,heartbeat.interval.ms=500",
        "--sweep-interval",
        "200ms",
        "--backlog-interval",
        "200ms",
        "--kafka-message-timeout",
        "3s",
        "--send-lease",
        "5s",
    ];
    flags.extend_from_slice(extra);
    flags
}

/// The cluster: the submit topic, the target topic, and the dead-letter
/// topic with one partition.
fn kafka() -> MockKafka {
    let kafka = MockKafka::start(1);
    kafka.create_topic(SUBMIT, PARTITIONS);
    kafka.create_topic(ORDERS, 3);
    kafka.create_topic(DLQ, 1);
    kafka
}

/// A producer that may publish to `orders` only, never checked back.
fn shop_settings() -> Value {
    let mut s = settings(UNREACHABLE_VERIFY_URL, 3_600_000, 3);
    s["topics"] = json!([ORDERS]);
    s
}

/// One submitted record: message `i`'s `op`, where Kafka put it.
#[derive(Debug, Clone, Copy)]
struct Sent {
    i: usize,
    op: Op,
    partition: i32,
    offset: i64,
}

/// The records submitted so far, in the order submitted.
type Log = Arc<Mutex<Vec<Sent>>>;

/// `shop` registered through `service`, and `n` of its messages being
/// submitted one every `pace` ([`submit_stream`]): its submitter, the log
/// of what was submitted, and the stream.
async fn shop_submitting(
    service: &ServiceProcess,
    bootstrap: &str,
    n: usize,
    pace: Duration,
) -> (Submitter, Log, JoinHandle<BTreeSet<i32>>) {
    let (_, secret) = service.register("shop", shop_settings()).await;
    let producer = Submitter::new(bootstrap, SUBMIT, "shop", &secret);
    let log = Log::default();
    let stream = submit_stream(
        producer.with_identity("shop", &secret),
        n,
        pace,
        log.clone(),
    );
    (producer, log, stream)
}

/// Submits messages `0..n` (prepare, then commit or rollback, keyed by the
/// message key, so by partition of the key), one every `pace`, noting each
/// record in `log`; returns the submit partitions used. Kafka alone takes
/// them: the service may be down.
fn submit_stream(
    producer: Submitter,
    n: usize,
    pace: Duration,
    log: Log,
) -> JoinHandle<BTreeSet<i32>> {
    tokio::spawn(async move {
        let mut partitions = BTreeSet::new();
        for i in 0..n {
            let key = message_key(i);
            let value = payload(i);
            let (partition, offset) = producer
                .prepare(
                    &key,
                    Submission {
                        topic: ORDERS,
                        key: Some(&key),
                        headers: &[("content-type", "application/octet-stream")],
                        value: &value,
                        partition: None,
                    },
                )
                .await;
            log.lock().unwrap().push(Sent {
                i,
                op: Op::Prepare,
                partition,
                offset,
            });
            partitions.insert(partition);
            let (op, (partition, offset)) = if rolled_back(i) {
                (Op::Rollback, producer.rollback(&key).await)
            } else {
                (Op::Commit, producer.commit(&key).await)
            };
            log.lock().unwrap().push(Sent {
                i,
                op,
                partition,
                offset,
            });
            tokio::time::sleep(pace).await;
        }
        partitions
    })
}

/// Freezes `service` (SIGSTOP) until it is caught in the middle of a batch:
/// records whose effect is in the database while the group has not
/// committed their offsets (what a kill now makes the next consumer read
/// again). Returns how many (at least one); fails the test when none is
/// caught within 60 s, frozen: a kill that is not mid-batch does not test
/// what these tests say. At each freeze, asserts the guarantee itself: no
/// committed offset is ahead of what the database holds.
async fn freeze_mid_batch(
    service: &ServiceProcess,
    pool: &MySqlPool,
    bootstrap: &str,
    log: &Log,
) -> usize {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        service.pause();
        let committed = committed_offsets(bootstrap, GROUP, SUBMIT, PARTITIONS);
        let st = statuses(pool, "shop").await;
        let sent = log.lock().unwrap().clone();
        let (mut ahead, mut lost) = (0, Vec::new());
        for s in &sent {
            let row = st.get(&message_key(s.i));
            let applied = match s.op {
                Op::Prepare => row.is_some(),
                Op::Commit => row.is_some_and(|(_, st, _)| st == "COMMITTED"),
                Op::Rollback => row.is_some_and(|(_, st, _)| st == "ROLLED_BACK"),
            };
            let below = committed.get(&s.partition).is_some_and(|c| s.offset < *c);
            match (below, applied) {
                (false, true) => ahead += 1,
                (true, false) => lost.push(*s),
                _ => {}
            }
        }
        assert!(
            lost.is_empty(),
            "offsets committed ({committed:?}) before their records were applied: {lost:?}"
        );
        if ahead > 0 {
            return ahead;
        }
        assert!(
            Instant::now() < deadline,
            "no batch caught in flight within 60 s ({} records submitted, {} rows): \
             the kill would not be mid-batch",
            sent.len(),
            st.len()
        );
        service.resume();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// How many messages of `shop` have a row by now.
async fn rows(pool: &MySqlPool) -> usize {
    statuses(pool, "shop").await.len()
}

/// Waits (at most 120 s) until `at_least` messages have a row.
async fn until_rows(pool: &MySqlPool, at_least: usize) {
    eventually(120, &format!("{at_least} messages applied"), async || {
        rows(pool).await >= at_least
    })
    .await;
}

/// What [`assert_ledger`] found beyond its assertions, for the report.
#[derive(Debug)]
struct Ledger {
    committed: usize,
    rolled_back: usize,
    /// Records of the target topic that repeat a message id (the
    /// forwarder's at-least-once).
    forwarded_twice: usize,
}

impl std::fmt::Display for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} committed, {} rolled back, 0 lost, 0 wrong, {} forwarded twice",
            self.committed, self.rolled_back, self.forwarded_twice
        )
    }
}

/// The ledger after `0..n` were submitted: no message lost, none wrong, each
/// decided once by `kafka`, each committed payload in `orders` byte for byte.
async fn assert_ledger(
    service: &ServiceProcess,
    pool: &MySqlPool,
    orders: &mut TopicReader,
    n: usize,
) -> Ledger {
    let want = |i: usize| {
        if rolled_back(i) {
            ("ROLLED_BACK", None)
        } else {
            ("COMMITTED", Some("SENT"))
        }
    };
    // What is still not final after 120 s is reported as lost or wrong below.
    within(120, async || {
        let st = statuses(pool, "shop").await;
        (0..n).all(|i| {
            st.get(&message_key(i))
                .is_some_and(|(_, s, ss)| (s.as_str(), ss.as_deref()) == want(i))
        })
    })
    .await;
    let st = statuses(pool, "shop").await;
    let (mut lost, mut wrong) = (Vec::new(), Vec::new());
    for i in 0..n {
        let key = message_key(i);
        match st.get(&key) {
            None => lost.push(key),
            Some((_, s, ss)) if (s.as_str(), ss.as_deref()) != want(i) => {
                wrong.push(format!("{key}: {s} {ss:?}, want {:?}", want(i)))
            }
            Some(_) => {}
        }
    }
    assert!(lost.is_empty(), "lost: {lost:?}");
    assert!(wrong.is_empty(), "wrong: {wrong:?}");
    let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM messages WHERE biz_id = 'shop'")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(count, n as i64, "one row per message key");

    let index: BTreeMap<u64, usize> = (0..n).map(|i| (st[&message_key(i)].0, i)).collect();
    let committed: BTreeSet<u64> = (0..n)
        .filter(|i| !rolled_back(*i))
        .map(|i| st[&message_key(i)].0)
        .collect();
    let all_read = within(60, async || {
        let read: BTreeSet<u64> = orders.poll().iter().map(|r| r.message_id).collect();
        committed.is_subset(&read)
    })
    .await;
    let read: BTreeSet<u64> = orders.poll().iter().map(|r| r.message_id).collect();
    assert!(
        all_read,
        "committed but never in {ORDERS}: {:?}",
        committed
            .difference(&read)
            .map(|id| message_key(index[id]))
            .collect::<Vec<_>>()
    );
    for r in orders.poll() {
        let i = *index
            .get(&r.message_id)
            .unwrap_or_else(|| panic!("a record of no submitted message: {r:?}"));
        assert!(
            !rolled_back(i),
            "{} was rolled back, yet published",
            message_key(i)
        );
        assert_eq!(
            r.payload.as_deref(),
            Some(&payload(i)[..]),
            "{} byte for byte",
            message_key(i)
        );
        assert_eq!(r.key.as_deref(), Some(message_key(i).as_bytes()));
    }
    assert_eq!(read, committed, "exactly the committed messages published");
    let forwarded_twice = orders.poll().len() - read.len();

    // Each message decided once, by the Kafka way in: a replayed decision
    // must not have written a second audit row.
    let mut trails = Vec::new();
    for (id, i) in &index {
        let body = service.admin_get(&format!("/v1/admin/messages/{id}")).await;
        let decisions: Vec<&Value> = body["audit"]
            .as_array()
            .unwrap_or_else(|| panic!("an audit trail: {body}"))
            .iter()
            .filter(|a| a["action"] == "commit" || a["action"] == "rollback")
            .collect();
        let action = if rolled_back(*i) {
            "rollback"
        } else {
            "commit"
        };
        let once = decisions.len() == 1
            && decisions[0]["action"] == action
            && decisions[0]["actor"] == "kafka";
        if !once {
            trails.push(format!("{}: {}", message_key(*i), body["audit"]));
        }
    }
    assert!(
        trails.is_empty(),
        "not exactly one decision by kafka: {trails:#?}"
    );
    Ledger {
        committed: committed.len(),
        rolled_back: n - committed.len(),
        forwarded_twice,
    }
}

/// How many lines of the service's log (appended across restarts) hold
/// one of `what`.
fn logged(log: &Path, what: &[&str]) -> usize {
    std::fs::read_to_string(log).map_or(0, |l| {
        l.lines()
            .filter(|l| what.iter().any(|w| l.contains(w)))
            .count()
    })
}

/// What the submit path logs when the database does not take a batch.
const SUBMIT_RETRIES: &[&str] = &[
    "did not take submitted records",
    "registry is unavailable",
    "could not be applied",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_three_times_mid_batch_loses_no_submitted_record_and_applies_none_twice() {
    const N: usize = 400;
    let db = TestDb::create().await;
    let kafka = kafka();
    let mut orders = TopicReader::new(kafka.bootstrap(), ORDERS);
    let mut service = ServiceProcess::start(&db, kafka.bootstrap(), &serve_flags(&[])).await;
    let pool = db.pool().await;
    let (producer, log, stream) =
        shop_submitting(&service, kafka.bootstrap(), N, Duration::from_millis(10)).await;
    // Killed three times, each caught (frozen) with a batch applied whose
    // offsets are not committed yet: those records are read again.
    let t0 = Instant::now();
    let mut kills = Vec::new();
    for quarter in 1..=3 {
        until_rows(&pool, N * quarter / 4).await;
        let again = freeze_mid_batch(&service, &pool, kafka.bootstrap(), &log).await;
        service.kill_9();
        kills.push((t0.elapsed(), rows(&pool).await, again));
        // Down for a while (the scenario, not a wait for something).
        tokio::time::sleep(Duration::from_millis(500)).await;
        service.restart().await;
    }
    let partitions = stream.await.unwrap();
    assert_eq!(partitions.len(), PARTITIONS as usize, "{partitions:?}");
    let read_again: usize = kills.iter().map(|(_, _, again)| again).sum();
    let ledger = assert_ledger(&service, &pool, &mut orders, N).await;
    assert_nothing_dead_lettered(kafka.bootstrap(), &producer, PARTITIONS, DLQ).await;
    eprintln!(
        "kill -9 at (time, rows, records applied but not committed): {kills:?}; \
         {read_again} records read again; {ledger}; done after {:?}",
        t0.elapsed()
    );
    drop(service);
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_of_instances_that_grows_shrinks_and_loses_one_to_kill_9_applies_each_record_once()
{
    const N: usize = 300;
    let db = TestDb::create().await;
    let kafka = kafka();
    let mut orders = TopicReader::new(kafka.bootstrap(), ORDERS);
    let flags = serve_flags(&[]);
    let mut a = ServiceProcess::start(&db, kafka.bootstrap(), &flags).await;
    let mut b = ServiceProcess::start(&db, kafka.bootstrap(), &flags).await;
    let pool = db.pool().await;
    let (producer, log, stream) =
        shop_submitting(&a, kafka.bootstrap(), N, Duration::from_millis(30)).await;
    // A third instance joins (A and B give partitions up to it), B leaves
    // gracefully, then A dies without a word, caught mid-batch if it can
    // be: C ends with every partition.
    let t0 = Instant::now();
    until_rows(&pool, N / 4).await;
    let c = ServiceProcess::start(&db, kafka.bootstrap(), &flags).await;
    let joined = (t0.elapsed(), rows(&pool).await);
    until_rows(&pool, N / 2).await;
    b.terminate_cleanly();
    let left = (t0.elapsed(), rows(&pool).await);
    // At once: half the records are still to come, seconds of load in which
    // to catch A mid-batch. Waiting for three quarters left a few seconds,
    // which a loaded machine spent before one batch was caught, and then
    // nothing was left in flight.
    let again = freeze_mid_batch(&a, &pool, kafka.bootstrap(), &log).await;
    a.kill_9();
    let killed = (t0.elapsed(), rows(&pool).await);
    let partitions = stream.await.unwrap();
    assert_eq!(partitions.len(), PARTITIONS as usize, "{partitions:?}");
    // Mid-batch, which freeze_mid_batch saw (records applied, offsets not
    // committed), not merely before every prepare had a row: under load the
    // last batch, commits still in flight, may follow the last prepare.
    assert!(again > 0, "A was killed mid-batch: {killed:?}");
    let ledger = assert_ledger(&c, &pool, &mut orders, N).await;
    assert_nothing_dead_lettered(kafka.bootstrap(), &producer, PARTITIONS, DLQ).await;
    eprintln!(
        "(time, rows) when C joined {joined:?}, B left {left:?}, A was killed {killed:?} \
         with {again} records applied but not committed; {ledger}; done after {:?}",
        t0.elapsed()
    );
    drop((a, b, c));
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_goes_away_mid_batch_is_waited_out_and_dead_letters_nothing() {
    const N: usize = 300;
    let db = TestDb::create().await;
    let proxy = DbProxy::start().await;
    let kafka = kafka();
    let mut orders = TopicReader::new(kafka.bootstrap(), ORDERS);
    let dir = tempfile::tempdir().unwrap();
    let service_log = dir.path().join("trustmsg.log");
    let service = ServiceProcess::start_logged(
        &proxy.url_of(&db),
        kafka.bootstrap(),
        &serve_flags(&[]),
        Some(service_log.clone()),
    )
    .await;
    let pool = db.pool().await;
    let (producer, log, stream) =
        shop_submitting(&service, kafka.bootstrap(), N, Duration::from_millis(30)).await;
    // A killed server (connections close, new ones are refused), then a
    // partition (nothing answers, nothing closes), each while batches are
    // being written.
    let t0 = Instant::now();
    until_rows(&pool, N / 4).await;
    proxy.refuse();
    let refused_at = rows(&pool).await;
    eventually(30, "the submit path meeting the cut database", async || {
        logged(&service_log, SUBMIT_RETRIES) > 0
    })
    .await;
    // Down for a while (the scenario, not a wait for something).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        rows(&pool).await,
        refused_at,
        "nothing written through a refused database"
    );
    proxy.restore();
    until_rows(&pool, N / 2).await;
    let retries_before = logged(&service_log, SUBMIT_RETRIES);
    let submitted_before = log.lock().unwrap().len();
    proxy.hang();
    // Hung until the submit path has met it: a batch it wrote was not
    // taken (its statements ran out of time) while records kept coming.
    eventually(
        60,
        "the submit path meeting the hung database",
        async || logged(&service_log, SUBMIT_RETRIES) > retries_before,
    )
    .await;
    // A commit the server had before the hang may have landed meanwhile;
    // from here on nothing may.
    let hung_at = rows(&pool).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        rows(&pool).await,
        hung_at,
        "nothing written through a hung database"
    );
    let submitted_during = log.lock().unwrap().len() - submitted_before;
    assert!(submitted_during > 0, "records kept coming while it hung");
    proxy.restore();
    let partitions = stream.await.unwrap();
    assert_eq!(partitions.len(), PARTITIONS as usize, "{partitions:?}");
    let ledger = assert_ledger(&service, &pool, &mut orders, N).await;
    assert_nothing_dead_lettered(kafka.bootstrap(), &producer, PARTITIONS, DLQ).await;
    eprintln!(
        "database refused at {refused_at} rows, hung at {hung_at}; {ledger}; done after {:?}",
        t0.elapsed()
    );
    drop(service);
    db.drop_db().await;
}
