//! The rig: a private MariaDB or PostgreSQL, three `trustmsg serve` processes, a Kafka
//! mock cluster with a consumer, an alert webhook, three check endpoints
//! (the shop's, answering from the producers' ledger unless told to
//! misbehave; one that never answers usefully; one of a producer with a
//! short timeout that holds its calls on demand). `faults` injects the
//! faults, `judge` gives the verdict.

mod endpoints;
mod faults;
mod judge;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicU8;
use std::sync::Arc;

use axum::http::StatusCode;
use axum::middleware;
use axum::Router;
use serde_json::json;
use trustmsg_client::Producer;
use trustmsg_tests::kafka::{Consumed, MockKafka, TopicReader};
use trustmsg_tests::{fast_retry, AlertSink, Database, Endpoint, PrivateDb, ServiceProcess};
use trustmsg_tests::{flags, FAST_SEND};

use crate::ledger::Ledger;
use crate::load::{Clients, Load, TOPIC};
use crate::sql::Pool;

use endpoints::{from_ledger, hold_calls, misbehave, EndpointState, Held, NORMAL};
pub(crate) use faults::{Fault, FAULTS};

const SHOP: &str = "shop";
/// The producer whose messages are rows of its own local message table,
/// in a database of the campaign's server (the faults that hit trustmsg's
/// store hit it too), relayed by every instance (one at a time).
const OUTBOX_SHOP: &str = "outbox-shop";
/// That database.
const OUTBOX_DB: &str = "chaos_shop";
const BROKEN: &str = "broken";
/// The producer whose check endpoint holds calls while a fault needs them
/// in flight; registered with a short timeout, as the was.
const HOLD: &str = "hold";
const INSTANCES: usize = 3;
/// The hold producer's check-back timeout, short as the was.
const HOLD_TIMEOUT_MS: u64 = 2000;

/// The rig's send lease, shorter than [`FAST_SEND`]'s: `faults` sizes its
/// pauses by it.
const SEND_LEASE: &str = "4s";

/// Fast check-backs on top of [`FAST_SEND`] (its lease made [`SEND_LEASE`]).
/// The check-back claim settings keep their defaults, as in production:
/// a claim must be sized by the producer it covers, not by the slowest one
/// anyone may register (`--verify-timeout-max`, 2 min), and the campaign
/// shows it when it is not.
const FLAGS: &[&str] = &[
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

pub(crate) struct Rig {
    db: PrivateDb,
    /// The rig's own connections to the campaign's database (what it looks
    /// at to know a fault has done its work, and to judge).
    pub(crate) pool: Pool,
    /// The outbox shop's own database (its orders' messages as rows).
    outbox_shop: Pool,
    kafka: MockKafka,
    reader: TopicReader,
    /// Every record read, by the cluster it was read from (how often the
    /// broker had lost its state by then) and where it is in the topic
    /// (re-reading the same record is not a duplicate), with when it was
    /// first read.
    seen: BTreeMap<(usize, i32, i64), Consumed>,
    cluster: usize,
    /// How many of the current reader's records are in `seen`.
    taken: usize,
    /// Messages a broker acknowledged and then lost with its state before
    /// anyone could read them: Kafka lost them, not trustmsg.
    lost_by_broker: HashSet<u64>,
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

impl Rig {
    /// The rig on a private server of `database`.
    pub(crate) async fn start(database: Database) -> Self {
        let db = PrivateDb::start(database).await;
        let kafka = MockKafka::start_restartable(1);
        kafka.create_topic(TOPIC, 3);
        let reader = TopicReader::new(kafka.bootstrap(), TOPIC);
        let alerts = AlertSink::start().await;
        let log_dir = tempfile::tempdir().unwrap();
        let mut flags = flags::flags(&[FAST_SEND, FLAGS]);
        flags::set_flag(&mut flags, "--send-lease", SEND_LEASE);
        flags.extend(["--alert-webhook".to_string(), alerts.url()]);
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let url = db.url("chaos");
        let outbox_shop = outbox_shop(&db).await;
        let source = format!("{OUTBOX_SHOP}={}", db.url(OUTBOX_DB));
        let mut flags: Vec<&str> = flags;
        flags.extend(["--outbox-source", source.as_str(), "--outbox-batch", "50"]);
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
        let pool = Pool::connect(&db, "chaos").await;

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

        // Any topic of the campaign's; no check-back to speak of (its
        // messages are decided by its own transactions).
        services[0]
            .register(
                OUTBOX_SHOP,
                json!({"verify_url": "http://127.0.0.1:9/unused", "topics": [TOPIC]}),
            )
            .await;

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
            outbox_shop,
            kafka,
            reader,
            seen: BTreeMap::new(),
            cluster: 0,
            taken: 0,
            lost_by_broker: HashSet::new(),
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
        Load::start(
            self.shop.clone(),
            self.broken.clone(),
            self.outbox_shop.clone(),
            ledger,
        )
    }

    /// The outbox shop's rows by message key: their status (0 pending,
    /// 2 relayed, 3 failed).
    pub(crate) async fn outbox_rows(&self) -> sqlx::Result<HashMap<String, i64>> {
        self.outbox_shop.outbox_rows().await
    }

    /// The message ids Kafka took so far: read from the topic, or
    /// acknowledged by a broker that then lost them.
    pub(crate) fn delivered_ids(&mut self) -> HashSet<u64> {
        self.take_in();
        let mut ids: HashSet<u64> = self.seen.values().map(|r| r.message_id).collect();
        ids.extend(&self.lost_by_broker);
        ids
    }

    /// Moves what the current consumer read since the last call into
    /// `seen`, as records of the cluster it reads now.
    fn take_in(&mut self) {
        let records = self.reader.poll();
        for r in &records[self.taken..] {
            self.seen
                .entry((self.cluster, r.partition, r.offset))
                .or_insert_with(|| r.clone());
        }
        self.taken = records.len();
    }

    /// Takes in what the consumer read, then reads the topic again from
    /// its start with a new one.
    fn read_afresh(&mut self) {
        self.take_in();
        self.reader = TopicReader::new(self.kafka.bootstrap(), TOPIC);
        self.taken = 0;
    }

    pub(crate) async fn finish(self) {
        for mut s in self.services {
            s.kill_9();
        }
    }
}

/// Creates the outbox shop's database and its local message table on the
/// campaign's server, as the shop's own migrations would; its pool is the
/// shop's (a few connections, a short wait for one: the database is killed
/// and frozen under it).
async fn outbox_shop(db: &PrivateDb) -> Pool {
    db.create_database(OUTBOX_DB).await;
    let pool = Pool::connect(db, OUTBOX_DB).await;
    pool.create_outbox_table().await;
    pool
}
