//! The rig: a private MariaDB, three `trustmsg serve` processes, a Kafka
//! mock cluster with a consumer, an alert webhook, two check endpoints (one
//! answering from the producers' ledger unless told to misbehave, one that
//! never answers usefully) and the producers' load.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::json;
use sqlx::MySqlPool;
use tokio::task::JoinSet;
use trustmsg_client::{
    check_router, CheckRequest, Decision, Error, Message, MessageView, Producer,
};
use trustmsg_tests::kafka::{Consumed, MockKafka, TopicReader};
use trustmsg_tests::{deciders, fast_retry, AlertSink, Endpoint, PrivateMariaDb, ServiceProcess};

use crate::ledger::{Fate, Ledger, Local, Report};

const TOPIC: &str = "chaos";
const SHOP: &str = "shop";
const BROKEN: &str = "broken";
const INSTANCES: usize = 3;
/// Producer tasks, and the pause each takes between messages.
const WORKERS: usize = 4;
const PACE: Duration = Duration::from_millis(40);

/// `--kafka-message-timeout`, `--send-lease` and `--verify-lease` below: a
/// pause or an outage longer than these outlives every claim.
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(2);
const LEASES: Duration = Duration::from_secs(4);

const FLAGS: &[&str] = &[
    "--kafka-message-timeout",
    "2s",
    "--send-lease",
    "4s",
    "--sweep-interval",
    "200ms",
    "--send-backoff-base",
    "100ms",
    "--send-backoff-max",
    "1s",
    "--first-verify-after",
    "1s",
    "--verify-interval",
    "100ms",
    "--verify-backoff-base",
    "200ms",
    "--verify-backoff-max",
    "1s",
    "--verify-timeout",
    "1s",
    "--verify-timeout-max",
    "1s",
    "--verify-lease",
    "3s",
    "--request-timeout",
    "2s",
];

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Fault {
    KillInstance,
    PauseInstance,
    KillDatabase,
    BrokersDown,
    EndpointHangs,
    EndpointGarbage,
}

/// One cycle of each, in this order, over and over.
pub(crate) const FAULTS: [Fault; 6] = [
    Fault::KillInstance,
    Fault::PauseInstance,
    Fault::KillDatabase,
    Fault::BrokersDown,
    Fault::EndpointHangs,
    Fault::EndpointGarbage,
];

/// How the shop's check endpoint behaves.
const NORMAL: u8 = 0;
const HANG: u8 = 1;
const GARBAGE: u8 = 2;
const ERROR_500: u8 = 3;

pub(crate) struct Rig {
    db: PrivateMariaDb,
    kafka: MockKafka,
    reader: TopicReader,
    /// Every record read, by where it is in the topic (re-reading the same
    /// record is not a duplicate), with when it was first read.
    seen: BTreeMap<(i32, i64), Consumed>,
    alerts: AlertSink,
    services: Vec<ServiceProcess>,
    logs: Vec<PathBuf>,
    _log_dir: tempfile::TempDir,
    mode: Arc<AtomicU8>,
    shop_token: String,
    broken_token: String,
    ledger_endpoint: Arc<EndpointState>,
}

/// What the shop's check endpoint reads: the ledger it answers from, set
/// once the load starts.
#[derive(Default)]
struct EndpointState {
    ledger: std::sync::OnceLock<Arc<Ledger>>,
}

impl Rig {
    pub(crate) async fn start() -> Self {
        let db = PrivateMariaDb::start().await;
        let kafka = MockKafka::start(1);
        kafka.create_topic(TOPIC, 3);
        let reader = TopicReader::new(kafka.bootstrap(), TOPIC);
        let alerts = AlertSink::start().await;
        let log_dir = tempfile::tempdir().unwrap();
        let mut flags: Vec<String> = FLAGS.iter().map(|s| s.to_string()).collect();
        flags.extend(["--alert-webhook".to_string(), alerts.url()]);
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let url = db.url("chaos");
        let mut services = Vec::new();
        let mut logs = Vec::new();
        for i in 0..INSTANCES {
            let log = log_dir.path().join(format!("instance-{i}.log"));
            services.push(
                ServiceProcess::start_logged(&url, kafka.bootstrap(), &flags, Some(log.clone()))
                    .await,
            );
            logs.push(log);
        }

        let mode = Arc::new(AtomicU8::new(NORMAL));
        let ledger_endpoint = Arc::new(EndpointState::default());
        let shop = Endpoint::bind().await;
        let shop_url = shop.url(trustmsg_client::DEFAULT_CHECK_PATH);
        let (shop_token, shop_secret) = services[0]
            .register(
                SHOP,
                json!({"verify_url": shop_url, "first_verify_after_ms": 1000,
                       "max_verify_attempts": 60, "verify_timeout_ms": 1000}),
            )
            .await;
        let state = ledger_endpoint.clone();
        let answer = check_router(shop_secret, move |req: CheckRequest| {
            let state = state.clone();
            async move {
                let local = state
                    .ledger
                    .get()
                    .and_then(|l| l.answer_check(&req.message_key));
                Ok::<_, std::convert::Infallible>(match local {
                    Some(Local::Committed) => Decision::Commit,
                    Some(Local::RolledBack) => Decision::Rollback,
                    None => Decision::Unknown,
                })
            }
        });
        shop.serve(answer.layer(middleware::from_fn_with_state(mode.clone(), misbehave)));

        let broken = Endpoint::bind().await;
        let broken_url = broken.url("/check");
        let (broken_token, _) = services[0]
            .register(
                BROKEN,
                json!({"verify_url": broken_url, "first_verify_after_ms": 500,
                       "max_verify_attempts": 3, "verify_timeout_ms": 1000}),
            )
            .await;
        broken.serve(Router::new().fallback(|| async {
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the check endpoint is broken",
            )
        }));

        Self {
            db,
            kafka,
            reader,
            seen: BTreeMap::new(),
            alerts,
            services,
            logs,
            _log_dir: log_dir,
            mode,
            shop_token,
            broken_token,
            ledger_endpoint,
        }
    }

    /// Starts the producers: they run the protocol against all instances
    /// until [`Load::stop`]; the shop's check endpoint answers from `ledger`.
    pub(crate) fn start_load(&self, ledger: Arc<Ledger>) -> Load {
        let _ = self.ledger_endpoint.ledger.set(ledger.clone());
        let urls: Vec<String> = self.services.iter().map(ServiceProcess::url).collect();
        let shop: Vec<Producer> = urls
            .iter()
            .map(|u| {
                Producer::new(u, SHOP, self.shop_token.clone())
                    .unwrap()
                    .with_retry(fast_retry(1))
            })
            .collect();
        let broken: Vec<Producer> = urls
            .iter()
            .map(|u| {
                Producer::new(u, BROKEN, self.broken_token.clone())
                    .unwrap()
                    .with_retry(fast_retry(1))
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let next = Arc::new(AtomicU64::new(0));
        let mut tasks = JoinSet::new();
        for _ in 0..WORKERS {
            let (shop, broken, ledger) = (shop.clone(), broken.clone(), ledger.clone());
            let (stop, next) = (stop.clone(), next.clone());
            tasks.spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n % 50 == 49 {
                        one_unverifiable(&broken, n, &ledger).await;
                    } else {
                        one_message(&shop, n, &ledger).await;
                    }
                    tokio::time::sleep(PACE).await;
                }
            });
        }
        Load { stop, tasks }
    }

    /// Injects `fault`; `round` picks which instance it hits.
    pub(crate) async fn inject(&mut self, fault: Fault, round: usize) {
        let i = round % INSTANCES;
        match fault {
            Fault::KillInstance => {
                self.services[i].kill_9();
                tokio::time::sleep(Duration::from_secs(1)).await;
                self.services[i].restart().await;
            }
            Fault::PauseInstance => {
                self.services[i].pause();
                tokio::time::sleep(LEASES + Duration::from_secs(1)).await;
                self.services[i].resume();
            }
            Fault::KillDatabase => {
                self.db.kill_9();
                tokio::time::sleep(Duration::from_secs(2)).await;
                self.db.restart().await;
            }
            Fault::BrokersDown => {
                self.kafka.brokers_down();
                tokio::time::sleep(MESSAGE_TIMEOUT * 2 + Duration::from_secs(1)).await;
                self.kafka.brokers_up();
                // The test's own consumer does not always resume after the
                // mock cluster's outage: read on with a new one (records it
                // reads again are known by their offsets).
                self.take_in();
                self.reader = TopicReader::new(self.kafka.bootstrap(), TOPIC);
            }
            Fault::EndpointHangs => {
                self.mode.store(HANG, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_secs(3)).await;
                self.mode.store(NORMAL, Ordering::Relaxed);
            }
            Fault::EndpointGarbage => {
                self.mode.store(GARBAGE, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(1500)).await;
                self.mode.store(ERROR_500, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(1500)).await;
                self.mode.store(NORMAL, Ordering::Relaxed);
            }
        }
    }

    /// Waits until every message has reached its end (nothing PREPARED,
    /// nothing PENDING), reads what reached Kafka and the webhook, and
    /// judges it against the producers' ledger.
    pub(crate) async fn settle_and_judge(
        &mut self,
        ledger: &Ledger,
        windows: &[(Fault, Instant, Instant)],
    ) -> Report {
        let settle = Instant::now();
        let pool = MySqlPool::connect(&self.db.url("chaos")).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM messages WHERE status = 'PREPARED' \
                 OR (status = 'COMMITTED' AND send_status = 'PENDING')",
            )
            .fetch_one(&pool)
            .await
            .unwrap();
            if waiting == 0 {
                break;
            }
            if Instant::now() > deadline {
                eprintln!("chaos: {waiting} messages still waiting after 180 s");
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        // Stragglers (a paused instance's late resend) have time to show.
        self.reader.read_for(Duration::from_secs(3)).await;
        let settled = settle.elapsed();
        self.take_in();
        // Whatever the consumers missed: the topic read afresh.
        self.reader = TopicReader::new(self.kafka.bootstrap(), TOPIC);
        let mut count = usize::MAX;
        while self.reader.poll().len() != count {
            count = self.reader.records.len();
            self.reader.read_for(Duration::from_secs(2)).await;
        }
        let before = self.seen.len();
        self.take_in();
        eprintln!(
            "chaos: the topic holds {} records; {} were first read only by the last consumer",
            self.seen.len(),
            self.seen.len() - before
        );

        let rows: Vec<(Vec<u8>, u64, String, Option<String>)> = sqlx::query_as(
            "SELECT message_key, id, CAST(status AS CHAR), CAST(send_status AS CHAR) FROM messages",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        let rows: HashMap<String, (u64, String, Option<String>)> = rows
            .into_iter()
            .map(|(k, id, st, ss)| (String::from_utf8(k).unwrap(), (id, st, ss)))
            .collect();
        let decided_by = deciders(&pool, SHOP).await;
        pool.close().await;

        let mut report = Report::default();
        for (fault, _, _) in windows {
            report.count_fault(*fault);
        }
        report.records = self.seen.len();
        let mut by_id: BTreeMap<u64, Vec<&Consumed>> = BTreeMap::new();
        for r in self.seen.values() {
            by_id.entry(r.message_id).or_default().push(r);
        }
        let messages = ledger.messages();
        let mut known = std::collections::HashSet::new();
        let alerts = self.alerts.per_message();
        for (key, (id, fate)) in &messages {
            known.insert(*id);
            report.prepared += 1;
            match fate {
                Fate::AckedCommit => report.acked_commits += 1,
                Fate::AckedRollback => report.acked_rollbacks += 1,
                Fate::NeverDecided(Local::Committed) => report.check_back_commits += 1,
                Fate::NeverDecided(Local::RolledBack) => report.check_back_rollbacks += 1,
                Fate::Unverifiable => report.unverifiable += 1,
            }
            if matches!(fate, Fate::AckedCommit | Fate::AckedRollback) {
                let actors = decided_by.get(id).map_or(&[][..], Vec::as_slice);
                let own = actors == [format!("producer:{SHOP}")];
                let first = actors == ["verifier"] && ledger.checked_before_ack(key);
                if first {
                    report.check_back_first += 1;
                } else if !own {
                    report.not_own.push(format!("{key}: decided by {actors:?}"));
                }
            }
            let got = by_id.get(id).map_or(&[][..], Vec::as_slice);
            if fate.must_deliver() {
                if got.is_empty() {
                    report.lost.push(key.clone());
                } else {
                    report.delivered += 1;
                }
                for r in got {
                    let payload_ok = r.payload.as_deref() == Some(payload(key).as_bytes());
                    let key_ok = r.key.as_deref() == Some(key.as_bytes());
                    if !(payload_ok && key_ok) {
                        report.corrupted.push(key.clone());
                    }
                }
            } else if !got.is_empty() {
                report.wrong.push(key.clone());
            }
            let (status, send) = rows
                .get(key)
                .map(|(_, st, ss)| (st.as_str(), ss.as_deref()))
                .unwrap_or(("MISSING", None));
            let expected: (&str, Option<&str>) = match fate {
                f if f.must_deliver() => ("COMMITTED", Some("SENT")),
                Fate::Unverifiable => ("VERIFY_FAILED", None),
                _ => ("ROLLED_BACK", None),
            };
            if (status, send) != expected {
                report
                    .undecided
                    .push(format!("{key}: {status}/{send:?}, expected {expected:?}"));
            }
            let alerted = alerts.get(id).copied().unwrap_or(0);
            let should = usize::from(status == "VERIFY_FAILED" || send == Some("SEND_FAILED"));
            if alerted != should {
                report
                    .alerts_wrong
                    .push(format!("{key}: {alerted} alerts, {status}/{send:?}"));
            }
        }
        for (id, got) in &by_id {
            report.duplicates += got.len().saturating_sub(1);
            if !known.contains(id) {
                report.wrong.push(format!("unknown message id {id}"));
            }
            for r in got.iter().skip(1) {
                let fault = windows
                    .iter()
                    .find(|(_, from, to)| (*from..=*to).contains(&r.at))
                    .map_or("between faults".to_string(), |(f, _, _)| format!("{f:?}"));
                *report.duplicates_by_fault.entry(fault).or_default() += 1;
            }
        }
        report.verify_failed = rows
            .values()
            .filter(|(_, st, _)| st == "VERIFY_FAILED")
            .count();
        report.send_failed = rows
            .values()
            .filter(|(_, _, ss)| ss.as_deref() == Some("SEND_FAILED"))
            .count();
        report.alerts = self.alerts.alerts().len();
        report.alert_log_lines = self
            .logs
            .iter()
            .map(|p| {
                std::fs::read_to_string(p)
                    .unwrap_or_default()
                    .lines()
                    .filter(|l| l.contains("ALERT: message needs an operator"))
                    .count()
            })
            .sum();
        report.settle = settled;
        report
    }

    /// Moves what the current consumer read into `seen`.
    fn take_in(&mut self) {
        for r in self.reader.poll() {
            self.seen
                .entry((r.partition, r.offset))
                .or_insert_with(|| r.clone());
        }
    }

    pub(crate) async fn finish(self) {
        for mut s in self.services {
            s.kill_9();
        }
    }
}

/// The producers, stoppable.
pub(crate) struct Load {
    stop: Arc<AtomicBool>,
    tasks: JoinSet<()>,
}

impl Load {
    /// Lets each producer finish the message in hand, then stops them.
    pub(crate) async fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        while let Some(done) = self.tasks.join_next().await {
            done.expect("a producer task panicked");
        }
    }
}

fn payload(key: &str) -> String {
    format!("payload of {key}")
}

/// Calls `call` on instance after instance until one answers; a real
/// producer behind a load balancer does the same.
async fn answered<F, Fut>(
    producers: &[Producer],
    first: usize,
    what: &str,
    mut call: F,
) -> MessageView
where
    F: FnMut(Producer) -> Fut,
    Fut: std::future::Future<Output = Result<MessageView, Error>>,
{
    let deadline = Instant::now() + Duration::from_secs(120);
    for i in first.. {
        match call(producers[i % producers.len()].clone()).await {
            Ok(v) => return v,
            Err(e) if e.is_unavailable() => {
                assert!(
                    Instant::now() < deadline,
                    "{what}: no instance answered for 120 s: {e}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
    unreachable!("the loop returns or panics")
}

/// One message of the shop: prepare, the local transaction, then commit,
/// rollback, or (the producer "crashes") nothing.
async fn one_message(producers: &[Producer], n: u64, ledger: &Ledger) {
    let key = format!("k-{n}");
    let first = n as usize;
    let message = Message::new(key.clone(), TOPIC, payload(&key)).key(key.clone());
    let view = answered(producers, first, &key, |p| {
        let m = message.clone();
        async move { p.prepare(&m).await }
    })
    .await;
    match n % 20 {
        0..=11 => {
            ledger.local_done(&key, Local::Committed);
            let v = answered(producers, first + 1, &key, |p| {
                let k = key.clone();
                async move { p.commit(&k).await }
            })
            .await;
            assert_eq!(v.status, trustmsg_client::MessageStatus::Committed, "{key}");
            ledger.record(&key, view.id, Fate::AckedCommit);
        }
        12..=16 => {
            ledger.local_done(&key, Local::RolledBack);
            let v = answered(producers, first + 1, &key, |p| {
                let k = key.clone();
                async move { p.rollback(&k).await }
            })
            .await;
            assert_eq!(
                v.status,
                trustmsg_client::MessageStatus::RolledBack,
                "{key}"
            );
            ledger.record(&key, view.id, Fate::AckedRollback);
        }
        _ => {
            let local = if n.is_multiple_of(2) {
                Local::Committed
            } else {
                Local::RolledBack
            };
            ledger.local_done(&key, local);
            ledger.record(&key, view.id, Fate::NeverDecided(local));
        }
    }
}

/// One message of the producer whose check endpoint never answers usefully:
/// prepared and never decided, it must end VERIFY_FAILED with one alert.
async fn one_unverifiable(producers: &[Producer], n: u64, ledger: &Ledger) {
    let key = format!("b-{n}");
    let message = Message::new(key.clone(), TOPIC, payload(&key)).key(key.clone());
    let view = answered(producers, n as usize, &key, |p| {
        let m = message.clone();
        async move { p.prepare(&m).await }
    })
    .await;
    ledger.record(&key, view.id, Fate::Unverifiable);
}

/// The shop's check endpoint misbehaving on demand.
async fn misbehave(
    axum::extract::State(mode): axum::extract::State<Arc<AtomicU8>>,
    req: Request,
    next: Next,
) -> Response {
    match mode.load(Ordering::Relaxed) {
        HANG => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
        GARBAGE => (StatusCode::OK, "{\"decision\": \"commit\", garbage").into_response(),
        ERROR_500 => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        _ => next.run(req).await,
    }
}
