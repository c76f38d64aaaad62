//! `trustmsg bench` keeps its promises: it runs every phase, writes the JSON,
//! prints `ratio=<x>` as its last line, and drops the database it created.
//! (Tiny sizes: this checks the harness, not the speed.)

use std::process::{Command, Output};

/// Runs `command` to its end; returns its output and its pid, which the
/// bench puts in the names of the databases it creates.
fn run(command: &mut Command) -> (Output, u32) {
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run trustmsg bench");
    let pid = child.id();
    (
        child.wait_with_output().expect("wait for trustmsg bench"),
        pid,
    )
}

/// Runs `trustmsg bench --quick --concurrency 4 --duration 1s <args…>`
/// with its JSON report in a file of its own and its log quiet; asserts it
/// succeeded (`what` names the run in the failure) and returns its stdout,
/// its report and its pid.
fn bench(what: &str, args: &[&str]) -> (String, serde_json::Value, u32) {
    let json = tempfile::NamedTempFile::new().unwrap();
    let (out, pid) = run(Command::new(env!("CARGO_BIN_EXE_trustmsg"))
        .args(["bench", "--quick", "--concurrency", "4", "--duration", "1s"])
        .args(args)
        .args(["--json", json.path().to_str().unwrap()])
        .env("TRUSTMSG_LOG", "error"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = serde_json::from_str(&std::fs::read_to_string(json.path()).unwrap()).unwrap();
    (stdout, report, pid)
}

use trustmsg_tests::mysql_server_url;

/// The databases bench run `pid` made that are still on the MySQL server
/// (only its own: other benches may be running on the same server).
async fn mysql_left_by(pid: u32) -> Vec<String> {
    let admin = sqlx::MySqlPool::connect(&mysql_server_url()).await.unwrap();
    sqlx::query_scalar(
        "SELECT CAST(SCHEMA_NAME AS CHAR) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?",
    )
    .bind(format!("trustmsg\\_bench\\_{pid}\\_%"))
    .fetch_all(&admin)
    .await
    .unwrap()
}

/// The same on the PostgreSQL server.
async fn postgres_left_by(pid: u32) -> Vec<String> {
    let url = trustmsg_tests::postgres_server_url();
    let admin = sqlx::PgPool::connect(&format!("{url}/postgres"))
        .await
        .unwrap();
    sqlx::query_scalar("SELECT datname::TEXT FROM pg_database WHERE starts_with(datname::TEXT, $1)")
        .bind(format!("trustmsg_bench_{pid}_"))
        .fetch_all(&admin)
        .await
        .unwrap()
}

#[tokio::test]
async fn bench_reports_every_phase_ends_with_the_ratio_and_leaves_no_database_behind() {
    let (stdout, report, first) = bench(
        "bench",
        &[
            "--database-url",
            &mysql_server_url(),
            "--verifier-rows",
            "20",
            "--drain-rows",
            "50",
            "--scan-rows",
            "1000",
            // A flag the bench sets itself too: the user's value replaces it.
            "--serve-arg=--sweep-interval=200ms",
        ],
    );
    let last = stdout.lines().last().unwrap_or_default();
    let ratio: f64 = last
        .strip_prefix("ratio=")
        .unwrap_or_else(|| panic!("last line is not ratio=…: {last:?}"))
        .parse()
        .unwrap();
    assert!(ratio > 0.0);
    assert!(
        stdout.contains("innodb_flush_log_at_trx_commit"),
        "{stdout}"
    );

    assert!(report["ceiling_per_s"].as_f64().unwrap() > 0.0);
    // The ceiling is taken before and after the lifecycle; the ratio divides
    // by their mean.
    let rounds: Vec<f64> = report["ceilings_per_s"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_f64().unwrap())
        .collect();
    assert_eq!(rounds.len(), 2, "{rounds:?}");
    assert!(rounds.iter().all(|c| *c > 0.0), "{rounds:?}");
    let mean = (rounds[0] + rounds[1]) / 2.0;
    assert!((report["ceiling_per_s"].as_f64().unwrap() - mean).abs() < 1e-6);
    assert!(
        report["cpu"]["ceiling_after"].is_object(),
        "{}",
        report["cpu"]
    );
    assert!(report["lifecycle"]["messages"].as_u64().unwrap() > 0);
    assert!(report["open_loop"]["messages"].as_u64().unwrap() > 0);
    assert!(report["verifier_per_s"].as_f64().unwrap() > 0.0);
    assert!(report["drain_per_s"].as_f64().unwrap() > 0.0);
    assert_eq!(report["scan_ms"].as_array().unwrap().len(), 1);
    assert!((report["ratio"].as_f64().unwrap() - ratio).abs() < 0.01);
    // What the phases cost: the server's counters (other tests share the
    // server, so only "some"), this machine's CPU and memory.
    let db = &report["lifecycle_db"];
    assert!(db["statements_per_msg"].as_f64().unwrap() > 0.0, "{db}");
    assert!(db["by_kind"]["insert"].as_f64().unwrap() > 0.0, "{db}");
    // Each message is a row written, then changed (its commit, its SENT
    // mark), which InnoDB logs: rows, pages and redo per message.
    assert!(db["rows_per_msg"]["write"].as_f64().unwrap() >= 1.0, "{db}");
    assert!(
        db["rows_per_msg"]["update"].as_f64().unwrap() >= 1.0,
        "{db}"
    );
    assert!(db["page_writes_per_msg"].as_f64().unwrap() > 1.0, "{db}");
    assert!(db["redo_bytes_per_msg"].as_f64().unwrap() > 100.0, "{db}");
    // A service that just started prepares its statements on each of its
    // connections once at least.
    assert!(db["prepares_per_msg"].as_f64().unwrap() > 0.0, "{db}");
    let yardstick = &report["ceiling_db"];
    assert!(
        yardstick["by_kind"]["update"].as_f64().unwrap() >= 0.99,
        "{yardstick}"
    );
    assert!(stdout.contains("redo bytes"), "{stdout}");
    assert!(stdout.contains("statements prepared anew"), "{stdout}");
    // The drain's rows were claimed and marked SENT: updates, per drained row.
    let drain = &report["drain_db"];
    assert!(
        drain["by_kind"]["update"].as_f64().unwrap() > 0.0,
        "{drain}"
    );
    assert!(stdout.contains("database per message:"), "{stdout}");
    assert!(stdout.contains("database per 1,000 rows:"), "{stdout}");
    assert_eq!(report["one_at_a_time"]["count"].as_u64(), Some(200));
    assert!(report["one_at_a_time"]["p50_ms"].as_f64().unwrap() > 0.0);
    // CPU time comes in 10 ms ticks: the 1 s phases (the ceiling, before and
    // after, and the lifecycle) always show some, in this process and in the
    // database server, and never more cores than the machine has; the tiny
    // verifier and drain here (20 and 50 rows) may show none.
    let cores = std::thread::available_parallelism().unwrap().get() as f64;
    for phase in ["ceiling", "ceiling_after", "lifecycle", "verifier", "drain"] {
        let cpu = &report["cpu"][phase];
        let long = matches!(phase, "ceiling" | "ceiling_after" | "lifecycle");
        let process = cpu["bench_process_cores"].as_f64().unwrap();
        // Null only when the server does not run on this machine.
        let db = cpu["database_cores"].as_f64();
        assert!(
            cpu["database_cores"].is_null() || db.is_some(),
            "{phase}: {cpu}"
        );
        // The service runs as a process of its own, measured apart.
        let service = cpu["service_cores"].as_f64();
        let per = &report["cpu_per_message"][phase];
        assert!(per["messages"].as_f64().unwrap() > 0.0, "{phase}: {per}");
        if long {
            let us = per["bench_process_us"].as_f64().unwrap();
            assert!(us > 0.0, "{phase}: {per}");
        }
        if phase == "lifecycle" {
            assert!(service.unwrap() > 0.0, "{phase}: {cpu}");
            assert!(per["service_us"].as_f64().unwrap() > 0.0, "{per}");
        }
        for figure in std::iter::once(process).chain(db).chain(service) {
            if long {
                assert!(
                    figure > 0.0 && figure <= cores * 1.05,
                    "{phase}: {cpu} on {cores} cores"
                );
            } else {
                assert!(figure >= 0.0, "{phase}: {cpu}");
            }
        }
    }
    // commit→Kafka in stages: what follows the commit's answer is a part of it.
    // It may be zero: on a loaded machine the consumer can read a record
    // before the load generator has read its commit's answer (the stage is
    // then counted as 0, not negative).
    for phase in ["lifecycle", "open_loop"] {
        let l = &report[phase];
        let after = l["answer_to_kafka"]["p50_ms"].as_f64().unwrap();
        let whole = l["commit_to_kafka"]["p50_ms"].as_f64().unwrap();
        assert!(
            whole > 0.0 && (0.0..=whole).contains(&after),
            "{phase}: {l}"
        );
        assert_eq!(l["answer_to_kafka"]["count"], l["messages"], "{phase}: {l}");
    }
    assert!(stdout.contains("then answer→consumed"), "{stdout}");
    // The Kafka way in (issue 29): as many messages as the lifecycle carried
    // (at least 1000), each submitted, consumed and SENT, and its statements
    // counted per message as the lifecycle's are.
    let submit = &report["submit"];
    let lifecycle_n = report["lifecycle"]["messages"].as_u64().unwrap();
    assert_eq!(
        submit["messages"].as_u64(),
        Some(lifecycle_n.max(1000)),
        "{submit}"
    );
    assert_eq!(submit["commit_to_kafka"]["count"], submit["messages"]);
    assert!(
        submit["throughput_per_s"].as_f64().unwrap() > 0.0,
        "{submit}"
    );
    assert!(
        submit["batches"]["submit_batches"].as_u64().unwrap() > 0,
        "{submit}"
    );
    let submit_db = &report["submit_db"];
    assert!(
        submit_db["by_kind"]["insert"].as_f64().unwrap() > 0.0,
        "{submit_db}"
    );
    assert!(stdout.contains("× the lifecycle"), "{stdout}");
    assert!(report["peak_rss_mib"].as_f64().unwrap() > 1.0);
    assert!(report["service_peak_rss_mib"].as_f64().unwrap() > 1.0);

    // `--shards 2`: the service over two databases, the lifecycle and the
    // open loop measured, the phases that write behind its back skipped.
    // (In this test, after the first run: both check that the bench drops
    // every database it made.)
    let (stdout, report, second) = bench(
        "bench --shards",
        &["--shards", "2", "--database-url", &mysql_server_url()],
    );
    assert!(stdout.contains("shards 2"), "{stdout}");
    assert_eq!(report["shards"].as_u64(), Some(2));
    assert!(report["lifecycle"]["messages"].as_u64().unwrap() > 0);
    assert!(
        report["cpu_per_message"]["lifecycle"]["service_us"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert!(report["open_loop"]["messages"].as_u64().unwrap() > 0);
    assert!(report["verifier_per_s"].is_null() && report["drain_per_s"].is_null());
    assert!(report["submit"].is_null());

    for pid in [first, second] {
        let left = mysql_left_by(pid).await;
        assert!(left.is_empty(), "bench left databases behind: {left:?}");
    }
}

/// `trustmsg bench --database-url postgres://…` (issue 45): every phase
/// runs on PostgreSQL as on MariaDB, with PostgreSQL's own figures (its
/// durability settings, its WAL and transactions, the CPU of its
/// processes), refuses what is MySQL-only with a message, and drops every
/// database it made.
#[tokio::test]
async fn bench_on_postgresql_reports_every_phase_with_its_own_counters_and_leaves_no_database_behind(
) {
    use trustmsg_tests::postgres_server_url;
    let (stdout, report, pid) = bench(
        "bench",
        &[
            "--database-url",
            &postgres_server_url(),
            "--verifier-rows",
            "20",
            "--drain-rows",
            "50",
            "--outbox-rows",
            "200",
            "--outbox-rates",
            "20,40",
            "--outbox-rows-per-tx",
            "5",
            "--submit-messages",
            "200",
            "--scan-rows",
            "1000",
        ],
    );
    let last = stdout.lines().last().unwrap_or_default();
    assert!(last.starts_with("ratio="), "{last:?}");
    // PostgreSQL's durability settings, not MySQL's.
    let durability = &report["durability"];
    for setting in ["synchronous_commit", "fsync", "wal_sync_method", "version"] {
        assert!(durability[setting].is_string(), "{durability}");
    }
    assert!(durability["innodb_flush_log_at_trx_commit"].is_null());
    // Every phase carried its messages to Kafka (each phase waits for all
    // of them, so a count is a delivery).
    assert!(report["ceiling_per_s"].as_f64().unwrap() > 0.0);
    assert_eq!(report["ceilings_per_s"].as_array().unwrap().len(), 2);
    let lifecycle_n = report["lifecycle"]["messages"].as_u64().unwrap();
    assert!(lifecycle_n > 0);
    assert_eq!(
        report["lifecycle"]["commit_to_kafka"]["count"].as_u64(),
        Some(lifecycle_n)
    );
    assert!(report["ratio"].as_f64().unwrap() > 0.0);
    assert_eq!(report["submit"]["messages"].as_u64(), Some(200));
    assert!(report["open_loop"]["messages"].as_u64().unwrap() > 0);
    assert!(report["verifier_per_s"].as_f64().unwrap() > 0.0);
    assert!(report["drain_per_s"].as_f64().unwrap() > 0.0);
    assert_eq!(report["outbox"]["rows"].as_u64(), Some(200));
    assert!(report["outbox"]["relayed_per_s"].as_f64().unwrap() > 0.0);
    // Both clocks of the latency part time the same rows; from the commit
    // is never longer than from the intended start, which comes before it.
    let outbox = &report["outbox"]["at_half"];
    let count = outbox["commit_to_kafka"]["count"].as_u64().unwrap();
    assert!(count > 0, "{outbox}");
    assert_eq!(outbox["intended_to_kafka"]["count"].as_u64(), Some(count));
    assert!(
        outbox["commit_to_kafka"]["p50_ms"].as_f64().unwrap()
            <= outbox["intended_to_kafka"]["p50_ms"].as_f64().unwrap(),
        "{outbox}"
    );
    assert_eq!(outbox["rows_per_tx"].as_u64(), Some(5), "{outbox}");
    assert!(outbox["cpu"]["database_us"].as_f64().unwrap() > 0.0);
    // Then once at each rate asked for, 5 rows per transaction, every row
    // of each timed (1 s at 20 and 40 rows/s: 4 and 8 transactions), with
    // what each part cost the database and the processes per row.
    let at: Vec<(f64, u64)> = report["outbox"]["at_rates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let n = l["commit_to_kafka"]["count"].as_u64().unwrap();
            assert_eq!(l["intended_to_kafka"]["count"].as_u64(), Some(n), "{l}");
            assert_eq!(l["rows_per_tx"].as_u64(), Some(5), "{l}");
            assert_eq!(l["cpu"]["messages"].as_f64(), Some(n as f64), "{l}");
            for process in ["database_us", "service_us", "bench_process_us"] {
                assert!(l["cpu"][process].as_f64().unwrap() > 0.0, "{l}");
            }
            // Each of its transactions wrote at least its rows' WAL.
            let db = &l["db"];
            assert!(
                db["write_transactions_per_msg"].as_f64().unwrap() > 0.0,
                "{l}"
            );
            (l["rate_per_s"].as_f64().unwrap(), n)
        })
        .collect();
    assert_eq!(at, [(20.0, 20), (40.0, 40)], "{outbox}");
    assert_eq!(report["scan_ms"].as_array().unwrap().len(), 1);
    assert_eq!(report["one_at_a_time"]["count"].as_u64(), Some(200));
    // The exact counters: each message's prepare and commit write (at
    // least one transaction id, hundreds of WAL bytes each); a ceiling
    // pair is two autocommit writes.
    let db = &report["lifecycle_db"];
    assert!(
        db["write_transactions_per_msg"].as_f64().unwrap() >= 1.0,
        "{db}"
    );
    assert!(db["redo_bytes_per_msg"].as_f64().unwrap() > 100.0, "{db}");
    let yardstick = &report["ceiling_db"];
    assert!(
        yardstick["write_transactions_per_msg"].as_f64().unwrap() >= 1.99,
        "{yardstick}"
    );
    assert!(
        yardstick["redo_bytes_per_msg"].as_f64().unwrap() > 100.0,
        "{yardstick}"
    );
    // The statistics PostgreSQL publishes late (up to 10 s): over the whole
    // run, the bench's databases committed transactions and wrote rows.
    let phases = ["ceiling_db", "lifecycle_db", "submit_db", "verifier_db"]
        .into_iter()
        .chain(["drain_db", "outbox_db"]);
    let (mut commits, mut inserted) = (0.0, 0.0);
    for phase in phases {
        let cost = &report[phase];
        commits += cost["transactions_per_msg"]["commit"].as_f64().unwrap();
        inserted += cost["rows_per_msg"]["inserted"].as_f64().unwrap();
    }
    assert!(commits > 0.0 && inserted > 0.0, "{report}");
    assert!(stdout.contains("WAL bytes"), "{stdout}");
    // The server runs here: its processes' CPU (the postmaster and its
    // backends) is measured, and a one-second phase of writes shows some.
    let cores = std::thread::available_parallelism().unwrap().get() as f64;
    for phase in ["ceiling", "lifecycle"] {
        let used = report["cpu"][phase]["database_cores"].as_f64().unwrap();
        assert!(used > 0.0 && used <= cores * 1.05, "{phase}: {used}");
        let per = report["cpu_per_message"][phase]["database_us"]
            .as_f64()
            .unwrap();
        assert!(per > 0.0, "{phase}: {per}");
    }

    // What is MySQL-only is refused before anything is created.
    for (flag, value, says) in [
        ("--shards", "2", "--shards is MySQL-only"),
        ("--target", "http://127.0.0.1:9", "--target is MySQL-only"),
    ] {
        let (out, _) = run(Command::new(env!("CARGO_BIN_EXE_trustmsg")).args([
            "bench",
            "--database-url",
            &postgres_server_url(),
            flag,
            value,
        ]));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flag}: {stderr}");
        assert!(stderr.contains(says), "{flag}: {stderr}");
    }

    let left = postgres_left_by(pid).await;
    assert!(left.is_empty(), "bench left databases behind: {left:?}");
}

#[test]
fn an_outbox_rate_or_rows_per_transaction_out_of_range_is_refused_before_anything_runs() {
    // Each flag, values it refuses, and what its refusal says.
    let cases: [(&str, &[&str], &[&str]); 2] = [
        (
            "--outbox-rates",
            &["0", "-5", "fast", "1000,nan"],
            &["is not a rate: give rows per second, a positive number"],
        ),
        (
            "--outbox-rows-per-tx",
            &["0", "1001", "ten"],
            &["invalid value", "--outbox-rows-per-tx"],
        ),
    ];
    for (flag, values, said) in cases {
        for bad in values {
            let (out, _) = run(Command::new(env!("CARGO_BIN_EXE_trustmsg")).args([
                "bench",
                "--database-url",
                "mysql://root@127.0.0.1:1",
                &format!("{flag}={bad}"),
            ]));
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{flag}={bad}: {stderr}");
            for words in said {
                assert!(stderr.contains(words), "{flag}={bad}: {stderr}");
            }
            assert!(!stderr.contains("connecting"), "{flag}={bad}: {stderr}");
        }
    }
}

/// Runs `trustmsg bench --soak 20s --rate 100 --soak-window 5s` on the
/// server at `url` (retention a fifth of the run: 4 s) and checks its
/// windows, its JSON and that retention kept the table bounded; returns
/// the bench's pid, which names its databases.
fn soak(url: &str) -> u32 {
    let json = tempfile::NamedTempFile::new().unwrap();
    let (out, pid) = run(Command::new(env!("CARGO_BIN_EXE_trustmsg"))
        .args(["bench", "--database-url", url])
        .args(["--soak", "20s", "--rate", "100", "--soak-window", "5s"])
        .args(["--json", json.path().to_str().unwrap()])
        .env("TRUSTMSG_LOG", "error"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "soak failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("window "))
        .collect();
    assert_eq!(lines.len(), 4, "one line per window: {stdout}");
    for needle in [
        "msg/s",
        "cpu µs/msg database",
        "rows, tables",
        "service RSS",
        "calls p50/p99",
        "commit→kafka p50/p99",
    ] {
        assert!(
            lines.iter().all(|l| l.contains(needle)),
            "{needle}: {stdout}"
        );
    }
    assert!(stdout.contains("(goal ≤ 1.1)"), "{stdout}");
    assert!(stdout.contains("(the retention mark)"), "{stdout}");

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json.path()).unwrap()).unwrap();
    assert_eq!(report["retention_s"], 4.0, "a fifth of the run");
    assert_eq!(
        report["partition_period_s"], 1.0,
        "a quarter of the retention"
    );
    let windows = report["windows"].as_array().unwrap();
    assert_eq!(windows.len(), 4);
    let mut sent = 0;
    for w in windows {
        sent += w["messages"].as_u64().unwrap();
        assert!(w["rate_per_s"].as_f64().unwrap() > 0.0, "{w}");
        assert!(w["cpu"]["service_us"].as_f64().unwrap() > 0.0, "{w}");
        // The database runs on this machine in the tests.
        assert!(w["cpu"]["database_us"].as_f64().unwrap() > 0.0, "{w}");
        assert!(w["bytes"].as_u64().unwrap() > 0, "{w}");
        assert!(w["service_rss_mib"].as_f64().unwrap() > 1.0, "{w}");
        assert!(w["calls"]["count"].as_u64().unwrap() > 0, "{w}");
        assert!(w["commit_to_kafka"]["count"].as_u64().unwrap() > 0, "{w}");
        let tables: Vec<&str> = w["tables"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["table"].as_str().unwrap())
            .collect();
        assert_eq!(tables[0], "messages", "{w}");
    }
    // Retention (4 s, partitions of 1 s, looked at every second) kept the
    // table to a few seconds of the load, not the whole run's, and nothing
    // in it older.
    let last = &windows[3];
    let rows = last["message_rows"].as_u64().unwrap();
    assert!(
        rows > 0 && rows * 2 < sent,
        "{rows} rows of {sent} sent: {last}"
    );
    assert!(
        last["oldest_message_age_s"].as_f64().unwrap() < 12.0,
        "{last}"
    );
    let criteria = &report["criteria"];
    for ratio in [
        "db_cpu_ratio",
        "rows_ratio",
        "bytes_ratio",
        "rss_ratio",
        "calls_p99_ratio",
    ] {
        assert!(
            criteria[ratio].as_f64().unwrap() > 0.0,
            "{ratio}: {criteria}"
        );
    }
    assert_eq!(criteria["retention_mark_window"], 2, "{criteria}");
    pid
}

#[tokio::test]
async fn a_soak_prints_a_line_per_window_and_its_criteria_and_retention_keeps_the_table_bounded() {
    let pid = soak(&mysql_server_url());
    let left = mysql_left_by(pid).await;
    assert!(left.is_empty(), "the soak left databases behind: {left:?}");
}

#[tokio::test]
async fn a_soak_on_postgresql_measures_the_same_and_retention_keeps_the_table_bounded() {
    let pid = soak(&trustmsg_tests::postgres_server_url());
    let left = postgres_left_by(pid).await;
    assert!(left.is_empty(), "the soak left databases behind: {left:?}");
}
