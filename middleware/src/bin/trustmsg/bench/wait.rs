//! Waiting for what a phase set going: rows reaching a count, committed
//! messages reaching Kafka. Both give up with a message after a deadline.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use trustmsg_kafka_mock as kafka;

use super::server::Db;

/// Polls (every 20 ms) until `count_sql` returns `expected`. The polls load
/// the database during the phase being measured: count what is left, over
/// the state index (`status, send_status, …, biz_id`), so a poll reads the
/// rows still to go, not every row of the phase.
pub(crate) async fn wait_until(
    pool: &Db,
    count_sql: &'static str,
    expected: i64,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let n = pool.count(count_sql).await?;
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

/// Waits until every committed message was consumed; returns when each was
/// first read and the instant the last one arrived.
pub(crate) async fn await_consumed(
    consumed: &mut tokio::sync::mpsc::UnboundedReceiver<kafka::Consumed>,
    committed_at: &HashMap<u64, Instant>,
    timeout: Duration,
) -> anyhow::Result<(HashMap<u64, Instant>, Instant)> {
    let mut seen = HashMap::with_capacity(committed_at.len());
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
        if committed_at.contains_key(&c.message_id) && !seen.contains_key(&c.message_id) {
            seen.insert(c.message_id, c.at);
            last = c.at;
        }
    }
    Ok((seen, last))
}
