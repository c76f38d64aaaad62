//! The `outbox` phase (issue 44): the local message table way. The source
//! is a database of the bench's own on the same server, its table made by
//! `trustmsg outbox schema`, relayed by the service (`--outbox-source`).
//!
//! - **throughput**: `rows` rows committed in one producer transaction
//!   (all visible at once), then relayed, sent and consumed: rows per
//!   second from that commit to the last record read, with the database's
//!   work per row (the source's statements included: it is the same
//!   server);
//! - **latency**: rows inserted one per producer transaction (or
//!   `--outbox-rows-per-tx`) at half that rate (an open loop), with the
//!   service's default `--outbox-interval`:
//!   from each transaction's commit to its record read (what the relay
//!   adds), and from its intended start (what the producer's own
//!   transaction waited and took on the same server, added).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use tokio::sync::Mutex;
use trustmsg::outbox::schema::{schema, SchemaDialect, DEFAULT_TABLE};
use trustmsg::store::DatabaseUrl;
use trustmsg_kafka_mock as kafka;

use super::cost::{CpuPerMessage, DbCost, PhaseCpu};
use super::open_loop::OpenLoop;
use super::percentiles::Percentiles;
use super::server::Db;
use super::PAYLOAD_BYTES;

/// The topic the relayed rows go to.
pub(crate) const OUTBOX_TOPIC: &str = "trustmsg-bench-outbox";
/// The producer whose source the bench writes.
pub(crate) const BIZ_ID: &str = "bench-outbox";

/// What the phase measured.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct OutboxResult {
    /// Rows of the throughput part.
    pub(crate) rows: u64,
    /// Rows committed at once, relayed, sent and read from Kafka, per second.
    pub(crate) relayed_per_s: f64,
    /// The latency part at half of `relayed_per_s`.
    pub(crate) at_half: Latency,
    /// The latency part again at each of `--outbox-rates`, in its order.
    pub(crate) at_rates: Vec<Latency>,
}

/// The latency part's two clocks at one arrival rate: from each row's
/// producer transaction committed (its COMMIT answered) to its record read,
/// what the relay adds; and from its intended start (the open loop's
/// schedule), which adds the time the producer's own transaction waited and
/// took, on the same server.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Latency {
    /// Rows per second the producers committed.
    pub(crate) rate_per_s: f64,
    /// Rows per producer transaction (`--outbox-rows-per-tx`).
    pub(crate) rows_per_tx: u32,
    pub(crate) commit_to_kafka: Percentiles,
    pub(crate) intended_to_kafka: Percentiles,
    /// Rows whose transaction failed to start or commit in time (as the
    /// open loop counts a shed request: a figure of the rate, not a crash).
    pub(crate) not_started: u64,
    /// CPU per row while it ran, by process: the producers' transactions
    /// (on the database), the relay and the forwarding, all at once.
    pub(crate) cpu: Option<CpuPerMessage>,
    /// Cores used while it ran, by process.
    pub(crate) cores: Option<PhaseCpu>,
    /// The database's work per row while it ran.
    pub(crate) db: Option<DbCost>,
}

/// The bench's source database (on the bench's server, of its kind): its
/// pool and the URL the service relays.
pub(crate) struct Source {
    pub(crate) pool: Db,
    pub(crate) url: DatabaseUrl,
}

impl Source {
    /// Creates the table in `url`'s (empty) database, with the SQL
    /// `trustmsg outbox schema` prints for the server's kind.
    pub(crate) async fn create(url: DatabaseUrl) -> anyhow::Result<Self> {
        // Its statistics are counted with the bench's own databases', whose
        // name it starts with.
        let pool = Db::connect(&url, 64, "")
            .await
            .with_context(|| format!("connecting to the outbox source {url}"))?;
        let sql = |dialect| sqlx::AssertSqlSafe(schema(dialect, DEFAULT_TABLE));
        match &pool {
            Db::Mysql(p) => {
                sqlx::raw_sql(sql(SchemaDialect::Mysql)).execute(p).await?;
            }
            Db::Postgres { pool: p, .. } => {
                sqlx::raw_sql(sql(SchemaDialect::Postgres))
                    .execute(p)
                    .await?;
            }
        }
        Ok(Self { pool, url })
    }

    /// `--outbox-source`'s value (the child parses it again).
    pub(crate) fn flag(&self) -> String {
        format!("{BIZ_ID}={}", self.url.expose_for_driver())
    }

    /// Inserts `keys` in one transaction.
    async fn insert_together(&self, keys: &[String]) -> anyhow::Result<()> {
        let payload = vec![b'o'; PAYLOAD_BYTES];
        match &self.pool {
            Db::Mysql(pool) => {
                let mut tx = pool.begin().await?;
                for chunk in keys.chunks(1000) {
                    let mut q = sqlx::QueryBuilder::new(format!(
                        "INSERT INTO {DEFAULT_TABLE} (message_key, topic, record_key, payload) "
                    ));
                    q.push_values(chunk, |mut row, key| {
                        row.push_bind(key.as_str())
                            .push_bind(OUTBOX_TOPIC)
                            .push_bind(key.as_str())
                            .push_bind(payload.as_slice());
                    });
                    q.build().execute(&mut *tx).await?;
                }
                tx.commit().await?;
            }
            // One statement: the keys as an array, the payload bound once.
            Db::Postgres { pool, .. } => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "INSERT INTO {DEFAULT_TABLE} (message_key, topic, record_key, payload) \
                     SELECT k, $1, k, $2 FROM UNNEST($3::TEXT[]) AS k"
                )))
                .bind(OUTBOX_TOPIC)
                .bind(&payload)
                .bind(keys)
                .execute(pool)
                .await?;
            }
        }
        Ok(())
    }

    /// Inserts `keys` in a transaction of their own: one row autocommitted
    /// (no BEGIN and COMMIT round trips), several in one statement.
    async fn insert_tx(&self, keys: &[String]) -> anyhow::Result<()> {
        match keys {
            [key] => self.insert_one(key).await,
            _ => self.insert_together(keys).await,
        }
    }

    /// Inserts one row in a transaction of its own (autocommit).
    async fn insert_one(&self, key: &str) -> anyhow::Result<()> {
        let payload = vec![b'o'; PAYLOAD_BYTES];
        match &self.pool {
            Db::Mysql(pool) => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "INSERT INTO {DEFAULT_TABLE} (message_key, topic, record_key, payload) \
                     VALUES (?, ?, ?, ?)"
                )))
                .bind(key)
                .bind(OUTBOX_TOPIC)
                .bind(key)
                .bind(payload)
                .execute(pool)
                .await?;
            }
            Db::Postgres { pool, .. } => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "INSERT INTO {DEFAULT_TABLE} (message_key, topic, record_key, payload) \
                     VALUES ($1, $2, $3, $4)"
                )))
                .bind(key)
                .bind(OUTBOX_TOPIC)
                .bind(key)
                .bind(payload)
                .execute(pool)
                .await?;
            }
        }
        Ok(())
    }

    /// Rows the relay has not marked relayed yet.
    async fn pending(&self) -> anyhow::Result<i64> {
        self.pool
            .count(&format!(
                "SELECT COUNT(*) FROM {DEFAULT_TABLE} WHERE status = 0"
            ))
            .await
    }
}

/// Reads records until every key of `wanted` was seen once; returns when
/// each was read.
async fn await_keys(
    consumed: &mut tokio::sync::mpsc::UnboundedReceiver<kafka::Consumed>,
    wanted: usize,
    prefix: &str,
    timeout: Duration,
) -> anyhow::Result<HashMap<String, Instant>> {
    let mut seen = HashMap::with_capacity(wanted);
    let deadline = tokio::time::Instant::now() + timeout;
    while seen.len() < wanted {
        let c = tokio::time::timeout_at(deadline, consumed.recv())
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "only {} of {wanted} relayed rows reached Kafka in {timeout:?}",
                    seen.len()
                )
            })?
            .context("consumer stopped")?;
        let key = c
            .header(trustmsg_verify_api::kafka_headers::MESSAGE_KEY)
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .unwrap_or_default();
        if key.starts_with(prefix) {
            seen.entry(key).or_insert(c.at);
        }
    }
    Ok(seen)
}

/// One row through the relay, so the phase starts with the producer's
/// registration read and the consumer reading.
pub(crate) async fn warm_up(
    source: &Source,
    consumed: &mut tokio::sync::mpsc::UnboundedReceiver<kafka::Consumed>,
) -> anyhow::Result<()> {
    source.insert_one("warm-up").await?;
    await_keys(consumed, 1, "warm-up", Duration::from_secs(60)).await?;
    Ok(())
}

/// The throughput part: `rows` committed at once; rows per second until the
/// last record is read. The clock starts at the commit; `started` is
/// called right after it (the caller's meter).
pub(crate) async fn throughput<F, Fut>(
    source: &Source,
    consumed: &mut tokio::sync::mpsc::UnboundedReceiver<kafka::Consumed>,
    rows: u64,
    started: F,
) -> anyhow::Result<(f64, Fut::Output)>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future,
{
    let keys: Vec<String> = (0..rows).map(|i| format!("t-{i}")).collect();
    source.insert_together(&keys).await?;
    let start = Instant::now();
    let meter = started().await;
    let seen = await_keys(consumed, keys.len(), "t-", Duration::from_secs(300)).await?;
    let last = seen.values().max().copied().unwrap_or(start);
    // Every row marked relayed, not only sent.
    let deadline = Instant::now() + Duration::from_secs(60);
    while source.pending().await? > 0 {
        anyhow::ensure!(
            Instant::now() < deadline,
            "relayed rows still pending after 60 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok((
        rows as f64 / last.duration_since(start).as_secs_f64(),
        meter,
    ))
}

/// The latency part: `rows_per_tx` rows per transaction, `rate` rows per
/// second for `duration`, each row charged from its transaction's intended
/// start to its record read. A transaction that fails (no connection from
/// the source's pool in time, on a machine that cannot keep the rate) is
/// counted in `not_started` and the part goes on. Its cost is not measured
/// here (`cpu`, `cores` and `db` are None).
pub(crate) async fn latency(
    source: &Arc<Source>,
    run: usize,
    consumed: &mut tokio::sync::mpsc::UnboundedReceiver<kafka::Consumed>,
    rate: f64,
    rows_per_tx: u32,
    duration: Duration,
) -> anyhow::Result<Latency> {
    anyhow::ensure!(rate > 0.0, "the latency part needs a positive rate");
    anyhow::ensure!(rows_per_tx > 0, "a transaction needs a row at least");
    // Each key's intended start and when its transaction's commit answered.
    let times = Arc::new(Mutex::new(HashMap::new()));
    let interval = Duration::from_secs_f64(f64::from(rows_per_tx) / rate);
    let mut schedule = OpenLoop::new(interval, duration);
    let mut tasks = Vec::new();
    while let Some((i, intended)) = schedule.next().await {
        let (source, times) = (source.clone(), times.clone());
        tasks.push(tokio::spawn(async move {
            let keys: Vec<String> = (0..rows_per_tx)
                .map(|j| format!("l{run}-{i}-{j}"))
                .collect();
            source.insert_tx(&keys).await?;
            let committed = Instant::now();
            times
                .lock()
                .await
                .extend(keys.into_iter().map(|k| (k, (intended, committed))));
            anyhow::Ok(())
        }));
    }
    let mut not_started = 0u64;
    let mut first_error = None;
    for t in futures::future::join_all(tasks).await {
        if let Err(e) = t? {
            not_started += u64::from(rows_per_tx);
            first_error.get_or_insert(e);
        }
    }
    if let Some(e) = first_error {
        eprintln!(
            "bench: outbox latency at {rate:.0}/s: {not_started} row(s) not started or not \
             committed, the first because: {e:#}"
        );
    }
    let times = std::mem::take(&mut *times.lock().await);
    let prefix = format!("l{run}-");
    let seen = await_keys(consumed, times.len(), &prefix, Duration::from_secs(120)).await?;
    let since = |pick: fn(&(Instant, Instant)) -> Instant| {
        let samples = seen
            .iter()
            .filter_map(|(k, at)| Some(at.saturating_duration_since(pick(times.get(k)?))))
            .collect();
        Percentiles::of(samples)
    };
    Ok(Latency {
        rate_per_s: rate,
        rows_per_tx,
        commit_to_kafka: since(|(_, committed)| *committed),
        intended_to_kafka: since(|(intended, _)| *intended),
        not_started,
        cpu: None,
        cores: None,
        db: None,
    })
}
