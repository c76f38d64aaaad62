//! What a run measured: the JSON report and the printed table.

use std::collections::BTreeMap;

use serde::Serialize;

use super::cost::{CpuPerMessage, DbCost, PhaseCpu};
use super::outbox::Latency;
use super::percentiles::Percentiles;
use super::submit::{BatchSizes, SubmitResult};

/// Latencies of one load phase.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct LoadResult {
    /// Messages prepared, committed, consumed from Kafka and marked SENT per second.
    pub(crate) throughput_per_s: f64,
    /// Messages counted.
    pub(crate) messages: usize,
    /// Messages whose prepare or commit the service answered 503 (open loop
    /// only; a closed loop stops on one), not counted in `messages`.
    pub(crate) shed: usize,
    /// Prepare call latency.
    pub(crate) prepare: Percentiles,
    /// Commit call latency.
    pub(crate) commit: Percentiles,
    /// From the commit call's start to the record being consumed from Kafka.
    pub(crate) commit_to_kafka: Percentiles,
    /// From the commit's answer to the record being consumed: the part of
    /// commit→Kafka after the commit is durable (hand-off to the forwarder,
    /// produce, the broker's acknowledgement, the consumer's fetch).
    pub(crate) answer_to_kafka: Percentiles,
}

/// Everything one run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Report {
    /// What a commit waits for, and the server's version: MySQL's
    /// `innodb_flush_log_at_trx_commit`, `sync_binlog`, `log_bin`;
    /// PostgreSQL's `synchronous_commit`, `fsync`, `wal_sync_method`,
    /// `full_page_writes`.
    pub(crate) durability: serde_json::Value,
    /// Concurrency used.
    pub(crate) concurrency: usize,
    /// Databases the service spread its messages over (`--shards`).
    pub(crate) shards: usize,
    /// Ceiling: INSERT + UPDATE pairs per second straight through sqlx, the
    /// mean of the rounds in `ceilings_per_s`.
    pub(crate) ceiling_per_s: f64,
    /// The ceiling taken before and right after the lifecycle.
    pub(crate) ceilings_per_s: Vec<f64>,
    /// The lifecycle phase.
    pub(crate) lifecycle: LoadResult,
    /// lifecycle throughput ÷ ceiling.
    pub(crate) ratio: f64,
    /// Target arrival rate of the open-loop phase.
    pub(crate) open_loop_rate_per_s: f64,
    /// The open-loop phase (latency from the intended start).
    pub(crate) open_loop: LoadResult,
    /// Check-backs resolved per second (None when skipped).
    pub(crate) verifier_per_s: Option<f64>,
    /// Drain rate, Kafka records per second (None when skipped).
    pub(crate) drain_per_s: Option<f64>,
    /// The outbox phase: the local message table way (None when skipped).
    pub(crate) outbox: Option<super::outbox::OutboxResult>,
    /// The database's work per relayed row, the source's included (None
    /// when skipped).
    pub(crate) outbox_db: Option<DbCost>,
    /// Claim query median time in ms per table size.
    pub(crate) scan_ms: Vec<(u64, f64)>,
    /// Phases that failed, each with why; the others still report.
    pub(crate) failed: Vec<FailedPhase>,
    /// The database's work per INSERT + UPDATE pair of the first ceiling
    /// (the yardstick the lifecycle's is compared with).
    pub(crate) ceiling_db: DbCost,
    /// The database's work per message in the lifecycle phase: statements,
    /// fsyncs, row operations, pages changed, redo bytes.
    pub(crate) lifecycle_db: DbCost,
    /// The same for the verifier, per resolved message (None when skipped).
    pub(crate) verifier_db: Option<DbCost>,
    /// The same for the drain, per drained message (None when skipped).
    pub(crate) drain_db: Option<DbCost>,
    /// Mean batch sizes in the service during the lifecycle phase.
    pub(crate) lifecycle_batches: Option<BatchSizes>,
    /// The submit phase: the Kafka way in (None with `--target`).
    pub(crate) submit: Option<SubmitResult>,
    /// The database's statements and fsyncs per message in the submit
    /// phase, as `lifecycle_db` (None when skipped).
    pub(crate) submit_db: Option<DbCost>,
    /// One producer, one prepare + commit at a time: latency of the pair.
    pub(crate) one_at_a_time: Percentiles,
    /// Cores used per phase, by process.
    pub(crate) cpu: BTreeMap<&'static str, PhaseCpu>,
    /// CPU time per message of each phase (per pair for the ceilings), µs,
    /// by process.
    pub(crate) cpu_per_message: BTreeMap<&'static str, CpuPerMessage>,
    /// Peak resident memory of the bench process (load generator, mock
    /// broker, consumer), MiB, read after the drain.
    pub(crate) peak_rss_mib: Option<f64>,
    /// Peak resident memory of the service's process, MiB, read after the
    /// drain (None with `--target`).
    pub(crate) service_peak_rss_mib: Option<f64>,
    /// `--trace`: what the service exported to the bench's OTLP sink.
    pub(crate) otlp_export: Option<OtlpExport>,
}

/// What reached the bench's OTLP sink (`--trace`).
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub(crate) struct OtlpExport {
    /// Export requests (`POST /v1/traces`).
    pub(crate) requests: u64,
    /// Protobuf bytes in them.
    pub(crate) bytes: u64,
}

impl Report {
    /// Records a phase's cores and, from them, its CPU per one of `messages`.
    pub(crate) fn measured(&mut self, phase: &'static str, cpu: PhaseCpu, messages: f64) {
        self.cpu_per_message
            .insert(phase, cpu.per_message(messages));
        self.cpu.insert(phase, cpu);
    }
}

/// A phase that failed, and why.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FailedPhase {
    pub(crate) phase: &'static str,
    pub(crate) error: String,
}

impl Report {
    /// Records `phase`'s failure, if it failed: the bench goes on with the
    /// next phase and says at the end which failed.
    pub(crate) fn phase(&mut self, phase: &'static str, outcome: anyhow::Result<()>) {
        if let Err(e) = outcome {
            eprintln!("bench: the {phase} phase failed: {e:#}");
            self.failed.push(FailedPhase {
                phase,
                error: format!("{e:#}"),
            });
        }
    }
}

pub(crate) fn print_report(r: &Report) {
    let row = |name: &str, l: &LoadResult| {
        println!(
            "{name:<10} {:>9.0} msg/s  prepare p50/p99/p99.9 {:>6.1}/{:>6.1}/{:>6.1} ms  commit {:>6.1}/{:>6.1}/{:>6.1} ms  commit→kafka {:>6.1}/{:>6.1}/{:>6.1} ms  (n={})",
            l.throughput_per_s,
            l.prepare.p50_ms, l.prepare.p99_ms, l.prepare.p999_ms,
            l.commit.p50_ms, l.commit.p99_ms, l.commit.p999_ms,
            l.commit_to_kafka.p50_ms, l.commit_to_kafka.p99_ms, l.commit_to_kafka.p999_ms,
            l.messages,
        );
        if l.shed > 0 {
            println!("  {} messages shed: prepare or commit answered 503", l.shed);
        }
        println!(
            "  commit→kafka in stages, p50/p99: commit durable and answered {:.1}/{:.1} ms, then answer→consumed {:.1}/{:.1} ms",
            l.commit.p50_ms, l.commit.p99_ms,
            l.answer_to_kafka.p50_ms, l.answer_to_kafka.p99_ms,
        );
    };
    println!("durability {}", r.durability);
    println!("concurrency {}", r.concurrency);
    if r.shards > 1 {
        println!(
            "shards {} (databases on one server; submit, verifier, drain and scan phases skipped)",
            r.shards
        );
    }
    let rounds: Vec<String> = r.ceilings_per_s.iter().map(|c| format!("{c:.0}")).collect();
    println!(
        "ceiling    {:>9.0} insert+update/s (sqlx, autocommit; mean of {} before and after the lifecycle)",
        r.ceiling_per_s,
        rounds.join(" and ")
    );
    row("lifecycle", &r.lifecycle);
    print_db_cost(&r.lifecycle_db, 1.0, "message");
    if let Some(b) = &r.lifecycle_batches {
        print_batches(b);
    }
    match &r.submit {
        Some(s) => {
            println!(
                "submit     {:>9.0} msg/s  ({:.2}× the lifecycle)  produce p50/p99/p99.9 {:>6.1}/{:>6.1}/{:>6.1} ms  commit→kafka {:>6.1}/{:>6.1}/{:>6.1} ms  (n={}, {} in flight)",
                s.throughput_per_s,
                s.vs_lifecycle,
                s.produce.p50_ms, s.produce.p99_ms, s.produce.p999_ms,
                s.commit_to_kafka.p50_ms, s.commit_to_kafka.p99_ms, s.commit_to_kafka.p999_ms,
                s.messages,
                s.in_flight,
            );
            println!(
                "  commit→kafka in stages, p50/p99: commit record acknowledged {:.1}/{:.1} ms after its prepare was handed over, then ack→consumed {:.1}/{:.1} ms",
                s.produce.p50_ms, s.produce.p99_ms,
                s.ack_to_kafka.p50_ms, s.ack_to_kafka.p99_ms,
            );
            if let Some(db) = &r.submit_db {
                print_db_cost(db, 1.0, "message");
            }
            print_batches(&s.batches);
            let one = &s.one_at_a_time;
            println!(
                "  one submitted message at a time: prepare+commit records handed over → consumed p50/p99 {:.2}/{:.2} ms (n={})",
                one.p50_ms, one.p99_ms, one.count
            );
        }
        None => println!("submit     skipped"),
    }
    row(&format!("open@{:.0}", r.open_loop_rate_per_s), &r.open_loop);
    match r.verifier_per_s {
        Some(v) => println!("verifier   {v:>9.0} check-backs resolved/s"),
        None => println!("verifier   skipped"),
    }
    match r.drain_per_s {
        Some(v) => println!("drain      {v:>9.0} msg/s"),
        None => println!("drain      skipped"),
    }
    if let Some(db) = &r.drain_db {
        // A claim or a mark covers up to --sweep-batch rows: per thousand.
        print_db_cost(db, 1000.0, "1,000 rows");
    }
    match &r.outbox {
        Some(o) => {
            println!(
                "outbox     {:>9.0} rows/s relayed ({} committed at once)",
                o.relayed_per_s, o.rows,
            );
            let latency = |l: &Latency| {
                let (rate, c, i, not_started) = (
                    l.rate_per_s,
                    &l.commit_to_kafka,
                    &l.intended_to_kafka,
                    l.not_started,
                );
                let per_tx = match l.rows_per_tx {
                    1 => "one per transaction".to_string(),
                    n => format!("{n} per transaction"),
                };
                let cpu = l.cpu.as_ref().map_or(String::new(), |c| {
                    format!(
                        "; CPU µs per row: database {}, service {}, bench process {:.0}",
                        c.database_us.map_or("-".into(), |u| format!("{u:.0}")),
                        c.service_us.map_or("-".into(), |u| format!("{u:.0}")),
                        c.bench_process_us,
                    )
                });
                println!(
                    "outbox     {per_tx} at {rate:.0}/s: commit→kafka p50/p99/max {:.1}/{:.1}/{:.1} ms (n={}), from the intended start p50/p99 {:.1}/{:.1} ms{cpu}",
                    c.p50_ms, c.p99_ms, c.max_ms, c.count, i.p50_ms, i.p99_ms,
                );
                if not_started > 0 {
                    println!(
                        "  {not_started} rows not started: their transaction got no connection or did not commit in time (more than this machine kept up with)"
                    );
                }
                if let Some(db) = &l.db {
                    print_db_cost(db, 1000.0, "1,000 rows");
                }
            };
            latency(&o.at_half);
            for l in &o.at_rates {
                latency(l);
            }
        }
        None => println!("outbox     skipped"),
    }
    if let Some(db) = &r.outbox_db {
        // The relay's statements cover up to --outbox-batch rows: per thousand.
        print_db_cost(db, 1000.0, "1,000 rows");
    }
    let one = &r.one_at_a_time;
    println!(
        "one at a time: prepare+commit p50/p99 {:.2}/{:.2} ms (n={})",
        one.p50_ms, one.p99_ms, one.count
    );
    let figure = |v: Option<f64>, precision: usize| {
        v.map_or("-".to_string(), |v| format!("{v:.precision$}"))
    };
    for (phase, cpu) in &r.cpu {
        println!(
            "cpu {phase:<13} cores used: database {}, service {}, bench process (load, broker, consumer) {:.2}",
            figure(cpu.database_cores, 2),
            figure(cpu.service_cores, 2),
            cpu.bench_process_cores
        );
    }
    for (phase, per) in &r.cpu_per_message {
        let unit = if phase.starts_with("ceiling") {
            "pair"
        } else {
            "message"
        };
        println!(
            "cpu {phase:<13} µs per {unit}: database {}, service {}, bench process {:.0} (n={:.0})",
            figure(per.database_us, 0),
            figure(per.service_us, 0),
            per.bench_process_us,
            per.messages
        );
    }
    println!("  yardstick, database per ceiling pair:");
    print_db_cost(&r.ceiling_db, 1.0, "pair");
    if let Some(db) = &r.verifier_db {
        println!("  verifier, database per resolved message:");
        print_db_cost(db, 1.0, "message");
    }
    if let Some(mib) = r.peak_rss_mib {
        println!("peak RSS of the bench process: {mib:.0} MiB");
    }
    if let Some(mib) = r.service_peak_rss_mib {
        println!("peak RSS of the service: {mib:.0} MiB");
    }
    if let Some(o) = r.otlp_export {
        println!(
            "trace      every prepare traced; spans exported: {} OTLP requests, {:.1} MiB",
            o.requests,
            o.bytes as f64 / (1 << 20) as f64
        );
    }
    for (rows, ms) in &r.scan_ms {
        println!("scan       {rows:>9} rows: claim of 256 due rows p50 {ms:.2} ms");
    }
    for f in &r.failed {
        println!("FAILED     the {} phase: {}", f.phase, f.error);
    }
}

/// Mean batch sizes, those the phase had.
fn print_batches(b: &BatchSizes) {
    let mean = |m: Option<f64>| m.map_or("-".to_string(), |m| format!("{m:.1}"));
    let submit = match b.submit {
        Some(m) => format!(
            "{m:.1} records from the submit topic ({} batches), ",
            b.submit_batches
        ),
        None => String::new(),
    };
    println!(
        "  mean batches: {submit}{} prepares per INSERT, {} decisions per UPDATE",
        mean(b.prepare),
        mean(b.decide),
    );
}

/// `db`'s figures times `scale`, "per `unit`".
fn print_db_cost(db: &DbCost, scale: f64, unit: &str) {
    match db {
        DbCost::Mysql(db) => {
            println!(
                "  database per {unit}: {:.2} statements ({}), {:.2} redo log fsyncs, {:.2} data fsyncs",
                db.statements_per_msg * scale,
                nonzero(&db.by_kind, scale),
                db.log_fsyncs_per_msg * scale,
                db.data_fsyncs_per_msg * scale,
            );
            println!(
                "    rows ({}), {:.1} page changes, {:.0} redo bytes, {:.3} statements prepared anew",
                nonzero(&db.rows_per_msg, scale),
                db.page_writes_per_msg * scale,
                db.redo_bytes_per_msg * scale,
                db.prepares_per_msg * scale,
            );
        }
        DbCost::Postgres(db) => {
            let statements = match db.statements_per_msg {
                Some(n) => format!(
                    "{:.2} statements ({})",
                    n * scale,
                    nonzero(&db.by_kind, scale)
                ),
                None => "statements not counted (no pg_stat_statements)".to_string(),
            };
            println!(
                "  database per {unit}: {statements}, {:.2} transactions ({}; {:.2} that wrote), {:.2} WAL fsyncs",
                db.transactions_per_msg.values().sum::<f64>() * scale,
                nonzero(&db.transactions_per_msg, scale),
                db.write_transactions_per_msg * scale,
                db.log_fsyncs_per_msg * scale,
            );
            println!(
                "    rows ({}), blocks ({}), {:.0} WAL bytes in {:.1} records ({:.2} full-page images)",
                nonzero(&db.rows_per_msg, scale),
                nonzero(&db.blocks_per_msg, scale),
                db.redo_bytes_per_msg * scale,
                db.wal_records_per_msg * scale,
                db.wal_fpi_per_msg * scale,
            );
        }
    }
}

/// "1.00 insert, 0.25 update": each figure of `by_kind` times `scale`, those
/// that round to more than zero.
fn nonzero(by_kind: &BTreeMap<String, f64>, scale: f64) -> String {
    by_kind
        .iter()
        .map(|(k, v)| (k, v * scale))
        .filter(|(_, v)| *v > 0.005)
        .map(|(k, v)| format!("{v:.2} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}
