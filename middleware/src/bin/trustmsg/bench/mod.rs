//! `trustmsg bench`: one reproducible run that measures the service next to the
//! database's own ceiling on the same machine.
//!
//! Phases (each reported as a row of the table and a field of the JSON):
//! - **ceiling**: the same concurrency doing the same durable writes straight
//!   through sqlx (INSERT of a message-shaped row + UPDATE of its status,
//!   autocommit) — what the database can do without trustmsg; taken before
//!   and again right after the lifecycle, and the ratio divides by the mean;
//! - **lifecycle**: N concurrent producers doing HTTP prepare + commit; a message
//!   counts once it was consumed from Kafka and its row is SENT;
//! - **submit** (issue 29, the Kafka way in): the same work as the
//!   lifecycle, N messages submitted as signed prepare + commit records to
//!   the service's `--submit-topic`; a message counts as in the lifecycle,
//!   once consumed from its target topic and SENT; then 100 submitted
//!   messages one at a time, each until consumed (its latency alone);
//! - **open loop**: a fixed arrival rate (a fraction of the lifecycle peak), with
//!   latency measured from each request's *intended* start, so a stall is
//!   charged to every request it delayed (no coordinated omission);
//! - **verifier**: stale PREPARED rows and a local check endpoint answering
//!   commit: rows resolved per second;
//! - **drain**: committed rows inserted directly, then released at once: Kafka
//!   records per second until none is left;
//! - **outbox** (issue 44, the local message table way): rows committed at
//!   once in a source table on the same server, relayed by the service
//!   (`--outbox-source`): rows per second until the last is read from
//!   Kafka, then rows one per transaction at half that rate: commit → Kafka;
//! - **scan**: the forwarder's claim query with 10k and 1M rows in the table.
//!
//! `--soak DURATION --rate R` runs none of these but a long open loop with a
//! short retention, measured window by window ([`soak`]).
//!
//! The bench creates its own database on the given server and drops it at the
//! end: it never reads or writes data it did not create.
//!
//! The server is MySQL/MariaDB or PostgreSQL (`--database-url`'s scheme):
//! every phase runs on both, and what differs between them (SQL, counters,
//! processes, durability settings) is asked of [`server::Db`].

use anyhow::Context;

use trustmsg::config::Secret;
use trustmsg::store::{Backend, DatabaseUrl};
use trustmsg_kafka_mock as kafka;

use crate::serve_flags::ServeFlags;

mod args;
mod cost;
mod load;
mod open_loop;
mod outbox;
mod percentiles;
mod phases;
mod report;
mod server;
mod service;
mod soak;
mod submit;
mod wait;

pub(crate) use args::BenchArgs;
use args::Sizes;
use cost::{CpuClock, DbCost, DbCounters, PhaseCpu};
use load::{lifecycle, one_at_a_time, open_loop, Client};
use phases::{ceiling, drain, scan_cost, verifier, CheckEndpoint, OtlpSink};
use report::{print_report, Report};
use server::{url_of, Db};
use service::ServiceProcess;
use submit::{BatchCounters, BatchSizes};

pub(crate) const TOPIC: &str = "trustmsg-bench";
pub(crate) const DRAIN_TOPIC: &str = "trustmsg-bench-drain";
pub(crate) const PAYLOAD_BYTES: usize = 256;

/// Runs the benchmark and prints the table; the last line is `ratio=<x>`.
/// With `--soak`, runs the soak instead ([`soak`]).
pub(crate) async fn run(args: BenchArgs) -> anyhow::Result<()> {
    if args.soak.is_some() {
        return soak::run(&args).await.map(|_| ());
    }
    run_phases(args).await.map(|_| ())
}

/// The name of a database of the bench's own: no one else's, and told
/// apart from another run's by the pid and the time.
fn database_name() -> String {
    format!(
        "trustmsg_bench_{}_{}",
        std::process::id(),
        chrono::Utc::now().timestamp_millis()
    )
}

/// The phases, each a row of the table and a field of the JSON.
async fn run_phases(args: BenchArgs) -> anyhow::Result<Report> {
    let sizes = args.sizes();
    let postgres = args.database_url.backend() == Backend::Postgres;
    if postgres && args.shards > 1 {
        anyhow::bail!(
            "--shards is MySQL-only for now: the service spreads messages over several \
             databases on MySQL/MariaDB servers only; leave it out with a postgres:// URL"
        );
    }
    if postgres && args.target.is_some() {
        anyhow::bail!(
            "--target is MySQL-only for now: drive a running trustmsg on PostgreSQL by \
             letting the bench start it (leave --target out)"
        );
    }
    let server = url_of(&args.database_url, None)?;
    let db_name = database_name();
    let admin = Db::connect(&server, 2, &db_name).await?;
    // The first shard's database is the one the bench's own phases use.
    let names: Vec<String> = (0..args.shards)
        .map(|i| match i {
            0 => db_name.clone(),
            i => format!("{db_name}_s{i}"),
        })
        .collect();
    for name in &names {
        admin.create_database(name).await?;
    }
    let db_urls = names
        .iter()
        .map(|n| url_of(&server, Some(n)))
        .collect::<Result<Vec<_>, _>>()?;
    // The outbox phase's source: a producer's database, on the same server.
    let source_name = format!("{db_name}_outbox");
    let with_outbox = args.target.is_none() && args.shards == 1;
    if with_outbox {
        admin.create_database(&source_name).await?;
    }
    let result = async {
        let source = match with_outbox {
            true => Some(outbox::Source::create(url_of(&server, Some(&source_name))?).await?),
            false => None,
        };
        run_in(&args, &sizes, &db_urls, &db_name, source).await
    }
    .await;
    if with_outbox {
        let _ = admin.drop_database(&source_name).await;
    }
    for name in &names {
        let _ = admin.drop_database(name).await;
    }
    let report = result?;
    print_report(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    println!("ratio={:.2}", report.ratio);
    if !report.failed.is_empty() {
        let phases: Vec<&str> = report.failed.iter().map(|f| f.phase).collect();
        anyhow::bail!(
            "the {} phase(s) failed (above, after the figures of the others)",
            phases.join(", ")
        );
    }
    Ok(report)
}

/// Partitions of the mock's drain topic: librdkafka's mock broker keeps the
/// last 5 MB of a partition, and the drain's records may reach it faster
/// than the bench's consumer reads them, so they are spread (keyless, at
/// random) over enough partitions that each expects a tenth of what it
/// holds (4 for small rows; 600 for 300 rows of 900 kB).
fn drain_partitions(args: &BenchArgs, sizes: &Sizes) -> i32 {
    if args.row_payload_bytes <= PAYLOAD_BYTES {
        return 4;
    }
    let holds = ((5u64 << 20) / (args.row_payload_bytes as u64).max(1)).max(1);
    let partitions = sizes.drain_rows.saturating_mul(10).div_ceil(holds);
    i32::try_from(partitions).unwrap_or(i32::MAX).clamp(4, 1024)
}

async fn run_in(
    args: &BenchArgs,
    sizes: &Sizes,
    db_urls: &[DatabaseUrl],
    db_name: &str,
    source: Option<outbox::Source>,
) -> anyhow::Result<Report> {
    let db_url = &db_urls[0];
    let pool = Db::connect(db_url, (args.concurrency + 4) as u32, db_name).await?;
    // Each shard's database, for the polls that count what is left.
    let mut shard_pools = vec![pool.clone()];
    for url in &db_urls[1..] {
        shard_pools.push(Db::connect(url, 2, db_name).await?);
    }
    let sharded = db_urls.len() > 1;
    if !pool.count_statements().await? {
        eprintln!(
            "bench: statements are not counted: the server does not load pg_stat_statements \
             (shared_preload_libraries); transactions are"
        );
    }
    let mut report = Report {
        durability: pool.durability().await?,
        concurrency: args.concurrency,
        shards: db_urls.len(),
        ..Report::default()
    };
    eprintln!("bench: durability {}", report.durability);

    eprintln!(
        "bench: ceiling ({} writers, {:?})",
        args.concurrency, sizes.duration
    );
    let meter = Meter::start(&pool, None).await?;
    let rate = ceiling(&pool, args.concurrency, sizes.duration, 0).await?;
    report.ceilings_per_s.push(rate);
    let pairs = rate * sizes.duration.as_secs_f64();
    report.ceiling_db = meter.stop(&pool, &mut report, "ceiling", pairs).await?;

    let (brokers, mock) = brokers_or_mock(
        args,
        &[
            (TOPIC, 4),
            (DRAIN_TOPIC, drain_partitions(args, sizes)),
            (submit::SUBMIT_TOPIC, 4),
            (&format!("{}.dlq", submit::SUBMIT_TOPIC), 1),
            (submit::SUBMITTED_TOPIC, 4),
            (outbox::OUTBOX_TOPIC, 4),
        ],
    );

    let checker = CheckEndpoint::start().await?;
    let otlp = if args.trace {
        Some(OtlpSink::start().await?)
    } else {
        None
    };
    let admin_token = Secret::new(format!("bench-{}", rand::random::<u64>()));
    let (service, base, token) = match &args.target {
        Some(url) => {
            let token = args
                .admin_token
                .clone()
                .context("--target needs --admin-token")?;
            (
                None,
                url.expose().as_str().trim_end_matches('/').to_string(),
                token,
            )
        }
        None => {
            let source_flag = source.as_ref().map(outbox::Source::flag);
            let launch = Launch {
                db_urls,
                source_flag: source_flag.as_deref(),
                brokers: &brokers,
                mock: mock.is_some(),
                otlp: otlp.as_ref(),
                admin_token: &admin_token,
            };
            // From the start, so its consumer has joined its group by the
            // submit phase.
            let fixed = [("--submit-topic", Some(submit::SUBMIT_TOPIC))];
            let process = launch.start(args, &fixed).await?;
            let base = process.base.clone();
            (Some(process), base, admin_token)
        }
    };
    let client = Client::new(
        &base,
        token.expose(),
        args.concurrency,
        args.ordered,
        args.trace,
    );
    let producer_token = client
        .register("bench", &checker.url, 3_600_000)
        .await
        .context("registering the bench producer")?;

    let (mut consumed, stop_consumer) = kafka::consume(&brokers, TOPIC)?;
    eprintln!(
        "bench: lifecycle ({} producers, {:?})",
        args.concurrency, sizes.duration
    );
    let service_pid = service.as_ref().map(|s| s.pid().to_string());
    let service_pid = service_pid.as_deref();
    let batches_before = batch_counters(&client).await;
    // The purge the first ceiling left behind is not the lifecycle's work.
    pool.settle().await?;
    let meter = Meter::start(&pool, service_pid).await?;
    report.lifecycle = lifecycle(
        &client,
        &producer_token,
        &shard_pools,
        &mut consumed,
        args.concurrency,
        sizes.duration,
    )
    .await?;
    let messages = report.lifecycle.messages as f64;
    report.lifecycle_db = meter
        .stop(&pool, &mut report, "lifecycle", messages)
        .await?;
    report.lifecycle_batches = Some(BatchSizes::between(
        &batches_before,
        &batch_counters(&client).await,
    ));
    // The ceiling again, right after: this machine's speed drifts by a third
    // within minutes, so the ratio divides by the mean of the two ceilings
    // around the lifecycle rather than by one taken before it. The purge the
    // lifecycle left behind is waited out first, not charged to the ceiling.
    eprintln!("bench: ceiling again");
    pool.settle().await?;
    let meter = Meter::start(&pool, service_pid).await?;
    let rate = ceiling(&pool, args.concurrency, sizes.duration, 1).await?;
    report.ceilings_per_s.push(rate);
    let pairs = rate * sizes.duration.as_secs_f64();
    meter
        .stop(&pool, &mut report, "ceiling_after", pairs)
        .await?;
    report.ceiling_per_s =
        report.ceilings_per_s.iter().sum::<f64>() / report.ceilings_per_s.len() as f64;
    report.ratio = if report.ceiling_per_s > 0.0 {
        report.lifecycle.throughput_per_s / report.ceiling_per_s
    } else {
        0.0
    };

    if service.is_some() && !sharded {
        let outcome = async {
            let messages = args
                .submit_messages
                .unwrap_or(report.lifecycle.messages.max(1000));
            eprintln!(
                "bench: submit ({messages} messages as records to {}, {} in flight)",
                submit::SUBMIT_TOPIC,
                args.submit_in_flight
            );
            let secret = client
                .registration(submit::BIZ_ID, &checker.url, 3_600_000)
                .await
                .context("registering the submit producer")?
                .signing_secret
                .context("a new registration shows its signing secret")?;
            let (mut submitted, stop_submitted) =
                kafka::consume(&brokers, submit::SUBMITTED_TOPIC)?;
            let submitter = submit::Submitter::warmed_up(&brokers, &secret, &mut submitted).await?;
            pool.settle().await?;
            let batches_before = batch_counters(&client).await;
            let meter = Meter::start(&pool, service_pid).await?;
            let mut result = submitter
                .run(
                    &pool,
                    &mut submitted,
                    messages,
                    args.submit_in_flight,
                    report.lifecycle.throughput_per_s,
                )
                .await?;
            let messages = result.messages as f64;
            report.submit_db = Some(meter.stop(&pool, &mut report, "submit", messages).await?);
            result.batches = BatchSizes::between(&batches_before, &batch_counters(&client).await);
            eprintln!("bench: one submitted message at a time");
            result.one_at_a_time = submitter.one_at_a_time(&mut submitted, 100).await?;
            report.submit = Some(result);
            stop_submitted.set();
            anyhow::Ok(())
        }
        .await;
        report.phase("submit", outcome);
    }

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
    eprintln!("bench: one producer, one message at a time");
    report.one_at_a_time = one_at_a_time(&client, &producer_token, &mut consumed, 200).await?;
    stop_consumer.set();

    if service.is_some() && !sharded {
        let outcome = async {
            eprintln!("bench: verifier ({} rows)", sizes.verifier_rows);
            client
                .register("bench-verify", &checker.url, 0)
                .await
                .context("registering the verifier producer")?;
            let rows = sizes.verifier_rows as f64;
            let rows_of = (sizes.verifier_rows, args.row_payload_bytes);
            let (rate, meter) = verifier(&pool, &checker, rows_of, service_pid).await?;
            let db = meter.stop(&pool, &mut report, "verifier", rows).await?;
            (report.verifier_per_s, report.verifier_db) = (Some(rate), Some(db));
            anyhow::Ok(())
        }
        .await;
        report.phase("verifier", outcome);

        let outcome = async {
            eprintln!("bench: drain ({} rows)", sizes.drain_rows);
            let (mut drained, stop_drain) = kafka::consume(&brokers, DRAIN_TOPIC)?;
            let rows = sizes.drain_rows as f64;
            let rows_of = (sizes.drain_rows, args.row_payload_bytes);
            let (rate, meter) = drain(&pool, &mut drained, rows_of, service_pid).await?;
            let db = meter.stop(&pool, &mut report, "drain", rows).await?;
            (report.drain_per_s, report.drain_db) = (Some(rate), Some(db));
            stop_drain.set();
            anyhow::Ok(())
        }
        .await;
        report.phase("drain", outcome);
    }

    if let (Some(source), Some(_)) = (source, &service) {
        let outcome = async {
            let source = std::sync::Arc::new(source);
            eprintln!(
                "bench: outbox ({} rows committed at once)",
                sizes.outbox_rows
            );
            client
                .register(outbox::BIZ_ID, &checker.url, 3_600_000)
                .await
                .context("registering the outbox producer")?;
            let (mut relayed, stop_relayed) = kafka::consume(&brokers, outbox::OUTBOX_TOPIC)?;
            outbox::warm_up(&source, &mut relayed).await?;
            pool.settle().await?;
            let (rate, meter) =
                outbox::throughput(&source, &mut relayed, sizes.outbox_rows, || {
                    Meter::start(&pool, service_pid)
                })
                .await?;
            let rows = sizes.outbox_rows as f64;
            report.outbox_db = Some(meter?.stop(&pool, &mut report, "outbox", rows).await?);
            let half = rate / 2.0;
            let per_tx = args.outbox_rows_per_tx;
            // Each latency part with the CPU it took, per row.
            let mut latency_at = async |run: usize, rate: f64| -> anyhow::Result<outbox::Latency> {
                eprintln!("bench: outbox latency, {per_tx} row(s) per transaction at {rate:.0}/s");
                let meter = Meter::start(&pool, service_pid).await?;
                let mut l =
                    outbox::latency(&source, run, &mut relayed, rate, per_tx, sizes.duration)
                        .await?;
                let rows = l.commit_to_kafka.count as f64;
                let (cores, db) = meter.read(&pool, rows).await?;
                l.cpu = Some(cores.per_message(rows));
                l.cores = Some(cores);
                l.db = Some(db);
                Ok(l)
            };
            let latency = latency_at(0, half).await?;
            let mut at_rates = Vec::new();
            for (run, &rate) in args.outbox_rates.iter().enumerate() {
                at_rates.push(latency_at(run + 1, rate).await?);
            }
            report.outbox = Some(outbox::OutboxResult {
                rows: sizes.outbox_rows,
                relayed_per_s: rate,
                at_half: latency,
                at_rates,
            });
            stop_relayed.set();
            anyhow::Ok(())
        }
        .await;
        report.phase("outbox", outcome);
    }
    report.peak_rss_mib = cost::peak_rss_mib("self");
    report.service_peak_rss_mib = service_pid.and_then(cost::peak_rss_mib);
    if let Some(process) = service {
        // Stopping flushes the spans still batched.
        process.stop().await?;
    }
    if let Some(sink) = &otlp {
        use std::sync::atomic::Ordering;
        report.otlp_export = Some(report::OtlpExport {
            requests: sink.requests.load(Ordering::Relaxed),
            bytes: sink.bytes.load(Ordering::Relaxed),
        });
    }

    for &rows in sizes.scan_rows.iter().filter(|_| !sharded) {
        eprintln!("bench: claim query cost with {rows} rows");
        match scan_cost(&pool, db_url, db_name, rows).await {
            Ok(ms) => report.scan_ms.push((rows, ms)),
            Err(e) => report.phase("scan", Err(e)),
        }
    }
    drop(mock);
    Ok(report)
}

/// What the service the bench starts is given: its databases, the outbox
/// source (if any), the brokers, whether they are the in-process mock, the
/// OTLP sink (with `--trace`) and the admin token.
pub(crate) struct Launch<'a> {
    pub(crate) db_urls: &'a [DatabaseUrl],
    pub(crate) source_flag: Option<&'a str>,
    pub(crate) brokers: &'a str,
    pub(crate) mock: bool,
    pub(crate) otlp: Option<&'a OtlpSink>,
    pub(crate) admin_token: &'a Secret,
}

impl Launch<'_> {
    /// Starts `trustmsg serve` with the bench's flags, `fixed` (flags a
    /// run sets that `--serve-arg` may not) and the user's `--serve-arg`s,
    /// and waits until it is ready.
    pub(crate) async fn start(
        &self,
        args: &BenchArgs,
        fixed: &[(&str, Option<&str>)],
    ) -> anyhow::Result<ServiceProcess> {
        let listen = service::free_address()?;
        let databases: Vec<(&str, Option<&str>)> = self
            .db_urls
            .iter()
            // The child parses it again.
            .map(|url| ("--database-url", Some(url.expose_for_driver())))
            .chain(self.source_flag.map(|s| ("--outbox-source", Some(s))))
            .collect();
        let (flags, fixed) = ServeFlags::new(&args.serve_args)
            .fixed(&databases)
            .and_then(|flags| {
                flags.fixed(&[
                    ("--listen", Some(listen.as_str())),
                    ("--admin-token", Some(self.admin_token.expose())),
                    ("--auto-migrate", None),
                    ("--kafka-brokers", Some(self.brokers)),
                ])
            })
            .and_then(|flags| flags.fixed(fixed))
            .map_err(|fixed| {
                anyhow::anyhow!("{fixed} is set by the bench; leave it out of --serve-arg")
            })?
            // The bench's own settings, unless --serve-arg gives them.
            .defaults([
                ("--sweep-interval", "100ms"),
                ("--verify-interval", "100ms"),
            ])
            // librdkafka's mock broker holds a fetch that finds nothing
            // for all of fetch.wait.max.ms (500 ms by default) and does
            // not answer when a record arrives, as a real broker does:
            // the service's --submit-topic consumer would then read a
            // lone record up to half a second late. The bench's own
            // consumers fetch eagerly for the same reason. (A consumer
            // setting: the service's producers ignore it, each saying so
            // once in a librdkafka CONFWARN line.)
            .defaults(
                self.mock
                    .then_some(("--kafka-config", "fetch.wait.max.ms=5")),
            )
            .defaults(self.otlp.map(|sink| ("--otlp-endpoint", sink.url.as_str())))
            // The drain's rows have no record key, and librdkafka sends
            // keyless records to one partition for 10 ms at a time: large
            // ones would overflow the mock's 5 MB partitions before the
            // bench reads them (see `drain_partitions`).
            .defaults(
                (self.mock && args.row_payload_bytes > PAYLOAD_BYTES)
                    .then_some(("--kafka-config", "sticky.partitioning.linger.ms=0")),
            )
            .build();
        eprintln!("bench: service flags {:?}", &flags[fixed..]);
        let binary = service::binary(args.service_binary.as_ref())?;
        ServiceProcess::start(&binary, &flags, &listen).await
    }
}

/// One phase's cost in the making: CPU by process and the database's
/// counters, from [`Meter::start`] to [`Meter::stop`].
pub(crate) struct Meter {
    clock: CpuClock,
    before: DbCounters,
}

impl Meter {
    /// Starts measuring (`service`: the service's pid, when known).
    pub(crate) async fn start(db: &Db, service: Option<&str>) -> anyhow::Result<Self> {
        let database = db.process().await?;
        Ok(Self {
            before: db.counters().await?,
            clock: CpuClock::start(database, service),
        })
    }

    /// The cores used since the start, and the database's work per one of
    /// `messages`, without recording a phase.
    pub(crate) async fn read(self, db: &Db, messages: f64) -> anyhow::Result<(PhaseCpu, DbCost)> {
        let cpu = self.clock.stop();
        let after = db.counters().await?;
        Ok((cpu, DbCost::between(&self.before, &after, messages)))
    }

    /// Records in `report` the cores `phase` used and their CPU per one of
    /// its `messages`; returns the database's work per message.
    pub(crate) async fn stop(
        self,
        db: &Db,
        report: &mut Report,
        phase: &'static str,
        messages: f64,
    ) -> anyhow::Result<DbCost> {
        let (cpu, cost) = self.read(db, messages).await?;
        report.measured(phase, cpu, messages);
        Ok(cost)
    }
}

/// The service's batch-size histograms; none when `/metrics` cannot be
/// read (a `--target` may not serve it to the bench).
async fn batch_counters(client: &Client) -> BatchCounters {
    match client.metrics().await {
        Ok(text) => BatchCounters::parse(&text),
        Err(e) => {
            eprintln!("bench: reading /metrics: {e:#}");
            BatchCounters::default()
        }
    }
}

/// `--kafka-brokers`, or (without it) librdkafka's mock broker holding
/// `topics` (name, partitions), started here and kept alive by the value
/// returned with its address.
pub(crate) fn brokers_or_mock(
    args: &BenchArgs,
    topics: &[(&str, i32)],
) -> (String, Option<kafka::MockKafka>) {
    if let Some(brokers) = &args.kafka_brokers {
        return (brokers.clone(), None);
    }
    let mock = kafka::MockKafka::start(1);
    for (topic, partitions) in topics {
        mock.create_topic(topic, *partitions);
    }
    (mock.bootstrap().to_string(), Some(mock))
}
