//! The console's overview (`GET /v1/admin/summary`) costs what the backlog
//! and the recent traffic cost, not what the table holds: the rows the
//! database reads from `messages` for one summary stay the same while the
//! table grows tenfold with finished messages, and the counts stay right.
//! Measured on a MariaDB of the test's own, with its per-table statistics
//! (`userstat`), so nothing else running on the machine counts.

use serde_json::Value;
use sqlx::MySqlPool;
use trustmsg_tests::{eventually, PrivateMariaDb, ServiceProcess, ADMIN_TOKEN};

/// Adds `rows` messages of producers biz0..biz4 with keys `<prefix><n>`:
/// with `live`, one in 1000 PREPARED and one in 1000 with its send PENDING;
/// one in ten ROLLED_BACK, the rest SENT; all finished a day or more ago
/// but the last `recent` (one a second up to now).
async fn add_messages(pool: &MySqlPool, rows: u64, prefix: &str, live: bool, recent: u64) {
    // 0 stands for NULL, and n % NULL matches no CASE: no live row.
    let live_every: u64 = if live { 1000 } else { 0 };
    sqlx::query(
        "SET STATEMENT max_recursive_iterations = 10000000 FOR INSERT INTO messages (biz_id, message_key, topic, payload, headers, status, send_status, \
         version, created_at, updated_at, decided_at, next_send_at, next_verify_at) \
         WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < ?) \
         SELECT CONCAT('biz', n % 5), CONCAT(?, n), 'orders', 'x', '{}', \
           CASE WHEN n % l = 1 THEN 'PREPARED' WHEN n % 10 = 0 THEN 'ROLLED_BACK' ELSE 'COMMITTED' END, \
           CASE WHEN n % l = 1 OR n % 10 = 0 THEN NULL WHEN n % l = 3 THEN 'PENDING' ELSE 'SENT' END, \
           1, t, t, t, \
           CASE WHEN n % l = 3 THEN UTC_TIMESTAMP(3) + INTERVAL 1 DAY END, \
           CASE WHEN n % l = 1 THEN UTC_TIMESTAMP(3) + INTERVAL 1 DAY END \
         FROM (SELECT n, NULLIF(?, 0) AS l, IF(n > ? - ?, UTC_TIMESTAMP(3) - INTERVAL (? - n) SECOND, \
                            UTC_TIMESTAMP(3) - INTERVAL 1 DAY - INTERVAL (? - n) SECOND) AS t \
               FROM seq) s",
    )
    .bind(rows)
    .bind(prefix)
    .bind(live_every)
    .bind(rows)
    .bind(recent)
    .bind(rows)
    .bind(rows)
    .execute(pool)
    .await
    .unwrap();
}

/// Rows read from `messages` so far, by the server's own count.
async fn rows_read(pool: &MySqlPool, schema: &str) -> u64 {
    sqlx::query_scalar::<_, u64>(
        "SELECT CAST(COALESCE(SUM(ROWS_READ), 0) AS UNSIGNED) FROM information_schema.TABLE_STATISTICS \
         WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'messages'",
    )
    .bind(schema)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// One summary the service computes afresh (its copy lives 2 s), and the
/// rows of `messages` the database read for it.
async fn fresh_summary(service: &ServiceProcess, pool: &MySqlPool, schema: &str) -> (Value, u64) {
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let before = rows_read(pool, schema).await;
    let (status, summary) = service
        .call(reqwest::Method::GET, "/v1/admin/summary", ADMIN_TOKEN, None)
        .await;
    assert_eq!(status, 200, "{summary}");
    // The statistics are written when a statement ends, before its answer.
    (summary, rows_read(pool, schema).await - before)
}

/// Producer biz1's live counts and recent totals of all producers.
fn counts(summary: &Value) -> (Value, Value, u64, u64) {
    let producers = summary["producers"].as_array().unwrap();
    let biz1 = producers.iter().find(|p| p["biz_id"] == "biz1").unwrap();
    let sum = |k: &str| producers.iter().map(|p| p[k].as_u64().unwrap()).sum();
    (
        biz1["by_status"].clone(),
        biz1["by_send_status"].clone(),
        sum("sent_recently"),
        sum("rolled_back_recently"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_reads_the_same_rows_when_the_table_grows_tenfold() {
    let db = PrivateMariaDb::start().await;
    let schema = "trustmsg_overview";
    // Nothing else of the service reads `messages` meanwhile.
    let service = ServiceProcess::start_logged(
        &db.url(schema),
        "127.0.0.1:9",
        &[
            "--no-forwarder",
            "--no-verifier",
            "--backlog-interval",
            "1h",
            "--alert-send-overdue-after",
            "0s",
            "--alert-verify-overdue-after",
            "0s",
        ],
        None,
    )
    .await;
    let pool = MySqlPool::connect(&db.url(schema)).await.unwrap();
    sqlx::query("SET GLOBAL userstat = 1")
        .execute(&pool)
        .await
        .unwrap();

    add_messages(&pool, 20_000, "a", true, 600).await;
    let (small, read_small) = fresh_summary(&service, &pool, schema).await;
    add_messages(&pool, 180_000, "b", false, 0).await;
    let (large, read_large) = fresh_summary(&service, &pool, schema).await;

    eprintln!(
        "rows of messages read for one summary: {read_small} at 20k rows, {read_large} at 200k"
    );
    assert!(
        read_small < 2_000 && read_large < 2_000,
        "rows read for one summary: {read_small} at 20k rows, {read_large} at 200k"
    );
    assert!(
        read_large <= read_small + 500,
        "grew with the table: {read_small} → {read_large}"
    );
    // 20 PREPARED and 20 PENDING live rows, 600 finished in the last 10 min
    // (60 of them rolled back), the rest a day old: the same counts at both
    // sizes.
    assert_eq!(counts(&small), counts(&large));
    let (by_status, by_send, sent, rolled_back) = counts(&large);
    assert_eq!(
        (sent, rolled_back),
        (540, 60),
        "finished in the window: {large}"
    );
    assert_eq!(by_status, serde_json::json!({"PREPARED": 20}), "{large}");
    assert_eq!(by_send, serde_json::json!({}), "{large}");
    let total = |pointer: &str| -> u64 {
        large["producers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.pointer(pointer).and_then(Value::as_u64).unwrap_or(0))
            .sum()
    };
    assert_eq!(
        (
            total("/by_status/PREPARED"),
            total("/by_send_status/PENDING")
        ),
        (20, 20),
        "every live row counted: {large}"
    );
    eventually(5, "the service still answers", async || {
        reqwest::get(format!("{}/readyz", service.url()))
            .await
            .is_ok_and(|r| r.status().is_success())
    })
    .await;
    drop(service);
}
