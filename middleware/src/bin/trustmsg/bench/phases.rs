//! The phases that bypass the HTTP API: the database's own ceiling, the
//! verifier and drain rates over rows written straight to the tables, and the
//! cost of the forwarder's claim query as the table grows.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use sqlx::MySqlPool;
use trustmsg::store::mysql::MySqlStore;
use trustmsg::store::prelude::*;
use trustmsg::store::{DatabaseUrl, PayloadRoom};
use trustmsg_kafka_mock as kafka;

use super::percentiles::Percentiles;
use super::wait::{await_consumed, wait_until};
use super::*;

/// Waits (at most 30 s) until InnoDB has purged what earlier phases left
/// behind, so that work is not charged to the next phase. Purge runs in the
/// background after many small transactions and can take a core for a while.
pub(crate) async fn settle(pool: &MySqlPool) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // MySQL 8 and MariaDB both keep this metric, enabled by default (a
        // disabled one reads 0: no wait).
        let history: Option<i64> = sqlx::query_scalar(
            "SELECT CAST(COUNT AS SIGNED) FROM information_schema.INNODB_METRICS \
             WHERE NAME = 'trx_rseg_history_len'",
        )
        .fetch_optional(pool)
        .await?;
        match history {
            Some(n) if n > 1000 && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            _ => return Ok(()),
        }
    }
}

/// The database's own ceiling: INSERT of a message-shaped row then UPDATE of its
/// status, autocommit, from `concurrency` writers for `duration`. `round`
/// tells the rounds apart (their keys), so the ceiling can be taken again.
pub(crate) async fn ceiling(
    pool: &MySqlPool,
    concurrency: usize,
    duration: Duration,
    round: usize,
) -> anyhow::Result<f64> {
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS bench_ceiling (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, \
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
                .bind(format!("c{round}-{w}-{n}"))
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

/// Inserts `rows` message rows of `biz_id` in `status`, not yet due, as
/// the service leaves them in that state: a PREPARED row due for its
/// check-back and a PENDING one for its send in an hour, with the
/// `headroom` the service's prepare (40 bytes) or commit (16) leaves
/// (migration 0015), the payload length its prepare records (0016), and a
/// payload of `payload_bytes` where the service's prepare would keep it: in
/// the row, or in `message_payloads` when it is longer than the service
/// keeps in a row (0018).
pub(crate) async fn insert_rows(
    pool: &MySqlPool,
    biz_id: &str,
    topic: &str,
    (status, send_status): (&str, Option<&str>),
    rows: u64,
    payload_bytes: usize,
) -> anyhow::Result<()> {
    let payload = vec![b'x'; payload_bytes];
    // A `--service-binary` from before migration 0015 (0016, 0018) has no
    // such column.
    let has = |column: &'static str| async move {
        sqlx::query_scalar::<_, bool>(
            "SELECT COUNT(*) > 0 FROM information_schema.columns WHERE table_schema = DATABASE() \
             AND table_name = 'messages' AND column_name = ?",
        )
        .bind(column)
        .fetch_one(pool)
        .await
    };
    let (has_headroom, has_lengths) = (has("headroom").await?, has("payload_bytes").await?);
    // "{}", the headers, counts towards what a row keeps.
    let apart = has("payload_apart").await? && payload_bytes + 2 > ROW_CONTENT_MAX;
    let extra_columns = format!(
        "{}{}{}",
        if has_headroom { ", headroom" } else { "" },
        if has_lengths { ", payload_bytes" } else { "" },
        if apart { ", payload_apart" } else { "" },
    );
    // A statement's payloads stay well under the server's default
    // max_allowed_packet (16 MiB).
    let batch = if apart {
        1000
    } else {
        ((8 << 20) / payload_bytes.max(1)).clamp(1, 1000) as u64
    };
    let mut done = 0;
    while done < rows {
        let n = batch.min(rows - done);
        let mut q = sqlx::QueryBuilder::<sqlx::MySql>::new(
            format!("INSERT INTO messages (biz_id, message_key, topic, payload, headers, content_digest, status, send_status, created_at, updated_at, next_verify_at, next_send_at{extra_columns}) "),
        );
        let later = "UTC_TIMESTAMP(3) + INTERVAL 1 HOUR";
        let (verify_at, send_at, headroom) = match (status, send_status) {
            ("PREPARED", _) => (later, "NULL", "REPEAT(X'00', 40)"),
            (_, Some("PENDING")) => ("NULL", later, "REPEAT(X'00', 16)"),
            _ => ("NULL", "NULL", "NULL"),
        };
        let in_row: &[u8] = if apart { b"" } else { &payload };
        q.push_values(done..done + n, |mut b, i| {
            b.push_bind(biz_id)
                .push_bind(format!("{biz_id}-{i}"))
                .push_bind(topic)
                .push_bind(in_row)
                .push_bind("{}")
                .push_bind(vec![0u8; 32])
                .push_bind(status)
                .push_bind(send_status)
                .push("UTC_TIMESTAMP(3)")
                .push("UTC_TIMESTAMP(3)")
                .push(verify_at)
                .push(send_at);
            if has_headroom {
                b.push(headroom);
            }
            if has_lengths {
                b.push_bind(payload_bytes as u64);
            }
            if apart {
                b.push("TRUE");
            }
        });
        q.build().execute(pool).await?;
        done += n;
    }
    if apart {
        // The payload bound once, copied into each row's content.
        let ids: Vec<u64> =
            sqlx::query_scalar("SELECT id FROM messages WHERE biz_id = ? ORDER BY id")
                .bind(biz_id)
                .fetch_all(pool)
                .await?;
        for chunk in ids.chunks(1000) {
            sqlx::query(
                "INSERT INTO message_payloads (message_id, payload, headers) \
                 SELECT id, ?, '{}' FROM messages WHERE id BETWEEN ? AND ? AND biz_id = ?",
            )
            .bind(&payload)
            .bind(chunk[0])
            .bind(chunk[chunk.len() - 1])
            .bind(biz_id)
            .execute(pool)
            .await?;
        }
    }
    Ok(())
}

/// The longest content (payload and headers) the service keeps in its
/// message row (`store/sql/content.rs`).
const ROW_CONTENT_MAX: usize = 2048;

/// Stale PREPARED rows made due at once; the service's verifier asks the
/// local check endpoint (`checker`, which answers commit) about each. The
/// rate starts at the release, the phase's meter right after it (the
/// release is the bench's work, a scan of the whole table, not the
/// service's; `service`: the service's pid). The end is seen without
/// loading the database meanwhile: first the endpoint's own count of
/// check-backs, then the committed rows, counted once or twice.
pub(crate) async fn verifier(
    pool: &MySqlPool,
    checker: &CheckEndpoint,
    (rows, payload_bytes): (u64, usize),
    service: Option<&str>,
) -> anyhow::Result<(f64, Meter)> {
    insert_rows(
        pool,
        "bench-verify",
        TOPIC,
        ("PREPARED", None),
        rows,
        payload_bytes,
    )
    .await?;
    // What the phases before left InnoDB to purge is not this phase's work.
    settle(pool).await?;
    let asked = checker.asked();
    sqlx::query(
        "UPDATE messages SET next_verify_at = UTC_TIMESTAMP(3) WHERE biz_id = 'bench-verify'",
    )
    .execute(pool)
    .await?;
    // The clock starts when the release commits: that is when the rows become due.
    let start = Instant::now();
    let meter = Meter::start(pool, service).await?;
    checker.wait_for(asked + rows).await?;
    wait_until(
        pool,
        "SELECT COUNT(*) FROM messages WHERE status = 'PREPARED' AND biz_id = 'bench-verify'",
        0,
    )
    .await?;
    Ok((rows as f64 / start.elapsed().as_secs_f64(), meter))
}

/// Committed rows released at once; the sweeper drains them to Kafka. The
/// rate starts at the release, the phase's meter right after it
/// (`service`: the service's pid).
pub(crate) async fn drain(
    pool: &MySqlPool,
    consumed: &mut tokio::sync::mpsc::UnboundedReceiver<kafka::Consumed>,
    (rows, payload_bytes): (u64, usize),
    service: Option<&str>,
) -> anyhow::Result<(f64, Meter)> {
    insert_rows(
        pool,
        "bench-drain",
        DRAIN_TOPIC,
        ("COMMITTED", Some("PENDING")),
        rows,
        payload_bytes,
    )
    .await?;
    let ids: Vec<u64> = sqlx::query_scalar("SELECT id FROM messages WHERE biz_id = 'bench-drain'")
        .fetch_all(pool)
        .await?;
    // What the phases before left InnoDB to purge is not this phase's work.
    settle(pool).await?;
    sqlx::query("UPDATE messages SET next_send_at = UTC_TIMESTAMP(3) WHERE biz_id = 'bench-drain'")
        .execute(pool)
        .await?;
    // The clock starts when the release commits: that is when the rows
    // become due. The meter right after: the release is the bench's work.
    let start = Instant::now();
    let meter = Meter::start(pool, service).await?;
    let committed_at: HashMap<u64, Instant> = ids.into_iter().map(|id| (id, start)).collect();
    let (_, last) = await_consumed(consumed, &committed_at, Duration::from_secs(300)).await?;
    wait_until(
        pool,
        "SELECT COUNT(*) FROM messages WHERE status = 'COMMITTED' AND send_status = 'PENDING' \
         AND biz_id = 'bench-drain'",
        0,
    )
    .await?;
    Ok((
        rows as f64 / last.duration_since(start).as_secs_f64(),
        meter,
    ))
}

/// The room a service's sweep has with nothing in flight, at the defaults
/// (`--payload-budget-mib 128`, `--max-payload-bytes 960000`).
const SERVICE_ROOM: PayloadRoom = PayloadRoom {
    bytes: 128 << 20,
    unknown: 960_000,
};

/// Median time of the forwarder's claim (256 due rows) with `rows` finished
/// rows in the table, in a database of its own.
pub(crate) async fn scan_cost(
    pool: &MySqlPool,
    db_url: &DatabaseUrl,
    rows: u64,
) -> anyhow::Result<f64> {
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
    let scan_url = db_url.with_database(Some(&name))?;
    let result = async {
        let store = MySqlStore::connect(&scan_url).await?;
        store.migrate().await?;
        let (done, due) = (("COMMITTED", Some("SENT")), ("COMMITTED", Some("PENDING")));
        insert_rows(store.pool(), "scan-done", TOPIC, done, rows, PAYLOAD_BYTES).await?;
        insert_rows(store.pool(), "scan-due", TOPIC, due, 256, PAYLOAD_BYTES).await?;
        sqlx::query("ANALYZE TABLE messages").execute(store.pool()).await?;
        let mut times = Vec::new();
        for _ in 0..20 {
            sqlx::query("UPDATE messages SET next_send_at = UTC_TIMESTAMP(3) - INTERVAL 1 SECOND WHERE biz_id = 'scan-due'")
                .execute(store.pool())
                .await?;
            let t = Instant::now();
            let claimed = store
                .claim_due_sends(256, SERVICE_ROOM, Duration::from_secs(60))
                .await?;
            times.push(t.elapsed());
            let n = claimed.messages.len();
            anyhow::ensure!(n == 256, "claimed {n} of 256");
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
pub(crate) struct CheckEndpoint {
    pub(crate) url: String,
    /// Check-backs answered so far.
    asked: std::sync::Arc<tokio::sync::watch::Sender<u64>>,
    pub(crate) _server: tokio::task::JoinHandle<()>,
}

impl CheckEndpoint {
    pub(crate) async fn start() -> anyhow::Result<Self> {
        use trustmsg_verify_api::{CheckRequest, CheckResponse, Decision};
        let asked = std::sync::Arc::new(tokio::sync::watch::Sender::new(0u64));
        let count = asked.clone();
        let app = axum::Router::new().route(
            "/check",
            axum::routing::post(
                move |axum::Json(req): axum::Json<CheckRequest>| async move {
                    count.send_modify(|n| *n += 1);
                    axum::Json(CheckResponse {
                        message_id: req.message_id,
                        decision: Decision::Commit,
                    })
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/check", listener.local_addr()?);
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            url,
            asked,
            _server: server,
        })
    }

    /// Check-backs answered so far.
    pub(crate) fn asked(&self) -> u64 {
        *self.asked.borrow()
    }

    /// Waits (at most 300 s) until `n` check-backs have been answered.
    pub(crate) async fn wait_for(&self, n: u64) -> anyhow::Result<()> {
        let mut asked = self.asked.subscribe();
        tokio::time::timeout(Duration::from_secs(300), asked.wait_for(|&a| a >= n))
            .await
            .map_err(|_| anyhow::anyhow!("only {} of {n} check-backs came", self.asked()))??;
        Ok(())
    }
}

/// `--trace`: an OTLP/HTTP receiver that counts export requests and their
/// bytes and drops them, so the bench measures what exporting costs the
/// service, not a collector.
pub(crate) struct OtlpSink {
    pub(crate) url: String,
    pub(crate) requests: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub(crate) bytes: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub(crate) _server: tokio::task::JoinHandle<()>,
}

impl OtlpSink {
    pub(crate) async fn start() -> anyhow::Result<Self> {
        use std::sync::atomic::{AtomicU64, Ordering};
        use std::sync::Arc;
        let requests = Arc::new(AtomicU64::new(0));
        let bytes = Arc::new(AtomicU64::new(0));
        let (r, b) = (requests.clone(), bytes.clone());
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: axum::body::Bytes| async move {
                r.fetch_add(1, Ordering::Relaxed);
                b.fetch_add(body.len() as u64, Ordering::Relaxed);
                axum::http::StatusCode::OK
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            url,
            requests,
            bytes,
            _server: server,
        })
    }
}
