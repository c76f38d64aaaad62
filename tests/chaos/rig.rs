//! The rig: a private MariaDB, three `trustmsg serve` processes, a Kafka
//! mock cluster with a consumer, an alert webhook, three check endpoints
//! (the shop's, answering from the producers' ledger unless told to
//! misbehave; one that never answers usefully; one of a producer with a
//! short timeout that holds its calls on demand), and the faults.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::json;
use sqlx::mysql::MySqlPoolOptions;
use sqlx::{MySqlPool, QueryBuilder};
use trustmsg_client::{check_router, CheckRequest, Decision, Producer};
use trustmsg_tests::kafka::{Consumed, MockKafka, RDKafkaApiKey, RDKafkaRespErr, TopicReader};
use trustmsg_tests::{
    deciders, fast_retry, AlertSink, Endpoint, PrivateMariaDb, ServiceProcess, ADMIN_TOKEN,
};

use crate::alerts::{self, Delivered};
use crate::ledger::{Fate, Ledger, Local, Report};
use crate::load::{self, payload, Clients, Load, TOPIC};
use crate::procnet;

const SHOP: &str = "shop";
const BROKEN: &str = "broken";
/// The producer whose check endpoint holds calls while a fault needs them
/// in flight; registered with a short timeout, as the was.
const HOLD: &str = "hold";
const INSTANCES: usize = 3;

/// `--kafka-message-timeout` and `--send-lease` below: a pause or an
/// outage longer than these outlives every send claim.
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(2);
const LEASES: Duration = Duration::from_secs(4);

/// `--verify-lease` and `--verify-timeout-max` keep their defaults (3 min,
/// 2 min): a global lease sized for the slowest producer anyone may
/// register, as in production. Check-back claims must not cost that long
/// after a crash.
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
    "--request-timeout",
    "2s",
];

/// The hold producer's registration, and how long its endpoint holds a
/// call while told to: less than the timeout (the call would answer), far
/// more than the rig needs to see the calls and kill their caller.
const HOLD_TIMEOUT_MS: u64 = 2000;
const HOLD_FOR: Duration = Duration::from_millis(1500);
/// Messages left to check-back in a `KillDuringCheckBack` burst, and
/// messages no check-back can decide in a `KillBeforeAlert` burst.
const HOLD_BURST: usize = 12;
const ALERT_BURST: usize = 6;
/// Sends Kafka refuses for good (an ACL) in a `KillBeforeAlert`.
const REFUSED_SENDS: usize = 3;
/// How long a `FreezeDatabase` keeps mariadbd stopped: past the request
/// deadline (`--request-timeout` 2 s) and the Kafka message timeout.
const FREEZE: Duration = Duration::from_secs(5);

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Fault {
    KillInstance,
    PauseInstance,
    KillDatabase,
    BrokersDown,
    EndpointHangs,
    EndpointGarbage,
    KillDuringCheckBack,
    KillBeforeAlert,
    FreezeDatabase,
}

/// One cycle of each, in this order, over and over.
pub(crate) const FAULTS: [Fault; 9] = [
    Fault::KillInstance,
    Fault::PauseInstance,
    Fault::KillDatabase,
    Fault::BrokersDown,
    Fault::EndpointHangs,
    Fault::EndpointGarbage,
    Fault::KillDuringCheckBack,
    Fault::KillBeforeAlert,
    Fault::FreezeDatabase,
];

/// How the shop's check endpoint behaves.
const NORMAL: u8 = 0;
const HANG: u8 = 1;
const GARBAGE: u8 = 2;
const ERROR_500: u8 = 3;

pub(crate) struct Rig {
    db: PrivateMariaDb,
    /// The rig's own connections to the campaign's database (what it looks
    /// at to know a fault has done its work, and to judge).
    pub(crate) pool: MySqlPool,
    kafka: MockKafka,
    reader: TopicReader,
    /// Every record read, by where it is in the topic (re-reading the same
    /// record is not a duplicate), with when it was first read.
    seen: BTreeMap<(i32, i64), Consumed>,
    pub(crate) alerts: AlertSink,
    services: Vec<ServiceProcess>,
    logs: Vec<PathBuf>,
    _log_dir: tempfile::TempDir,
    mode: Arc<AtomicU8>,
    shop: Clients,
    broken: Clients,
    hold: Clients,
    held: Arc<Held>,
    hold_addr: SocketAddr,
    ledger_endpoint: Arc<EndpointState>,
}

/// What the ledger's check endpoints read: the ledger they answer from, set
/// once the load starts.
#[derive(Default)]
struct EndpointState {
    ledger: std::sync::OnceLock<Arc<Ledger>>,
}

/// The hold endpoint's calls: whether to hold them, and the peer address of
/// each call held right now.
#[derive(Default)]
struct Held {
    holding: AtomicBool,
    calls: Mutex<Vec<SocketAddr>>,
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
        let pool = MySqlPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(5))
            .connect(&url)
            .await
            .unwrap();

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
        shop.serve(
            from_ledger(shop_secret, &ledger_endpoint)
                .layer(middleware::from_fn_with_state(mode.clone(), misbehave)),
        );

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

        let held = Arc::new(Held::default());
        let hold = Endpoint::bind().await;
        let hold_url = hold.url(trustmsg_client::DEFAULT_CHECK_PATH);
        let (hold_token, hold_secret) = services[0]
            .register(
                HOLD,
                json!({"verify_url": hold_url, "first_verify_after_ms": 500,
                       "max_verify_attempts": 60, "verify_timeout_ms": HOLD_TIMEOUT_MS}),
            )
            .await;
        let hold_addr = hold.serve_with_peers(
            from_ledger(hold_secret, &ledger_endpoint)
                .layer(middleware::from_fn_with_state(held.clone(), hold_calls)),
        );

        let clients = |biz: &str, token: &str| {
            Clients(
                services
                    .iter()
                    .map(|s| {
                        Producer::new(&s.url(), biz, token.to_string())
                            .unwrap()
                            .with_retry(fast_retry(1))
                    })
                    .collect(),
            )
        };
        let (shop, broken, hold) = (
            clients(SHOP, &shop_token),
            clients(BROKEN, &broken_token),
            clients(HOLD, &hold_token),
        );
        Self {
            db,
            pool,
            kafka,
            reader,
            seen: BTreeMap::new(),
            alerts,
            services,
            logs,
            _log_dir: log_dir,
            mode,
            shop,
            broken,
            hold,
            held,
            hold_addr,
            ledger_endpoint,
        }
    }

    /// Starts the producers: they run the protocol against all instances
    /// until [`Load::stop`]; the check endpoints answer from `ledger`.
    pub(crate) fn start_load(&self, ledger: Arc<Ledger>) -> Load {
        let _ = self.ledger_endpoint.ledger.set(ledger.clone());
        Load::start(self.shop.clone(), self.broken.clone(), ledger)
    }

    /// Injects `fault` and returns when it is over (everything it broke is
    /// back); `round` picks which instance it hits.
    pub(crate) async fn inject(&mut self, fault: Fault, round: usize, ledger: &Ledger) {
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
            Fault::KillDuringCheckBack => self.kill_during_check_back(round, ledger).await,
            Fault::KillBeforeAlert => self.kill_before_alert(i, round, ledger).await,
            Fault::FreezeDatabase => {
                self.db.pause();
                tokio::time::sleep(FREEZE).await;
                self.db.resume();
            }
        }
    }

    /// Messages of the hold producer left to check-back; once its calls for
    /// them are in flight (held by the endpoint), kill -9 of the instance
    /// making most of them, and a restart after 1 s. Whatever that instance
    /// had claimed must be checked again by another within the producer's
    /// timeout and a margin, not after the global lease.
    async fn kill_during_check_back(&mut self, round: usize, ledger: &Ledger) {
        self.held.holding.store(true, Ordering::SeqCst);
        for j in 0..HOLD_BURST {
            let local = if j % 2 == 0 {
                Local::Committed
            } else {
                Local::RolledBack
            };
            load::undecided(&self.hold, &format!("h-{round}-{j}"), j, local, ledger).await;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut first_call: Option<Instant> = None;
        let calls = loop {
            let calls = self.held.calls.lock().unwrap().clone();
            if !calls.is_empty() {
                first_call.get_or_insert_with(Instant::now);
            }
            // All of them, or as many as the callers' concurrency lets in.
            let settled = first_call.is_some_and(|t| t.elapsed() > Duration::from_millis(500));
            if calls.len() >= HOLD_BURST || settled || Instant::now() > deadline {
                break calls;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let pids: Vec<u32> = self
            .services
            .iter()
            .filter_map(ServiceProcess::pid)
            .collect();
        let mut per_instance = vec![0usize; INSTANCES];
        for peer in &calls {
            let pid = procnet::caller(*peer, self.hold_addr, &pids);
            if let Some(i) = self
                .services
                .iter()
                .position(|s| s.pid().is_some() && s.pid() == pid)
            {
                per_instance[i] += 1;
            }
        }
        let victim = (0..INSTANCES)
            .max_by_key(|i| (per_instance[*i], std::cmp::Reverse(*i)))
            .filter(|i| per_instance[*i] > 0)
            .unwrap_or(round % INSTANCES);
        self.services[victim].kill_9();
        self.held.holding.store(false, Ordering::SeqCst);
        eprintln!(
            "chaos: kill -9 of instance {victim} with {} of the {} check-back calls in flight ({per_instance:?})",
            per_instance[victim],
            calls.len()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        self.services[victim].restart().await;
    }

    /// With the webhook answering 500: messages no check-back can decide
    /// (VERIFY_FAILED) and sends Kafka refuses for good (SEND_FAILED), so
    /// alerts are raised and not delivered; then kill -9 of instance `i`, a
    /// restart, the webhook healthy again, and the operator redelivering
    /// what failed (its ACL fixed). Every alert raised must still arrive.
    async fn kill_before_alert(&mut self, i: usize, round: usize, ledger: &Ledger) {
        self.alerts.answer(StatusCode::INTERNAL_SERVER_ERROR);
        let refused = self.alerts.refused();
        self.kafka.request_errors(
            RDKafkaApiKey::Produce,
            &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED; REFUSED_SENDS],
        );
        let mut ids = Vec::new();
        for j in 0..ALERT_BURST {
            let key = format!("a-{round}-{j}");
            ids.push(load::unverifiable(&self.broken, &key, j, ledger).await);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline
            && !(self.alerts.refused() > refused && self.all_verify_failed(&ids).await)
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.services[i].kill_9();
        tokio::time::sleep(Duration::from_secs(1)).await;
        self.services[i].restart().await;
        self.kafka.clear_request_errors(RDKafkaApiKey::Produce);
        self.alerts.answer(StatusCode::NO_CONTENT);
        self.redeliver_send_failed().await;
    }

    async fn all_verify_failed(&self, ids: &[u64]) -> bool {
        let mut q = QueryBuilder::new(
            "SELECT COUNT(*) FROM messages WHERE status = 'VERIFY_FAILED' AND id IN (",
        );
        let mut list = q.separated(", ");
        for id in ids {
            list.push_bind(*id);
        }
        q.push(")");
        let n: sqlx::Result<i64> = q.build_query_scalar().fetch_one(&self.pool).await;
        n.is_ok_and(|n| n as usize == ids.len())
    }

    /// An operator's bulk redeliver of every SEND_FAILED message, through
    /// whichever instance answers.
    async fn redeliver_send_failed(&self) {
        let http = reqwest::Client::new();
        for n in 0..100 {
            let res = http
                .post(format!(
                    "{}/v1/admin/messages/redeliver",
                    self.services[n % INSTANCES].url()
                ))
                .bearer_auth(ADMIN_TOKEN)
                .json(&json!({"filter": {"send_status": "SEND_FAILED"},
                              "reason": "chaos: the ACL is fixed"}))
                .send()
                .await;
            if res.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no instance took the redeliver for 10 s");
    }

    /// The message ids read from the topic so far.
    pub(crate) fn consumed_ids(&mut self) -> HashSet<u64> {
        self.take_in();
        self.seen.values().map(|r| r.message_id).collect()
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
        let pool = self.pool.clone();
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
        let owed = alerts::owed(&pool, u64::MAX)
            .await
            .expect("read the audit log");

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
        let mut known = HashSet::new();
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
        }
        let delivered = Delivered::sort(&self.alerts.alerts());
        report.judge_alerts(&owed, &delivered);
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

/// A check endpoint answering from the ledger: commit if the local
/// transaction committed, rollback if it rolled back, unknown while it runs.
fn from_ledger(secret: String, state: &Arc<EndpointState>) -> Router {
    let state = state.clone();
    check_router(secret, move |req: CheckRequest| {
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
    })
}

/// The hold endpoint holding each call for [`HOLD_FOR`] while told to,
/// with the caller's address on record meanwhile.
async fn hold_calls(
    axum::extract::State(held): axum::extract::State<Arc<Held>>,
    req: Request,
    next: Next,
) -> Response {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    if let (true, Some(peer)) = (held.holding.load(Ordering::SeqCst), peer) {
        held.calls.lock().unwrap().push(peer);
        // Off the record however the call ends (its caller killed, too).
        let _off = OnDrop(|| {
            let mut calls = held.calls.lock().unwrap();
            if let Some(at) = calls.iter().position(|c| *c == peer) {
                calls.swap_remove(at);
            }
        });
        tokio::time::sleep(HOLD_FOR).await;
    }
    next.run(req).await
}

struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)()
    }
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
