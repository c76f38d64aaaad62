//! `trustmsg bench --soak DURATION --rate R`: the producer API at a fixed
//! rate for a long time, with a retention shorter than the run, to show
//! whether what a message costs grows with time.
//!
//! The load is the open loop's (`load::arrival` on the `OpenLoop` clock):
//! HTTP prepare + commit at fixed arrival times, each call's latency
//! charged from its intended start. The service is started as for the
//! phases, with `--retention` set to `--soak-retention` (a fifth of the
//! run by default) and `--partition-period` to `--soak-partition-period`
//! (a quarter of the retention by default), so rows begin to go early and
//! the second half runs with retention removing as much as the load writes.
//!
//! Every `--soak-window` one line: the rate reached, the database's and
//! the service's CPU per message (the phases' [`Meter`]), the large tables'
//! rows and bytes (the store's own `storage`, as `/metrics` reads them),
//! the service's resident memory, and p50/p99 of the calls and of commit →
//! Kafka (the bench's consumer, as in the phases). At the end a summary
//! states the criteria as ratios: database CPU per message in the
//! second half over the windows before the retention mark but the first,
//! a warm-up (goal ≤ 1.1),
//! rows and bytes in the last window over the window at the retention
//! mark, and RSS and p99 in the last window over the first.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use tokio::sync::mpsc;
use trustmsg::config::Secret;
use trustmsg::store::{Backend, DatabaseUrl, DynStore, Storage};
use trustmsg_kafka_mock as kafka;

use super::cost::{self, CpuPerMessage, DbCost};
use super::load::{arrival, Arrival, Client};
use super::open_loop::OpenLoop;
use super::percentiles::Percentiles;
use super::phases::CheckEndpoint;
use super::server::{url_of, Db};
use super::{brokers_or_mock, database_name, BenchArgs, Launch, Meter, TOPIC};

/// What a soak measured, window by window, and its criteria.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SoakReport {
    /// `mysql` or `postgres`.
    pub(crate) database: &'static str,
    /// What a commit waits for on this server, and its version.
    pub(crate) durability: serde_json::Value,
    /// The arrival rate asked for, messages per second.
    pub(crate) rate_per_s: f64,
    pub(crate) duration_s: f64,
    pub(crate) window_s: f64,
    /// The service's `--retention`.
    pub(crate) retention_s: f64,
    /// The service's `--partition-period`.
    pub(crate) partition_period_s: f64,
    pub(crate) windows: Vec<SoakWindow>,
    pub(crate) criteria: Criteria,
}

/// One window of a soak.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SoakWindow {
    /// 1 for the first.
    pub(crate) window: usize,
    /// Seconds from the soak's start to the window's end.
    pub(crate) end_s: f64,
    /// Messages whose commit was answered in the window, per second.
    pub(crate) rate_per_s: f64,
    /// Those messages.
    pub(crate) messages: usize,
    /// Messages the service shed (503) in the window.
    pub(crate) shed: usize,
    /// Calls that failed otherwise (the soak goes on; the first is printed).
    pub(crate) failed: usize,
    /// CPU µs per message, by process.
    pub(crate) cpu: CpuPerMessage,
    /// The database's work per message, as its counters say.
    pub(crate) db: DbCost,
    /// The large tables at the window's end (the catalog's figures).
    pub(crate) tables: Vec<TableFigures>,
    /// Rows of `messages` (the engine's estimate).
    pub(crate) message_rows: u64,
    /// Bytes of every large table, data and indexes.
    pub(crate) bytes: u64,
    /// How old the oldest stored message was.
    pub(crate) oldest_message_age_s: f64,
    /// The service's resident memory at the window's end.
    pub(crate) service_rss_mib: Option<f64>,
    /// Every HTTP call of the window, prepares and commits together.
    pub(crate) calls: Percentiles,
    pub(crate) prepare: Percentiles,
    pub(crate) commit: Percentiles,
    /// From the commit call's start to the record read from Kafka, for
    /// the records read in the window.
    pub(crate) commit_to_kafka: Percentiles,
}

/// One large table's figures at a window's end.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TableFigures {
    pub(crate) table: String,
    pub(crate) rows: u64,
    pub(crate) bytes: u64,
}

/// The criteria, each a ratio (None when a window it needs is
/// missing, e.g. a soak shorter than its retention).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Criteria {
    /// Windows that ended before the retention mark (no row old enough to
    /// go yet) but the first, a warm-up, unless it is the only one: the
    /// "first minutes".
    pub(crate) first_windows: usize,
    /// Database CPU µs per message over them.
    pub(crate) db_us_first: Option<f64>,
    /// Over the windows that started in the second half of the run.
    pub(crate) db_us_second_half: Option<f64>,
    /// Second half ÷ first; the goal is at most 1.1.
    pub(crate) db_cpu_ratio: Option<f64>,
    /// The first window that started once rows were old enough to go.
    pub(crate) retention_mark_window: usize,
    /// `messages` rows, last window ÷ the window at the retention mark.
    pub(crate) rows_ratio: Option<f64>,
    /// Bytes of the large tables, the same.
    pub(crate) bytes_ratio: Option<f64>,
    /// Service RSS, last window ÷ first.
    pub(crate) rss_ratio: Option<f64>,
    /// p99 of the calls, last window ÷ first.
    pub(crate) calls_p99_ratio: Option<f64>,
    /// p99 of commit → Kafka, last window ÷ first.
    pub(crate) kafka_p99_ratio: Option<f64>,
}

/// Runs the soak in a database of its own on `--database-url`'s server,
/// dropped at the end; prints the windows as they end, then the summary.
pub(crate) async fn run(args: &BenchArgs) -> anyhow::Result<SoakReport> {
    anyhow::ensure!(
        args.target.is_none() && args.shards == 1,
        "--soak starts its own service over one database: leave out --target and --shards"
    );
    let server = url_of(&args.database_url, None)?;
    let db_name = database_name();
    let admin = Db::connect(&server, 2, &db_name).await?;
    admin.create_database(&db_name).await?;
    let result = async { run_in(args, &url_of(&server, Some(&db_name))?, &db_name).await }.await;
    let _ = admin.drop_database(&db_name).await;
    let report = result?;
    print_summary(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(report)
}

async fn run_in(args: &BenchArgs, url: &DatabaseUrl, db_name: &str) -> anyhow::Result<SoakReport> {
    let (duration, rate) = (
        args.soak.context("--soak takes a duration")?,
        args.rate.context("--soak needs --rate")?,
    );
    let window = args.soak_window;
    anyhow::ensure!(
        !window.is_zero() && window <= duration,
        "--soak-window must be longer than 0 and at most --soak"
    );
    let retention = args
        .soak_retention
        .unwrap_or(duration / 5)
        .max(Duration::from_secs(1));
    let pool = Db::connect(url, 4, db_name).await?;
    let (brokers, mock) = brokers_or_mock(args, &[(TOPIC, 4)]);
    let checker = CheckEndpoint::start().await?;
    let admin_token = Secret::new(format!("bench-{}", rand::random::<u64>()));
    let retention_flag = humantime::format_duration(retention).to_string();
    // The partitioned stores drop a period at a time: periods a quarter of
    // the retention let rows go within a run, not after a day.
    let period = args
        .soak_partition_period
        .unwrap_or(retention / 4)
        .max(Duration::from_secs(1));
    let period_flag = humantime::format_duration(period).to_string();
    let launch = Launch {
        db_urls: std::slice::from_ref(url),
        source_flag: None,
        brokers: &brokers,
        mock: mock.is_some(),
        otlp: None,
        admin_token: &admin_token,
    };
    let service = launch
        .start(
            args,
            &[
                ("--retention", Some(&retention_flag)),
                ("--partition-period", Some(&period_flag)),
            ],
        )
        .await?;
    let client = Client::new(&service.base, admin_token.expose(), 64, args.ordered, false);
    // Never checked back: every message is committed long before.
    let token = client
        .register("bench", &checker.url, 3_600_000)
        .await
        .context("registering the bench producer")?;
    let store = trustmsg::store::connect(url).await?;
    let (consumed, stop_consumer) = kafka::consume(&brokers, TOPIC)?;
    let plan = Plan {
        duration,
        rate,
        window,
    };
    let windows = soak(
        &plan,
        (&client, &token),
        &pool,
        &store,
        service.pid(),
        consumed,
    )
    .await;
    stop_consumer.set();
    service.stop().await?;
    drop(mock);
    let windows = windows?;
    Ok(SoakReport {
        database: match url.backend() {
            Backend::Postgres => "postgres",
            _ => "mysql",
        },
        durability: pool.durability().await?,
        rate_per_s: rate,
        duration_s: duration.as_secs_f64(),
        window_s: window.as_secs_f64(),
        retention_s: retention.as_secs_f64(),
        partition_period_s: period.as_secs_f64(),
        criteria: Criteria::of(&windows, duration, retention, window),
        windows,
    })
}

/// How long, how fast, and how often to measure.
struct Plan {
    duration: Duration,
    rate: f64,
    window: Duration,
}

/// What became of one arrival.
enum Outcome {
    Done(Arrival),
    Shed,
    Failed(String),
}

/// Runs the open loop for the plan's duration and measures each window.
async fn soak(
    plan: &Plan,
    (client, token): (&Client, &str),
    pool: &Db,
    store: &DynStore,
    service_pid: &str,
    mut consumed: mpsc::UnboundedReceiver<kafka::Consumed>,
) -> anyhow::Result<Vec<SoakWindow>> {
    let schedule = OpenLoop::new(Duration::from_secs_f64(1.0 / plan.rate), plan.duration);
    let start = schedule.start;
    let (tx, mut outcomes) = mpsc::unbounded_channel();
    let load = tokio::spawn(generate(schedule, client.clone(), token.to_string(), tx));
    let mut matcher = Matcher::default();
    let mut windows = Vec::new();
    let count = (plan.duration.as_secs_f64() / plan.window.as_secs_f64()).ceil() as usize;
    for n in 1..=count {
        let end = start + (plan.window * n as u32).min(plan.duration);
        let meter = Meter::start(pool, Some(service_pid)).await?;
        let mut w = Window::default();
        let deadline = tokio::time::Instant::from_std(end);
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => break,
                Some(o) = outcomes.recv() => w.add(o, &mut matcher),
                Some(c) = consumed.recv() => {
                    if let Some(l) = matcher.read(c.message_id, c.at) {
                        w.to_kafka.push(l);
                    }
                }
            }
        }
        let (cores, db) = meter.read(pool, w.answered as f64).await?;
        let storage = store.storage().await?;
        let cpu = cores.per_message(w.answered as f64);
        let window = w.finish(
            (n, end.duration_since(start), plan.window),
            cpu,
            db,
            &storage,
            cost::rss_mib(service_pid),
        );
        print_window(&window);
        windows.push(window);
    }
    load.abort();
    Ok(windows)
}

/// The open loop's arrivals, each a task of its own, until the schedule
/// ends; each outcome is sent to the measuring loop.
async fn generate(
    mut schedule: OpenLoop,
    client: Client,
    token: String,
    tx: mpsc::UnboundedSender<Outcome>,
) {
    let mut calls = tokio::task::JoinSet::new();
    while let Some((i, intended)) = schedule.next().await {
        let (client, token, tx) = (client.clone(), token.clone(), tx.clone());
        calls.spawn(async move {
            let outcome = match arrival(&client, &token, &format!("s-{i}"), intended).await {
                Ok(Some(a)) => Outcome::Done(a),
                Ok(None) => Outcome::Shed,
                Err(e) => Outcome::Failed(format!("{e:#}")),
            };
            let _ = tx.send(outcome);
        });
        // Ended calls are reaped as the loop goes, not kept for hours.
        while calls.try_join_next().is_some() {}
    }
    while calls.join_next().await.is_some() {}
}

/// Pairs each committed message with its record read from Kafka, in
/// whichever order the two are seen.
#[derive(Default)]
struct Matcher {
    committed: HashMap<u64, Instant>,
    read: HashMap<u64, Instant>,
}

impl Matcher {
    /// Message `id`'s commit started `at`: commit → Kafka if its record was read.
    fn committed(&mut self, id: u64, at: Instant) -> Option<Duration> {
        match self.read.remove(&id) {
            Some(read) => Some(read.saturating_duration_since(at)),
            None => {
                self.committed.insert(id, at);
                None
            }
        }
    }

    /// Message `id`'s record was read `at`: commit → Kafka if its commit is known.
    fn read(&mut self, id: u64, at: Instant) -> Option<Duration> {
        match self.committed.remove(&id) {
            Some(committed) => Some(at.saturating_duration_since(committed)),
            None => {
                self.read.insert(id, at);
                None
            }
        }
    }
}

/// A window's samples as they come.
#[derive(Default)]
struct Window {
    answered: usize,
    shed: usize,
    failed: usize,
    prepare: Vec<Duration>,
    commit: Vec<Duration>,
    to_kafka: Vec<Duration>,
}

impl Window {
    fn add(&mut self, outcome: Outcome, matcher: &mut Matcher) {
        match outcome {
            Outcome::Done(a) => {
                self.answered += 1;
                self.prepare.push(a.prepare);
                self.commit.push(a.commit);
                if let Some(l) = matcher.committed(a.id, a.committed_at) {
                    self.to_kafka.push(l);
                }
            }
            Outcome::Shed => self.shed += 1,
            Outcome::Failed(e) => {
                if self.failed == 0 {
                    eprintln!("bench: soak: a call failed (the soak goes on): {e}");
                }
                self.failed += 1;
            }
        }
    }

    fn finish(
        self,
        (window, end, length): (usize, Duration, Duration),
        cpu: CpuPerMessage,
        db: DbCost,
        storage: &Storage,
        service_rss_mib: Option<f64>,
    ) -> SoakWindow {
        let calls: Vec<Duration> = self.prepare.iter().chain(&self.commit).copied().collect();
        let tables: Vec<TableFigures> = storage
            .tables
            .iter()
            .map(|t| TableFigures {
                table: t.table.clone(),
                rows: t.rows,
                bytes: t.bytes,
            })
            .collect();
        SoakWindow {
            window,
            end_s: end.as_secs_f64(),
            rate_per_s: self.answered as f64 / length.as_secs_f64(),
            messages: self.answered,
            shed: self.shed,
            failed: self.failed,
            cpu,
            db,
            message_rows: tables
                .iter()
                .find(|t| t.table == "messages")
                .map_or(0, |t| t.rows),
            bytes: tables.iter().map(|t| t.bytes).sum(),
            tables,
            oldest_message_age_s: storage.oldest_message_at.map_or(0.0, |t| {
                (storage.at - t).num_milliseconds().max(0) as f64 / 1000.0
            }),
            service_rss_mib,
            calls: Percentiles::of(calls),
            prepare: Percentiles::of(self.prepare),
            commit: Percentiles::of(self.commit),
            commit_to_kafka: Percentiles::of(self.to_kafka),
        }
    }
}

impl Criteria {
    fn of(
        windows: &[SoakWindow],
        duration: Duration,
        retention: Duration,
        length: Duration,
    ) -> Self {
        let (Some(first), Some(last)) = (windows.first(), windows.last()) else {
            return Self::default();
        };
        let (retention, half, length) = (
            retention.as_secs_f64(),
            duration.as_secs_f64() / 2.0,
            length.as_secs_f64(),
        );
        let start = |w: &SoakWindow| w.end_s - length;
        let before: Vec<&SoakWindow> = windows
            .iter()
            .filter(|w| w.end_s <= retention + 1e-9)
            .collect();
        // The first window is a warm-up (the service's connections and
        // caches, a shed burst while they fill): left out when another
        // window comes before the mark.
        let before = match before.len() {
            0 => vec![first],
            1 => before,
            _ => before[1..].to_vec(),
        };
        let second: Vec<&SoakWindow> = windows.iter().filter(|w| start(w) >= half - 1e-9).collect();
        let second = if second.is_empty() {
            vec![last]
        } else {
            second
        };
        let mark = windows
            .iter()
            .find(|w| start(w) >= retention - 1e-9)
            .unwrap_or(last);
        let (db_us_first, db_us_second_half) = (database_us(&before), database_us(&second));
        Self {
            first_windows: before.len(),
            db_cpu_ratio: ratio(db_us_second_half, db_us_first),
            db_us_first,
            db_us_second_half,
            retention_mark_window: mark.window,
            rows_ratio: ratio(
                Some(last.message_rows as f64),
                Some(mark.message_rows as f64),
            ),
            bytes_ratio: ratio(Some(last.bytes as f64), Some(mark.bytes as f64)),
            rss_ratio: ratio(last.service_rss_mib, first.service_rss_mib),
            calls_p99_ratio: ratio(Some(last.calls.p99_ms), Some(first.calls.p99_ms)),
            kafka_p99_ratio: ratio(
                Some(last.commit_to_kafka.p99_ms),
                Some(first.commit_to_kafka.p99_ms),
            ),
        }
    }
}

/// The database's CPU µs per message over `windows`, each weighted by its
/// messages.
fn database_us(windows: &[&SoakWindow]) -> Option<f64> {
    let mut us = 0.0;
    let mut messages = 0.0;
    for w in windows {
        us += w.cpu.database_us? * w.cpu.messages;
        messages += w.cpu.messages;
    }
    (messages > 0.0).then(|| us / messages)
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

fn figure(v: Option<f64>, precision: usize) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.precision$}"))
}

fn print_window(w: &SoakWindow) {
    println!(
        "window {:>3} {:>6.0}s {:>7.1} msg/s  cpu µs/msg database {:>5} service {:>5}  messages {:>8} rows, tables {:>8.1} MiB  oldest {:>5.0}s  service RSS {:>6} MiB  calls p50/p99 {:>6.1}/{:>6.1} ms  commit→kafka p50/p99 {:>6.1}/{:>6.1} ms{}",
        w.window,
        w.end_s,
        w.rate_per_s,
        figure(w.cpu.database_us, 0),
        figure(w.cpu.service_us, 0),
        w.message_rows,
        mib(w.bytes),
        w.oldest_message_age_s,
        figure(w.service_rss_mib, 0),
        w.calls.p50_ms,
        w.calls.p99_ms,
        w.commit_to_kafka.p50_ms,
        w.commit_to_kafka.p99_ms,
        match (w.shed, w.failed) {
            (0, 0) => String::new(),
            (shed, failed) => format!("  ({shed} shed, {failed} failed)"),
        },
    );
}

fn print_summary(r: &SoakReport) {
    let c = &r.criteria;
    let x = |v: Option<f64>| figure(v, 2);
    println!(
        "soak {:.0} s at {:.0} msg/s on {} (the service's --retention {:.0} s, --partition-period {:.0} s, {} windows of {:.0} s)",
        r.duration_s,
        r.rate_per_s,
        r.database,
        r.retention_s,
        r.partition_period_s,
        r.windows.len(),
        r.window_s
    );
    println!(
        "database CPU per message: {} µs in {} window(s) before the retention mark (not the first, a warm-up, unless alone), {} µs in the second half: {}× (goal ≤ 1.1)",
        figure(c.db_us_first, 0),
        c.first_windows,
        figure(c.db_us_second_half, 0),
        x(c.db_cpu_ratio),
    );
    println!(
        "tables: messages rows last window ÷ window {} (the retention mark) {}×, bytes {}×",
        c.retention_mark_window,
        x(c.rows_ratio),
        x(c.bytes_ratio),
    );
    println!(
        "service RSS last ÷ first {}×; p99 last ÷ first: calls {}×, commit→kafka {}×",
        x(c.rss_ratio),
        x(c.calls_p99_ratio),
        x(c.kafka_p99_ratio),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(n: usize, database_us: f64, rows: u64) -> SoakWindow {
        SoakWindow {
            window: n,
            end_s: n as f64 * 10.0,
            rate_per_s: 100.0,
            messages: 1000,
            shed: 0,
            failed: 0,
            cpu: CpuPerMessage {
                messages: 1000.0,
                database_us: Some(database_us),
                service_us: Some(1.0),
                bench_process_us: 1.0,
            },
            db: DbCost::default(),
            tables: Vec::new(),
            message_rows: rows,
            bytes: rows * 100,
            oldest_message_age_s: 0.0,
            service_rss_mib: Some(10.0 + n as f64),
            calls: Percentiles::default(),
            prepare: Percentiles::default(),
            commit: Percentiles::default(),
            commit_to_kafka: Percentiles::default(),
        }
    }

    #[test]
    fn criteria_compare_the_second_half_with_the_windows_before_the_retention_mark() {
        // 60 s in windows of 10 s, retention 20 s: windows 1 and 2 end
        // before the mark (1 a warm-up, left out), window 3 starts at it,
        // 4 to 6 are the second half.
        let windows: Vec<SoakWindow> = [300.0, 100.0, 110.0, 120.0, 120.0, 120.0]
            .iter()
            .zip([1000, 2000, 2500, 2500, 2500, 2600])
            .enumerate()
            .map(|(i, (&us, rows))| window(i + 1, us, rows))
            .collect();
        let c = Criteria::of(
            &windows,
            Duration::from_secs(60),
            Duration::from_secs(20),
            Duration::from_secs(10),
        );
        assert_eq!(c.first_windows, 1);
        assert_eq!(c.db_us_first, Some(100.0));
        assert_eq!(c.db_us_second_half, Some(120.0));
        assert!((c.db_cpu_ratio.unwrap() - 1.2).abs() < 1e-9);
        assert_eq!(c.retention_mark_window, 3);
        assert!((c.rows_ratio.unwrap() - 2600.0 / 2500.0).abs() < 1e-9);
        assert!((c.rss_ratio.unwrap() - 16.0 / 11.0).abs() < 1e-9);
    }

    #[test]
    fn a_record_read_before_its_commit_was_answered_is_still_paired() {
        let mut m = Matcher::default();
        let t0 = Instant::now();
        assert_eq!(m.read(7, t0 + Duration::from_millis(5)), None);
        assert_eq!(m.committed(7, t0), Some(Duration::from_millis(5)));
        assert_eq!(m.committed(8, t0), None);
        assert_eq!(
            m.read(8, t0 + Duration::from_millis(9)),
            Some(Duration::from_millis(9))
        );
        assert!(m.committed.is_empty() && m.read.is_empty());
    }
}
