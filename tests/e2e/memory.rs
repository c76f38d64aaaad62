//! Memory stays bounded with large payloads (issue 27, item 5), against the
//! real binary: 600 messages of 900 kB are committed while the broker is
//! away, then the broker comes back. Every one must reach Kafka byte for
//! byte and be SENT (the mock broker keeps only the last 5 MB of a
//! partition, so every record is compared as it arrives, by a reader that
//! is reading before the service may send, over a link to the broker that
//! takes the service's records at 8 MiB/s, slow enough for the reader to
//! keep up; the payload budget is what holds the rest back meanwhile), and
//! the service's peak
//! resident memory (VmHWM) must stay
//! within 512 MiB, although the payloads add up to 540 MB: only the payload
//! budget's worth (`--payload-budget-mib`, 128 by default) may be held for
//! sending at once. Before the budget the peak was about 1 GB. The limit is
//! docs/operations.md's bound (the budget, what the allocators keep of freed
//! payloads, up to the budget again, the 8 prepares in flight, about
//! 100 MiB of process), with a budget to spare: peaks of 307 to 458 MiB were
//! measured here while compilers took the cores, as the allocators then give
//! freed memory back later. 400 MiB, the limit before, failed in CI at
//! 435 MiB.
//!
//! The same scenario again with the service's own deadlines on a machine
//! kept busy on purpose (issue 42): every state change of a 900 kB message
//! used to read its payload, so SENT marks missed their deadline, were given
//! up, and their messages were sent again and again. The tests here run alone
//! (`.config/nextest.toml`): they measure RSS, and that one loads every
//! core.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, Message as _, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use sqlx::MySqlPool;
use tokio::task::JoinHandle;
use trustmsg_client::{Message, Producer};
use trustmsg_tests::kafka::{consume, MockKafka};
use trustmsg_tests::{eventually, within, ServiceProcess, TestDb, UNREACHABLE_VERIFY_URL};
use trustmsg_verify_api::kafka_headers;

use crate::harness::settings;

const TOPIC: &str = "e2e-memory";
const MESSAGES: usize = 600;
const PAYLOAD: usize = 900_000;
const PEAK_LIMIT_MIB: u64 = 512;
const PARTITIONS: i32 = 6;

/// The payload of message `i`: bytes no other message has (every 8-byte
/// word carries `i` and its position), so a record that is cut, shifted or
/// swapped with another fails the comparison.
fn payload(i: usize) -> Vec<u8> {
    let mut p = Vec::with_capacity(PAYLOAD);
    let mut word = 0u64;
    while p.len() < PAYLOAD {
        let v = ((i as u64) << 40) ^ word.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        p.extend_from_slice(&v.to_le_bytes());
        word += 1;
    }
    p.truncate(PAYLOAD);
    p
}

fn key(i: usize) -> String {
    format!("big-{i:04}")
}

/// The service's peak resident set so far, in KiB (`VmHWM`).
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/<pid>/status")
}

/// How many messages are SENT now; said, with the time since the broker
/// came `back`, when it is not `last` (which it becomes).
async fn sent_since(pool: &MySqlPool, back: Instant, last: &mut i64) -> i64 {
    let now = sent(pool).await;
    if now != *last {
        eprintln!(
            "{:?} after the broker came back: {now} SENT",
            back.elapsed()
        );
        *last = now;
    }
    now
}

async fn sent(pool: &MySqlPool) -> i64 {
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM messages WHERE biz_id = 'shop' AND status = 'COMMITTED' \
         AND send_status = 'SENT'",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

/// The message id the sentinels carry (no message has it).
const SENTINEL: u64 = 0;

/// What the reader found: each record's place (partition, offset) by the
/// message id it carries, and what did not match its message.
#[derive(Debug, Default)]
struct Compared {
    places: BTreeMap<(i32, i64), u64>,
    sentinels: BTreeSet<i32>,
    wrong: Vec<String>,
}

/// Reads [`TOPIC`] from the beginning as records arrive and compares each
/// with message `index[id]`'s key and payload byte for byte, keeping only
/// the verdict (the payloads add up to 540 MB).
fn compare_as_read(
    bootstrap: &str,
    index: BTreeMap<u64, usize>,
) -> (Arc<Mutex<Compared>>, JoinHandle<()>) {
    let (mut rx, stop) = consume(bootstrap, TOPIC).expect("a reader of the topic");
    let compared = Arc::new(Mutex::new(Compared::default()));
    let out = compared.clone();
    let task = tokio::spawn(async move {
        let _stop_on_drop = StopOnDrop(stop);
        while let Some(r) = rx.recv().await {
            let mut c = out.lock().unwrap();
            if r.message_id == SENTINEL {
                c.sentinels.insert(r.partition);
                continue;
            }
            c.places.insert((r.partition, r.offset), r.message_id);
            let Some(&i) = index.get(&r.message_id) else {
                c.wrong
                    .push(format!("a record of no message: {}", r.message_id));
                continue;
            };
            if r.key.as_deref() != Some(key(i).as_bytes()) {
                c.wrong
                    .push(format!("message {}: key {:?}", r.message_id, r.key));
            }
            if r.payload.as_deref() != Some(payload(i).as_slice()) {
                c.wrong.push(format!(
                    "message {} at {}@{}: not its payload ({} bytes)",
                    r.message_id,
                    r.partition,
                    r.offset,
                    r.payload.as_ref().map_or(0, Vec::len)
                ));
            }
        }
    });
    (compared, task)
}

struct StopOnDrop(trustmsg_tests::kafka::StopFlag);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.set();
    }
}

/// Writes a sentinel (message id [`SENTINEL`]) to each partition, so that
/// the reader, once it has read them all, is known to read every partition.
async fn write_sentinels(bootstrap: &str) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    for p in 0..PARTITIONS {
        let headers = OwnedHeaders::new().insert(Header {
            key: kafka_headers::MESSAGE_ID,
            value: Some(&SENTINEL.to_string()),
        });
        let record = FutureRecord::<[u8], [u8]>::to(TOPIC)
            .partition(p)
            .headers(headers)
            .payload(b"sentinel");
        producer
            .send(record, Duration::from_secs(30))
            .await
            .map_err(|(e, _)| e)
            .expect("a sentinel written");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_payloads_committed_during_an_outage_are_all_sent_within_the_memory_budget() {
    let Outage {
        db: _db,
        pool,
        kafka,
        service,
        pid,
        ids,
    } = Outage::committed(
        PARTITIONS,
        &[
            "--kafka-message-timeout",
            "3s",
            // Longer than a send (3 s) and its SENT mark's deadline (30 s,
            // below) together: a claim that ran out while its mark was still
            // being written would be claimed and sent again, and that mark
            // would then match nothing.
            "--send-lease",
            "40s",
            "--sweep-interval",
            "200ms",
            "--send-backoff-base",
            "200ms",
            "--send-backoff-max",
            "1s",
            // 540 MB of payloads written through a 96 MiB redo log keep
            // InnoDB flushing for its checkpoints, and a statement may then
            // take seconds: a SENT mark cut off at the default 5 s deadline
            // is sent again after its lease, and the resends (more of the
            // same writes) can keep the database behind for minutes. This
            // test is about memory, so the workers' statements may wait.
            "--request-timeout",
            "30s",
        ],
    )
    .await;
    let during = peak_rss_kib(pid);

    // The reader reads every partition before the service may send, and the
    // service's records reach the broker no faster than the reader keeps
    // up: the mock drops a partition's oldest records past 5 MB, which a
    // reader that starts late or falls behind would never see.
    service.pause();
    kafka.come_back_empty();
    kafka.limit_upload(8 << 20);
    let index: BTreeMap<u64, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let (compared, reading) = compare_as_read(kafka.bootstrap(), index);
    write_sentinels(kafka.bootstrap()).await;
    eventually(30, "the reader at every partition", async || {
        compared.lock().unwrap().sentinels.len() == PARTITIONS as usize
    })
    .await;
    service.resume();
    let back = Instant::now();
    let mut last = -1;
    eventually(240, "all 600 SENT", async || {
        sent_since(&pool, back, &mut last).await == MESSAGES as i64
    })
    .await;
    eprintln!("broker back → all SENT: {:?}", back.elapsed());

    let peak = peak_rss_kib(pid);
    eprintln!(
        "trustmsg peak RSS: {} MiB after the commits, {} MiB after sending",
        during / 1024,
        peak / 1024
    );

    // Every send is one record (at least once: a timed-out send may have
    // reached the broker too), so the partitions hold at least 600, and each
    // row's recorded place is a distinct one among them.
    let places: Vec<(u64, i32, i64)> = sqlx::query_as(
        "SELECT id, kafka_partition, kafka_offset FROM messages WHERE biz_id = 'shop' ORDER BY id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let at: BTreeMap<(i32, i64), u64> = places.iter().map(|(id, p, o)| ((*p, *o), *id)).collect();
    assert_eq!(at.len(), MESSAGES, "two messages at one place");
    let all_read = within(60, async || {
        let c = compared.lock().unwrap();
        at.iter().all(|(place, id)| c.places.get(place) == Some(id))
    })
    .await;
    reading.abort();
    let (unread, wrong, read) = {
        let c = compared.lock().unwrap();
        let unread: Vec<_> = at
            .iter()
            .filter(|(place, id)| c.places.get(place) != Some(id))
            .collect();
        (unread, c.wrong.clone(), c.places.len())
    };
    assert!(
        all_read && unread.is_empty(),
        "{} recorded places not read with their message (the reader fell behind the mock's \
         5 MB, or the row names the wrong place): {:?}",
        unread.len(),
        &unread[..unread.len().min(10)]
    );
    assert!(wrong.is_empty(), "records unlike their message: {wrong:#?}");
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", kafka.bootstrap())
        .create()
        .unwrap();
    let mut records = 0;
    for partition in 0..PARTITIONS {
        let (_, high) = consumer
            .fetch_watermarks(TOPIC, partition, Duration::from_secs(10))
            .unwrap();
        records += high - 1; // the sentinel
    }
    assert!(
        records >= MESSAGES as i64,
        "only {records} records reached Kafka"
    );
    eprintln!(
        "{records} records in Kafka; {read} compared byte for byte as read, each of the \
         {MESSAGES} at its recorded place"
    );

    assert!(
        peak <= PEAK_LIMIT_MIB * 1024,
        "trustmsg's peak RSS was {} MiB, over {PEAK_LIMIT_MIB} MiB",
        peak / 1024
    );
    assert_eq!(
        service.metric("trustmsg_payload_budget_bytes", &[]).await,
        Some((128u64 << 20) as f64)
    );
    assert_eq!(
        service.metric("trustmsg_payload_inflight_bytes", &[]).await,
        Some(0.0),
        "every send finished, so no payload is held"
    );
}

/// Threads that spin until dropped: a machine busy with something else.
struct CpuHog {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl CpuHog {
    fn start(threads: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..threads)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Self { stop, threads }
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// How long the 600 may take to be SENT once the broker is back, with a
/// spinning thread per core beside the service. Measured on 2 cores shared
/// with other builds: 3.5 to 5.6 s (the whole test 20 to 35 s); the build
/// before issue 42 took 25 to 50 s here, or had 168 SENT after 15 s (and
/// 205 after 240 s on the machine of the issue), its SENT marks and claims
/// of big rows taking 1 to 5 s each.
const SENT_WITHIN_SECS: u64 = 20;

/// Partitions of the issue-42 topic. librdkafka's mock broker keeps only the
/// last 5 MB of a partition (five of these records), and the service sends
/// the 600 within seconds once the broker is back, faster than a consumer
/// reads them: spread over 1,000 partitions (a key's records share one),
/// no partition is expected to get a sixth record, so every record stays
/// to be counted. The test checks that it read as many records as the
/// partitions' ends add up to.
const MANY_PARTITIONS: i32 = 1000;

/// A consumer of the test's topic, assigned by hand (no group join to wait out).
fn reader(bootstrap: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "e2e-memory")
        .set("enable.auto.commit", "false")
        .set("max.partition.fetch.bytes", "4000000")
        .create()
        .unwrap()
}

/// How many records of each message id [`count_records`] has read so far.
type Counts = Arc<Mutex<BTreeMap<u64, usize>>>;

/// Counts the records of [`TOPIC`] by their `trustmsg-message-id` header, as
/// they arrive, from the beginning of every partition, on a thread of its
/// own, until the returned flag is set; keeps no payload.
fn count_records(bootstrap: &str) -> (Counts, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "e2e-memory-count")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", "1")
        .set("max.partition.fetch.bytes", "4000000")
        .create()
        .unwrap();
    let mut from_start = TopicPartitionList::new();
    for p in 0..MANY_PARTITIONS {
        from_start
            .add_partition_offset(TOPIC, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&from_start).unwrap();
    let (counts, stop): (Counts, Arc<AtomicBool>) = Default::default();
    let thread = {
        let (counts, stop) = (counts.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let Some(Ok(m)) = consumer.poll(Duration::from_millis(50)) else {
                    continue;
                };
                let id = m
                    .headers()
                    .and_then(|h| h.iter().find(|h| h.key == kafka_headers::MESSAGE_ID))
                    .and_then(|h| std::str::from_utf8(h.value?).ok()?.parse().ok())
                    .expect("every record carries its message id");
                *counts.lock().unwrap().entry(id).or_default() += 1;
            }
        })
    };
    (counts, stop, thread)
}

/// Issue 42, from outside: 600 messages of 900 kB committed while the
/// broker is away, then the broker back, with the service's own deadlines
/// and a lease shorter than the other test's (`--kafka-message-timeout 5s
/// --send-lease 10s --sweep-interval 300ms`, statements cut off after the
/// default 5 s) while a thread spins on every core for the whole test. Every
/// state change of such a message used to read its payload, so SENT marks of
/// big batches missed their 5 s deadline, were given up after five tries,
/// and their rows came back after their lease to be sent again: 205 of 600
/// were SENT after 240 s. Now all 600 are SENT within [`SENT_WITHIN_SECS`],
/// every record that reached Kafka was read and none more than twice (by
/// its `trustmsg-message-id` header), and the service's peak RSS stays
/// within [`PEAK_LIMIT_MIB`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_payloads_sent_on_a_busy_machine_are_marked_sent_without_being_sent_again_and_again()
{
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    let hog = CpuHog::start(cores);
    let Outage {
        db: _db,
        pool,
        kafka,
        service: _service,
        pid,
        ids,
    } = Outage::committed(
        MANY_PARTITIONS,
        &[
            "--kafka-message-timeout",
            "5s",
            "--send-lease",
            "10s",
            "--sweep-interval",
            "300ms",
        ],
    )
    .await;

    kafka.come_back_empty();
    let back = Instant::now();
    let (seen, stop, counting) = count_records(kafka.bootstrap());
    let (mut now, mut last) = (0, -1);
    let all_sent = within(SENT_WITHIN_SECS, async || {
        now = sent_since(&pool, back, &mut last).await;
        now == MESSAGES as i64
    })
    .await;
    let took = back.elapsed();
    drop(hog);
    let peak = peak_rss_kib(pid);
    eprintln!(
        "broker back → {now} of {MESSAGES} SENT in {took:?}; trustmsg peak RSS {} MiB",
        peak / 1024
    );
    assert!(
        all_sent,
        "only {now} of {MESSAGES} SENT {SENT_WITHIN_SECS} s after the broker came back"
    );

    // Every record that reached Kafka was read: as many as the partitions'
    // ends add up to.
    let ends = reader(kafka.bootstrap());
    let mut produced = 0;
    for partition in 0..MANY_PARTITIONS {
        let (_, high) = ends
            .fetch_watermarks(TOPIC, partition, Duration::from_secs(10))
            .unwrap();
        produced += high as usize;
    }
    let read = || seen.lock().unwrap().values().sum::<usize>();
    let complete = within(60, async || read() >= produced).await;
    stop.store(true, Ordering::Relaxed);
    counting.join().unwrap();
    let counts = seen.lock().unwrap().clone();
    assert!(
        complete,
        "{} records read of the {produced} in Kafka: the broker dropped some before they were read",
        read()
    );
    let resent: Vec<(&u64, &usize)> = counts.iter().filter(|(_, n)| **n > 1).collect();
    eprintln!(
        "{produced} records in Kafka for {MESSAGES} messages; {} sent twice or more",
        resent.len()
    );
    let missing: Vec<&u64> = ids.iter().filter(|id| !counts.contains_key(id)).collect();
    assert!(missing.is_empty(), "never in Kafka: {missing:?}");
    let too_often: Vec<_> = counts.iter().filter(|(_, n)| **n > 2).collect();
    assert!(
        too_often.is_empty(),
        "records in Kafka more than twice (message id, times): {too_often:?}"
    );
    assert!(
        peak <= PEAK_LIMIT_MIB * 1024,
        "trustmsg's peak RSS was {} MiB, over {PEAK_LIMIT_MIB} MiB",
        peak / 1024
    );
}

/// `(prepared rows, rows checked back at least once)` of `shop`.
async fn checked(pool: &MySqlPool) -> (i64, i64) {
    sqlx::query_as(
        "SELECT COUNT(*), CAST(COALESCE(SUM(verify_attempts > 0), 0) AS SIGNED) FROM messages \
         WHERE biz_id = 'shop' AND status = 'PREPARED'",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Check-back reads no payload: 300 PREPARED messages of 900 kB are all due
/// when the service starts; its verifier claims 256 of them at once and
/// checks them back (the producer is unreachable) while the service's peak
/// RSS stays far below what that claim would take (230 MB) if it read their
/// payloads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checking_back_large_messages_reads_none_of_their_payloads() {
    const PREPARED: usize = 300;
    const LIMIT_MIB: u64 = 150;
    let db = TestDb::create().await;
    let pool = db.pool().await;
    let kafka = MockKafka::start(1);
    let mut service = ServiceProcess::start(&db, kafka.bootstrap(), &[]).await;
    // Due 20 s after its prepare, by when this instance is gone.
    let (token, _) = service
        .register("shop", settings(UNREACHABLE_VERIFY_URL, 20_000, 15))
        .await;
    let producer = Producer::new(&service.url(), "shop", token).unwrap();
    let started = Instant::now();
    futures::stream::iter(0..PREPARED)
        .map(|i| {
            let producer = &producer;
            async move {
                let m = Message::from_bytes(key(i), TOPIC, &payload(i));
                producer.prepare(&m).await.unwrap();
            }
        })
        .buffer_unordered(8)
        .collect::<Vec<()>>()
        .await;
    service.kill_9();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "preparing took {:?}: some were checked back already",
        started.elapsed()
    );
    assert_eq!(checked(&pool).await, (PREPARED as i64, 0));

    // Every row is due when the service starts again: its verifier's first
    // claim takes a full batch (256).
    eventually(60, "every row due", async || {
        let due: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM messages WHERE next_verify_at <= UTC_TIMESTAMP(3)",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        due == PREPARED as i64
    })
    .await;
    service.restart().await;
    let pid = service.pid().expect("the service runs");
    // The first claim took a full batch; a producer's calls are limited
    // (8 at once to begin with), so the rest of it is given back and
    // claimed again in later rounds.
    eventually(60, "two rounds of check-backs", async || {
        checked(&pool).await.1 >= 16
    })
    .await;
    let peak = peak_rss_kib(pid);
    eprintln!("trustmsg peak RSS while checking back: {} MiB", peak / 1024);
    assert!(
        peak <= LIMIT_MIB * 1024,
        "trustmsg's peak RSS was {} MiB checking back, over {LIMIT_MIB} MiB",
        peak / 1024
    );
}

/// A service over a database of its own sending to a restartable broker
/// whose [`TOPIC`] has a given number of partitions, after
/// [`commit_during_an_outage`].
struct Outage {
    db: TestDb,
    pool: MySqlPool,
    kafka: MockKafka,
    service: ServiceProcess,
    /// The service's pid.
    pid: u32,
    /// The committed messages' ids, in key order.
    ids: Vec<u64>,
}

impl Outage {
    /// The service with `flags`, `partitions` partitions, and the messages
    /// committed while the broker was away.
    async fn committed(partitions: i32, flags: &[&str]) -> Self {
        let db = TestDb::create().await;
        let pool = db.pool().await;
        let kafka = MockKafka::start_restartable(1);
        kafka.create_topic(TOPIC, partitions);
        let service = ServiceProcess::start(&db, kafka.bootstrap(), flags).await;
        let pid = service.pid().expect("the service runs");
        let ids = commit_during_an_outage(&service, &kafka).await;
        Self {
            db,
            pool,
            kafka,
            service,
            pid,
            ids,
        }
    }
}

/// Registers the producer "shop", takes the broker away (losing its state)
/// and prepares and commits [`MESSAGES`] large messages, eight at a time;
/// returns their ids in key order.
async fn commit_during_an_outage(service: &ServiceProcess, kafka: &MockKafka) -> Vec<u64> {
    let (token, _) = service
        .register("shop", settings(UNREACHABLE_VERIFY_URL, 3_600_000, 3))
        .await;
    let producer = Producer::new(&service.url(), "shop", token).unwrap();

    kafka.lose_state();
    let started = Instant::now();
    let ids: Vec<u64> = futures::stream::iter(0..MESSAGES)
        .map(|i| {
            let producer = &producer;
            async move {
                let m = Message::from_bytes(key(i), TOPIC, &payload(i)).key(key(i));
                let view = producer.prepare(&m).await.unwrap();
                producer.commit(&key(i)).await.unwrap();
                view.id
            }
        })
        .buffered(8)
        .collect()
        .await;
    eprintln!(
        "{MESSAGES} committed while the broker was away: {:?}",
        started.elapsed()
    );
    ids
}
