//! What an operator sees of the tables' growth, through the real binary:
//! the large tables' rows and bytes and the oldest message's age in
//! `/metrics` and `GET /v1/admin/storage` on MariaDB and PostgreSQL, the
//! default retention of 7 days, and the start-up warning when retention is
//! turned off (and none when it is on).

use std::time::Duration;

use trustmsg_client::{Message, Producer};
use trustmsg_tests::{within, Metrics, PgTestDb, ServiceProcess, TestDb, UNREACHABLE_VERIFY_URL};

use crate::harness::{settings, Kafka};

const TOPIC: &str = "e2e-table-sizes";

/// What the start-up warning of `--retention 0` says first.
const RETENTION_OFF: &str = "--retention 0: finished messages are never deleted";

fn table_gauge(m: &Metrics, name: &str, table: &str) -> f64 {
    m.value(name, &[("table", table)]).unwrap_or(0.0)
}

/// Prepares and commits 30 messages through the service at `database_url`,
/// then reads the gauges (every 200 ms) and the admin API until they show them.
async fn sizes_are_shown(database_url: &str) {
    let kafka = Kafka::start(&[TOPIC]);
    let service = ServiceProcess::start_logged(
        database_url,
        kafka.mock.bootstrap(),
        &["--table-size-interval", "200ms"],
        None,
    )
    .await;
    let (token, _) = service
        .register("shop", settings(UNREACHABLE_VERIFY_URL, 3_600_000, 5))
        .await;
    let producer = Producer::new(&service.url(), "shop", token).unwrap();
    for i in 0..30 {
        let key = format!("k{i}");
        producer
            .prepare(&Message::new(&key, TOPIC, "p".repeat(200)))
            .await
            .unwrap();
        producer.commit(&key).await.unwrap();
    }
    // The first message is at least this old by the time the gauge is read.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let shown = within(30, async || {
        let m = service.metrics().await;
        table_gauge(&m, "trustmsg_table_rows", "messages") >= 30.0
            && m.value("trustmsg_oldest_message_age_seconds", &[])
                .unwrap_or(0.0)
                >= 1.0
    })
    .await;
    let m = service.metrics().await;
    let lines: Vec<&str> = m
        .text()
        .lines()
        .filter(|l| l.starts_with("trustmsg_table") || l.starts_with("trustmsg_oldest"))
        .collect();
    assert!(
        shown,
        "the table gauges never showed the messages:\n{}",
        lines.join("\n")
    );
    for table in ["messages", "audit_log", "check_attempts", "alerts"] {
        assert!(
            table_gauge(&m, "trustmsg_table_bytes", table) > 0.0,
            "{table}: {}",
            m.text()
        );
    }
    // An estimate, not a count, but nowhere near double.
    assert!(table_gauge(&m, "trustmsg_table_rows", "messages") < 60.0);
    assert!(m.value("trustmsg_oldest_message_age_seconds", &[]).unwrap() < 600.0);

    let storage = service.admin_get("/v1/admin/storage").await;
    let tables = storage["tables"].as_array().unwrap();
    assert_eq!(tables[0]["table"], "messages", "{storage}");
    assert!(tables[0]["rows"].as_u64().unwrap() >= 30, "{storage}");
    assert!(tables[0]["bytes"].as_u64().unwrap() > 0, "{storage}");
    assert!(storage["oldest_message_age_secs"].as_f64().unwrap() >= 1.0);
    assert!(storage["oldest_message_at"].is_string(), "{storage}");
    // Retention is on by default, for a week.
    assert_eq!(storage["retention_secs"], 7 * 24 * 3600, "{storage}");
    // Both servers' tables are partitioned by time: the oldest partition
    // is named, with when it began.
    let oldest = &storage["oldest_partition"];
    assert!(
        oldest["name"].as_str().is_some_and(|n| n.starts_with('p')),
        "{storage}"
    );
    assert!(oldest["from"].is_string(), "{storage}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mariadb_the_tables_sizes_and_the_oldest_message_are_in_metrics_and_the_admin_api() {
    let db = TestDb::create().await;
    sizes_are_shown(&db.url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_the_tables_sizes_and_the_oldest_message_are_in_metrics_and_the_admin_api() {
    let db = PgTestDb::named();
    sizes_are_shown(&db.url).await;
    db.drop_db().await;
}

/// The service's log once it is ready, started with `extra`.
async fn start_up_log(extra: &[&str]) -> String {
    let db = TestDb::create().await;
    let kafka = Kafka::start(&[TOPIC]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("service.log");
    let mut service =
        ServiceProcess::start_logged(&db.url, kafka.mock.bootstrap(), extra, Some(log.clone()))
            .await;
    service.terminate_cleanly();
    std::fs::read_to_string(&log).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_off_is_warned_at_start_up_and_the_default_is_not() {
    let off = start_up_log(&["--retention", "0"]).await;
    let line = off
        .lines()
        .find(|l| l.contains(RETENTION_OFF))
        .unwrap_or_else(|| panic!("no warning that retention is off:\n{off}"));
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("grow without bound"), "{line}");
    assert!(
        line.contains("--retention 7d"),
        "says how to turn it on: {line}"
    );

    let default = start_up_log(&[]).await;
    assert!(
        !default.contains(RETENTION_OFF),
        "the default keeps a week and warns of nothing:\n{default}"
    );
    let on = start_up_log(&["--retention", "1d"]).await;
    assert!(!on.contains(RETENTION_OFF), "{on}");
}
