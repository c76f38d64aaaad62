//! `trustmsg bench`: one reproducible run that measures the service next to the
//! database's own ceiling on the same machine.
//!
//! Phases (each reported as a row of the table and a field of the JSON):
//! - **ceiling**: the same concurrency doing the same durable writes straight
//!   through sqlx (INSERT of a message-shaped row + UPDATE of its status,
//!   autocommit) — what the database can do without trustmsg;
//! - **lifecycle**: N concurrent producers doing HTTP prepare + commit; a message
//!   counts once it was consumed from Kafka and its row is SENT;
//! - **open loop**: a fixed arrival rate (a fraction of the lifecycle peak), with
//!   latency measured from each request's *intended* start, so a stall is
//!   charged to every request it delayed (no coordinated omission);
//! - **verifier**: stale PREPARED rows and a local check endpoint answering
//!   commit: rows resolved per second;
//! - **drain**: committed rows inserted directly, then released at once: Kafka
//!   records per second until none is left;
//! - **scan**: the forwarder's claim query with 10k and 1M rows in the table.
//!
//! The bench creates its own database on the given server and drops it at the
//! end: it never reads or writes data it did not create.

use trustmsg_kafka_mock as kafka;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use serde_json::json;
use sqlx::mysql::MySqlPoolOptions;
use sqlx::{MySqlPool, Row};
use tokio::sync::Mutex;

use crate::config::{Secret, ServeArgs};
use crate::startup::Application;
use crate::store::mysql::MySqlStore;
use crate::store::Store;

const TOPIC: &str = "trustmsg-bench";
const DRAIN_TOPIC: &str = "trustmsg-bench-drain";
const PAYLOAD_BYTES: usize = 256;

/// Flags of `trustmsg bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// MySQL/MariaDB server (`mysql://user:pass@host:port[/ignored]`). The bench
    /// creates a database of its own there and drops it when done.
    #[arg(long, env = "TRUSTMSG_DATABASE_URL")]
    pub database_url: Secret,

    /// Kafka brokers; without them an in-process librdkafka mock cluster is used.
    #[arg(long, env = "TRUSTMSG_KAFKA_BROKERS")]
    pub kafka_brokers: Option<String>,

    /// Drive an already running trustmsg instead of starting one in-process
    /// (lifecycle and open-loop only; needs --kafka-brokers and --admin-token).
    #[arg(long)]
    pub target: Option<url::Url>,

    /// Admin token of the --target service.
    #[arg(long, env = "TRUSTMSG_ADMIN_TOKEN")]
    pub admin_token: Option<Secret>,

    /// Small sizes: the whole run takes under a minute on 2 cores.
    #[arg(long)]
    pub quick: bool,

    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,

    /// Concurrent producers (and ceiling writers).
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,

    /// How long the ceiling and the lifecycle phases run (default 10s; --quick 4s).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,

    /// Arrival rate of the open-loop phase as a fraction of the lifecycle peak.
    #[arg(long, default_value_t = 0.5)]
    pub open_loop_fraction: f64,

    /// Stale PREPARED rows for the verifier phase (default 5000; --quick 1000).
    #[arg(long)]
    pub verifier_rows: Option<u64>,

    /// Committed rows for the drain phase (default 50000; --quick 10000).
    #[arg(long)]
    pub drain_rows: Option<u64>,

    /// Extra `trustmsg serve` flags for the in-process service, repeatable
    /// (e.g. `--serve-arg=--kafka-config=linger.ms=1`).
    #[arg(long = "serve-arg", allow_hyphen_values = true)]
    pub serve_args: Vec<String>,

    /// Table sizes for the claim-query cost (default 10000,1000000; --quick 10000,100000).
    #[arg(long, value_delimiter = ',')]
    pub scan_rows: Vec<u64>,
}

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Percentiles {
    /// Samples.
    pub count: usize,
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// 99.9th percentile.
    pub p999_ms: f64,
    /// Largest sample.
    pub max_ms: f64,
}

impl Percentiles {
    fn of(mut samples: Vec<Duration>) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_unstable();
        let at = |q: f64| {
            let i = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1;
            samples[i].as_secs_f64() * 1000.0
        };
        Self {
            count: samples.len(),
            p50_ms: at(0.50),
            p99_ms: at(0.99),
            p999_ms: at(0.999),
            max_ms: samples[samples.len() - 1].as_secs_f64() * 1000.0,
        }
    }
}

/// Latencies of one load phase.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LoadResult {
    /// Messages prepared, committed, consumed from Kafka and marked SENT per second.
    pub throughput_per_s: f64,
    /// Messages counted.
    pub messages: usize,
    /// Prepare call latency.
    pub prepare: Percentiles,
    /// Commit call latency.
    pub commit: Percentiles,
    /// From the commit call's start to the record being consumed from Kafka.
    pub commit_to_kafka: Percentiles,
}

/// Everything one run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// `innodb_flush_log_at_trx_commit`, `sync_binlog`, `log_bin`, server version.
    pub durability: serde_json::Value,
    /// Concurrency used.
    pub concurrency: usize,
    /// Ceiling: INSERT + UPDATE pairs per second straight through sqlx.
    pub ceiling_per_s: f64,
    /// The lifecycle phase.
    pub lifecycle: LoadResult,
    /// lifecycle throughput ÷ ceiling.
    pub ratio: f64,
    /// Target arrival rate of the open-loop phase.
    pub open_loop_rate_per_s: f64,
    /// The open-loop phase (latency from the intended start).
    pub open_loop: LoadResult,
    /// Check-backs resolved per second (None when skipped).
    pub verifier_per_s: Option<f64>,
    /// Drain rate, Kafka records per second (None when skipped).
    pub drain_per_s: Option<f64>,
    /// Claim query median time in ms per table size.
    pub scan_ms: Vec<(u64, f64)>,
}

struct Sizes {
    duration: Duration,
    verifier_rows: u64,
    drain_rows: u64,
    scan_rows: Vec<u64>,
}

impl BenchArgs {
    fn sizes(&self) -> Sizes {
        let (d, v, dr, s) = if self.quick {
            (4, 1_000, 10_000, vec![10_000, 100_000])
        } else {
            (10, 5_000, 50_000, vec![10_000, 1_000_000])
        };
        Sizes {
            duration: self.duration.unwrap_or(Duration::from_secs(d)),
            verifier_rows: self.verifier_rows.unwrap_or(v),
            drain_rows: self.drain_rows.unwrap_or(dr),
            scan_rows: if self.scan_rows.is_empty() {
                s
            } else {
                self.scan_rows.clone()
            },
        }
    }
}

/// Runs the benchmark and prints the table; the last line is `ratio=<x>`.
pub async fn run(args: BenchArgs) -> anyhow::Result<Report> {
    let sizes = args.sizes();
    let server = server_url(args.database_url.expose())?;
    let db_name = format!(
        "trustmsg_bench_{}_{}",
        std::process::id(),
        chrono::Utc::now().timestamp_millis()
    );
    let admin = MySqlPoolOptions::new()
        .max_connections(2)
        .connect(&server)
        .await
        .with_context(|| format!("connecting to {}", crate::store::redact_url(&server)))?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{db_name}`")))
        .execute(&admin)
        .await?;
    let db_url = format!("{server}/{db_name}");
    let result = run_in(&args, &sizes, &db_url).await;
    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS `{db_name}`"
    )))
    .execute(&admin)
    .await;
    let report = result?;
    print_report(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    println!("ratio={:.2}", report.ratio);
    Ok(report)
}

/// `mysql://user:pass@host:port` with any database path removed.
fn server_url(url: &str) -> anyhow::Result<String> {
    let mut u = url::Url::parse(url).context("--database-url is not a URL")?;
    anyhow::ensure!(
        u.scheme() == "mysql",
        "the bench needs a mysql:// server URL"
    );
    u.set_path("");
    u.set_query(None);
    Ok(u.to_string().trim_end_matches('/').to_string())
}

async fn run_in(args: &BenchArgs, sizes: &Sizes, db_url: &str) -> anyhow::Result<Report> {
    let pool = MySqlPoolOptions::new()
        .max_connections((args.concurrency + 4) as u32)
        .connect(db_url)
        .await?;
    let mut report = Report {
        durability: durability(&pool).await?,
        concurrency: args.concurrency,
        ..Report::default()
    };
    eprintln!("bench: durability {}", report.durability);

    eprintln!(
        "bench: ceiling ({} writers, {:?})",
        args.concurrency, sizes.duration
    );
    report.ceiling_per_s = ceiling(&pool, args.concurrency, sizes.duration).await?;

    let mock = match &args.kafka_brokers {
        Some(_) => None,
        None => {
            let mock = kafka::MockKafka::start(1);
            mock.create_topic(TOPIC, 4);
            mock.create_topic(DRAIN_TOPIC, 4);
            Some(mock)
        }
    };
    let brokers = args
        .kafka_brokers
        .clone()
        .or_else(|| mock.as_ref().map(|m| m.bootstrap().to_string()))
        .expect("brokers or mock");

    let checker = CheckEndpoint::start().await?;
    let admin_token = Secret::new(format!("bench-{}", rand::random::<u64>()));
    let (service, base, token) = match &args.target {
        Some(url) => {
            let token = args
                .admin_token
                .clone()
                .context("--target needs --admin-token")?;
            (
                None,
                url.to_string().trim_end_matches('/').to_string(),
                token,
            )
        }
        None => {
            let mut flags: Vec<String> = [
                "--database-url",
                db_url,
                "--listen",
                "127.0.0.1:0",
                "--admin-token",
                admin_token.expose(),
                "--auto-migrate",
                "--kafka-brokers",
                &brokers,
                "--sweep-interval",
                "100ms",
                "--verify-interval",
                "100ms",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            flags.extend(args.serve_args.iter().cloned());
            eprintln!("bench: service flags {:?}", &flags[8..]);
            let app = Application::build(ServeArgs::from_args(flags)?).await?;
            let base = format!("http://{}", app.address());
            (Some(app), base, admin_token)
        }
    };
    let client = Client::new(&base, token.expose(), args.concurrency);
    let producer_token = client
        .register("bench", &checker.url, 3_600_000)
        .await
        .context("registering the bench producer")?;

    let (mut consumed, stop_consumer) = kafka::consume(&brokers, TOPIC)?;
    eprintln!(
        "bench: lifecycle ({} producers, {:?})",
        args.concurrency, sizes.duration
    );
    report.lifecycle = lifecycle(
        &client,
        &producer_token,
        &pool,
        &mut consumed,
        args.concurrency,
        sizes.duration,
    )
    .await?;
    report.ratio = if report.ceiling_per_s > 0.0 {
        report.lifecycle.throughput_per_s / report.ceiling_per_s
    } else {
        0.0
    };

    report.open_loop_rate_per_s = report.lifecycle.throughput_per_s * args.open_loop_fraction;
    eprintln!("bench: open loop at {:.0}/s", report.open_loop_rate_per_s);
    report.open_loop = open_loop(
        &client,
        &producer_token,
        &mut consumed,
        report.open_loop_rate_per_s,
        sizes.duration,
    )
    .await?;
    stop_consumer.set();

    if service.is_some() {
        eprintln!("bench: verifier ({} rows)", sizes.verifier_rows);
        client
            .register("bench-verify", &checker.url, 0)
            .await
            .context("registering the verifier producer")?;
        report.verifier_per_s = Some(verifier(&pool, sizes.verifier_rows).await?);

        eprintln!("bench: drain ({} rows)", sizes.drain_rows);
        let (mut drained, stop_drain) = kafka::consume(&brokers, DRAIN_TOPIC)?;
        report.drain_per_s = Some(drain(&pool, &mut drained, sizes.drain_rows).await?);
        stop_drain.set();
    }
    if let Some(app) = service {
        app.stop().await?;
    }

    for &rows in &sizes.scan_rows {
        eprintln!("bench: claim query cost with {rows} rows");
        let ms = scan_cost(&pool, db_url, rows).await?;
        report.scan_ms.push((rows, ms));
    }
    drop(mock);
    Ok(report)
}

async fn durability(pool: &MySqlPool) -> anyhow::Result<serde_json::Value> {
    let row = sqlx::query(
        "SELECT CAST(@@innodb_flush_log_at_trx_commit AS CHAR) AS flush, \
         CAST(@@sync_binlog AS CHAR) AS sync_binlog, CAST(@@log_bin AS CHAR) AS log_bin, \
         CAST(VERSION() AS CHAR) AS version",
    )
    .fetch_one(pool)
    .await?;
    let get = |c: &str| -> anyhow::Result<String> {
        let b: Vec<u8> = row.try_get(c)?;
        Ok(String::from_utf8_lossy(&b).into_owned())
    };
    Ok(json!({
        "innodb_flush_log_at_trx_commit": get("flush")?,
        "sync_binlog": get("sync_binlog")?,
        "log_bin": get("log_bin")?,
        "version": get("version")?,
    }))
}

/// The database's own ceiling: INSERT of a message-shaped row then UPDATE of its
/// status, autocommit, from `concurrency` writers for `duration`.
async fn ceiling(pool: &MySqlPool, concurrency: usize, duration: Duration) -> anyhow::Result<f64> {
    sqlx::query(
        "CREATE TABLE bench_ceiling (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, \
         biz_id VARCHAR(64) NOT NULL, message_key VARCHAR(128) NOT NULL, topic VARCHAR(249), \
         payload LONGBLOB NOT NULL, status VARCHAR(16) NOT NULL, version BIGINT UNSIGNED NOT NULL DEFAULT 0, \
         created_at DATETIME(3) NOT NULL, updated_at DATETIME(3) NOT NULL, \
         UNIQUE KEY uk (biz_id, message_key)) ENGINE=InnoDB",
    )
    .execute(pool)
    .await?;
    let payload = vec![b'x'; PAYLOAD_BYTES];
    let end = Instant::now() + duration;
    let start = Instant::now();
    let workers = (0..concurrency).map(|w| {
        let pool = pool.clone();
        let payload = payload.clone();
        tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < end {
                let id = sqlx::query(
                    "INSERT INTO bench_ceiling (biz_id, message_key, topic, payload, status, created_at, updated_at) \
                     VALUES ('bench', ?, 'bench', ?, 'PREPARED', UTC_TIMESTAMP(3), UTC_TIMESTAMP(3))",
                )
                .bind(format!("c{w}-{n}"))
                .bind(&payload)
                .execute(&pool)
                .await?
                .last_insert_id();
                sqlx::query(
                    "UPDATE bench_ceiling SET status = 'COMMITTED', version = version + 1, \
                     updated_at = UTC_TIMESTAMP(3) WHERE id = ? AND status = 'PREPARED'",
                )
                .bind(id)
                .execute(&pool)
                .await?;
                n += 1;
            }
            anyhow::Ok(n)
        })
    });
    let mut total = 0;
    for w in futures::future::join_all(workers).await {
        total += w??;
    }
    Ok(total as f64 / start.elapsed().as_secs_f64())
}

/// A tiny HTTP client for the producer and registry API.
#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    base: String,
    admin_token: String,
}

impl Client {
    fn new(base: &str, admin_token: &str, concurrency: usize) -> Self {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(concurrency * 2)
            .build()
            .expect("static client configuration");
        Self {
            http,
            base: base.to_string(),
            admin_token: admin_token.to_string(),
        }
    }

    async fn register(
        &self,
        biz_id: &str,
        verify_url: &str,
        first_verify_ms: u32,
    ) -> anyhow::Result<String> {
        let res = self
            .http
            .put(format!("{}/v1/producers/{biz_id}", self.base))
            .bearer_auth(&self.admin_token)
            .json(&json!({"verify_url": verify_url, "first_verify_after_ms": first_verify_ms}))
            .send()
            .await?;
        let status = res.status();
        let body: serde_json::Value = res.json().await?;
        anyhow::ensure!(status.is_success(), "register {biz_id}: {status} {body}");
        Ok(body["token"]
            .as_str()
            .unwrap_or(&self.admin_token)
            .to_string())
    }

    /// prepare + commit of one message; returns (prepare, commit) latency, the
    /// message id and when the commit call started.
    async fn prepare_commit(
        &self,
        token: &str,
        key: &str,
    ) -> anyhow::Result<(Duration, Duration, u64, Instant)> {
        let t0 = Instant::now();
        let res = self
            .http
            .post(format!("{}/v1/messages/prepare", self.base))
            .bearer_auth(token)
            .json(&json!({
                "biz_id": "bench", "message_key": key, "topic": TOPIC, "key": key,
                "payload": "x".repeat(PAYLOAD_BYTES),
            }))
            .send()
            .await?;
        anyhow::ensure!(res.status().is_success(), "prepare: {}", res.status());
        let view: serde_json::Value = res.json().await?;
        let id = view["id"].as_u64().context("prepare answer without id")?;
        let t1 = Instant::now();
        let res = self
            .http
            .post(format!("{}/v1/messages/commit", self.base))
            .bearer_auth(token)
            .json(&json!({"biz_id": "bench", "message_key": key}))
            .send()
            .await?;
        anyhow::ensure!(res.status().is_success(), "commit: {}", res.status());
        let t2 = Instant::now();
        Ok((t1 - t0, t2 - t1, id, t1))
    }
}

#[derive(Default)]
struct Samples {
    prepare: Vec<Duration>,
    commit: Vec<Duration>,
    committed_at: HashMap<u64, Instant>,
}

/// Waits until every committed message was consumed; returns commit→Kafka
/// latencies and the instant the last one arrived.
async fn await_consumed(
    consumed: &mut tokio::sync::mpsc::UnboundedReceiver<kafka::Consumed>,
    committed_at: &HashMap<u64, Instant>,
    timeout: Duration,
) -> anyhow::Result<(Vec<Duration>, Instant)> {
    let mut latencies = Vec::with_capacity(committed_at.len());
    let mut seen = std::collections::HashSet::new();
    let mut last = Instant::now();
    let deadline = tokio::time::Instant::now() + timeout;
    while seen.len() < committed_at.len() {
        let c = tokio::time::timeout_at(deadline, consumed.recv())
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "only {} of {} committed messages reached Kafka in {timeout:?}",
                    seen.len(),
                    committed_at.len()
                )
            })?
            .context("consumer stopped")?;
        if let Some(start) = committed_at.get(&c.message_id) {
            if seen.insert(c.message_id) {
                latencies.push(c.at.saturating_duration_since(*start));
                last = c.at;
            }
        }
    }
    Ok((latencies, last))
}

async fn lifecycle(
    client: &Client,
    token: &str,
    pool: &MySqlPool,
    consumed: &mut tokio::sync::mpsc::UnboundedReceiver<kafka::Consumed>,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<LoadResult> {
    let samples = Arc::new(Mutex::new(Samples::default()));
    let start = Instant::now();
    let end = start + duration;
    let workers = (0..concurrency).map(|w| {
        let client = client.clone();
        let token = token.to_string();
        let samples = samples.clone();
        tokio::spawn(async move {
            let mut i = 0u64;
            while Instant::now() < end {
                let (p, c, id, at) = client.prepare_commit(&token, &format!("l{w}-{i}")).await?;
                let mut s = samples.lock().await;
                s.prepare.push(p);
                s.commit.push(c);
                s.committed_at.insert(id, at);
                i += 1;
            }
            anyhow::Ok(())
        })
    });
    for w in futures::future::join_all(workers).await {
        w??;
    }
    let samples = std::mem::take(&mut *samples.lock().await);
    let result = load_result(samples, consumed, start).await?;
    // A message counts only once its row is SENT as well.
    wait_until(
        pool,
        "SELECT COUNT(*) FROM messages WHERE biz_id = 'bench' AND send_status = 'SENT'",
        result.messages as i64,
    )
    .await?;
    Ok(result)
}

/// Waits for every committed message of `samples` to reach Kafka and sums up.
async fn load_result(
    samples: Samples,
    consumed: &mut tokio::sync::mpsc::UnboundedReceiver<kafka::Consumed>,
    start: Instant,
) -> anyhow::Result<LoadResult> {
    let (to_kafka, last) =
        await_consumed(consumed, &samples.committed_at, Duration::from_secs(120)).await?;
    let n = samples.committed_at.len();
    Ok(LoadResult {
        throughput_per_s: n as f64 / last.duration_since(start).as_secs_f64(),
        messages: n,
        prepare: Percentiles::of(samples.prepare),
        commit: Percentiles::of(samples.commit),
        commit_to_kafka: Percentiles::of(to_kafka),
    })
}

async fn open_loop(
    client: &Client,
    token: &str,
    consumed: &mut tokio::sync::mpsc::UnboundedReceiver<kafka::Consumed>,
    rate: f64,
    duration: Duration,
) -> anyhow::Result<LoadResult> {
    anyhow::ensure!(rate > 0.0, "open loop needs a positive rate");
    let interval = Duration::from_secs_f64(1.0 / rate);
    let samples = Arc::new(Mutex::new(Samples::default()));
    let start = Instant::now();
    let mut tasks = Vec::new();
    let mut i = 0u64;
    loop {
        let intended = start + interval.mul_f64(i as f64);
        if intended >= start + duration {
            break;
        }
        tokio::time::sleep_until(intended.into()).await;
        let client = client.clone();
        let token = token.to_string();
        let samples = samples.clone();
        tasks.push(tokio::spawn(async move {
            let (p, c, id, _) = client.prepare_commit(&token, &format!("o-{i}")).await?;
            // Charged from the intended start: time spent waiting to be sent counts.
            let queued = Instant::now().saturating_duration_since(intended) - p - c;
            let mut s = samples.lock().await;
            s.prepare.push(queued + p);
            s.commit.push(c);
            s.committed_at.insert(id, intended + queued + p);
            anyhow::Ok(())
        }));
        i += 1;
    }
    for t in futures::future::join_all(tasks).await {
        t??;
    }
    let samples = std::mem::take(&mut *samples.lock().await);
    load_result(samples, consumed, start).await
}

/// Polls until `count_sql` returns `expected`.
async fn wait_until(
    pool: &MySqlPool,
    count_sql: &'static str,
    expected: i64,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let n: i64 = sqlx::query_scalar(count_sql).fetch_one(pool).await?;
        if n == expected {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{count_sql} stuck at {n}, want {expected}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Inserts `rows` message rows of `biz_id` in `status`, not yet due.
async fn insert_rows(
    pool: &MySqlPool,
    biz_id: &str,
    topic: &str,
    status: &str,
    send_status: Option<&str>,
    rows: u64,
) -> anyhow::Result<()> {
    const BATCH: u64 = 1000;
    let payload = vec![b'x'; PAYLOAD_BYTES];
    let mut done = 0;
    while done < rows {
        let n = BATCH.min(rows - done);
        let mut q = sqlx::QueryBuilder::<sqlx::MySql>::new(
            "INSERT INTO messages (biz_id, message_key, topic, payload, headers, content_digest, status, send_status, created_at, updated_at) ",
        );
        q.push_values(done..done + n, |mut b, i| {
            b.push_bind(biz_id)
                .push_bind(format!("{biz_id}-{i}"))
                .push_bind(topic)
                .push_bind(&payload)
                .push_bind("{}")
                .push_bind(vec![0u8; 32])
                .push_bind(status)
                .push_bind(send_status)
                .push("UTC_TIMESTAMP(3)")
                .push("UTC_TIMESTAMP(3)");
        });
        q.build().execute(pool).await?;
        done += n;
    }
    Ok(())
}

/// Stale PREPARED rows made due at once; the in-process verifier asks the local
/// check endpoint (which answers commit) about each.
async fn verifier(pool: &MySqlPool, rows: u64) -> anyhow::Result<f64> {
    insert_rows(pool, "bench-verify", TOPIC, "PREPARED", None, rows).await?;
    // The clock starts when the release commits: that is when the rows become due.
    sqlx::query(
        "UPDATE messages SET next_verify_at = UTC_TIMESTAMP(3) WHERE biz_id = 'bench-verify'",
    )
    .execute(pool)
    .await?;
    let start = Instant::now();
    wait_until(
        pool,
        "SELECT COUNT(*) FROM messages WHERE biz_id = 'bench-verify' AND status = 'COMMITTED'",
        rows as i64,
    )
    .await?;
    Ok(rows as f64 / start.elapsed().as_secs_f64())
}

/// Committed rows released at once; the sweeper drains them to Kafka.
async fn drain(
    pool: &MySqlPool,
    consumed: &mut tokio::sync::mpsc::UnboundedReceiver<kafka::Consumed>,
    rows: u64,
) -> anyhow::Result<f64> {
    insert_rows(
        pool,
        "bench-drain",
        DRAIN_TOPIC,
        "COMMITTED",
        Some("PENDING"),
        rows,
    )
    .await?;
    let ids: Vec<u64> = sqlx::query_scalar("SELECT id FROM messages WHERE biz_id = 'bench-drain'")
        .fetch_all(pool)
        .await?;
    // The clock starts when the release commits: that is when the rows become due.
    sqlx::query("UPDATE messages SET next_send_at = UTC_TIMESTAMP(3) WHERE biz_id = 'bench-drain'")
        .execute(pool)
        .await?;
    let start = Instant::now();
    let committed_at: HashMap<u64, Instant> = ids.into_iter().map(|id| (id, start)).collect();
    let (_, last) = await_consumed(consumed, &committed_at, Duration::from_secs(300)).await?;
    wait_until(
        pool,
        "SELECT COUNT(*) FROM messages WHERE biz_id = 'bench-drain' AND send_status = 'SENT'",
        rows as i64,
    )
    .await?;
    Ok(rows as f64 / last.duration_since(start).as_secs_f64())
}

/// Median time of the forwarder's claim (256 due rows) with `rows` finished
/// rows in the table, in a database of its own.
async fn scan_cost(pool: &MySqlPool, db_url: &str, rows: u64) -> anyhow::Result<f64> {
    let base: String = sqlx::query_scalar("SELECT CAST(DATABASE() AS CHAR)")
        .fetch_one(pool)
        .await?;
    let name = format!("{base}_scan");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS `{name}`"
    )))
    .execute(pool)
    .await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
        .execute(pool)
        .await?;
    let mut scan_url = url::Url::parse(db_url)?;
    scan_url.set_path(&format!("/{name}"));
    let result = async {
        let store = MySqlStore::connect(scan_url.as_str()).await?;
        store.migrate().await?;
        insert_rows(store.pool(), "scan-done", TOPIC, "COMMITTED", Some("SENT"), rows).await?;
        insert_rows(store.pool(), "scan-due", TOPIC, "COMMITTED", Some("PENDING"), 256).await?;
        sqlx::query("ANALYZE TABLE messages").execute(store.pool()).await?;
        let mut times = Vec::new();
        for _ in 0..20 {
            sqlx::query("UPDATE messages SET next_send_at = UTC_TIMESTAMP(3) - INTERVAL 1 SECOND WHERE biz_id = 'scan-due'")
                .execute(store.pool())
                .await?;
            let t = Instant::now();
            let claimed = store.claim_due_sends(256, Duration::from_secs(60)).await?;
            times.push(t.elapsed());
            anyhow::ensure!(claimed.len() == 256, "claimed {} of 256", claimed.len());
        }
        anyhow::Ok(Percentiles::of(times).p50_ms)
    }
    .await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS `{name}`"
    )))
    .execute(pool)
    .await?;
    result
}

/// A local check endpoint that answers `commit` to every check-back.
struct CheckEndpoint {
    url: String,
    _server: tokio::task::JoinHandle<()>,
}

impl CheckEndpoint {
    async fn start() -> anyhow::Result<Self> {
        use trustmsg_verify_api::{CheckRequest, CheckResponse, Decision};
        let app = axum::Router::new().route(
            "/check",
            axum::routing::post(|axum::Json(req): axum::Json<CheckRequest>| async move {
                axum::Json(CheckResponse {
                    message_id: req.message_id,
                    decision: Decision::Commit,
                })
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/check", listener.local_addr()?);
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            url,
            _server: server,
        })
    }
}

fn print_report(r: &Report) {
    let row = |name: &str, l: &LoadResult| {
        println!(
            "{name:<10} {:>9.0} msg/s  prepare p50/p99/p99.9 {:>6.1}/{:>6.1}/{:>6.1} ms  commit {:>6.1}/{:>6.1}/{:>6.1} ms  commit→kafka {:>6.1}/{:>6.1}/{:>6.1} ms  (n={})",
            l.throughput_per_s,
            l.prepare.p50_ms, l.prepare.p99_ms, l.prepare.p999_ms,
            l.commit.p50_ms, l.commit.p99_ms, l.commit.p999_ms,
            l.commit_to_kafka.p50_ms, l.commit_to_kafka.p99_ms, l.commit_to_kafka.p999_ms,
            l.messages,
        );
    };
    println!("durability {}", r.durability);
    println!("concurrency {}", r.concurrency);
    println!(
        "ceiling    {:>9.0} insert+update/s (sqlx, autocommit)",
        r.ceiling_per_s
    );
    row("lifecycle", &r.lifecycle);
    row(&format!("open@{:.0}", r.open_loop_rate_per_s), &r.open_loop);
    match r.verifier_per_s {
        Some(v) => println!("verifier   {v:>9.0} check-backs resolved/s"),
        None => println!("verifier   skipped"),
    }
    match r.drain_per_s {
        Some(v) => println!("drain      {v:>9.0} msg/s"),
        None => println!("drain      skipped"),
    }
    for (rows, ms) in &r.scan_ms {
        println!("scan       {rows:>9} rows: claim of 256 due rows p50 {ms:.2} ms");
    }
}
