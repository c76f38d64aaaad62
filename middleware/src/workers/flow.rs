//! The flow per minute: what this instance prepared, committed, rolled back,
//! sent and failed, and what check-back answered, added to the database's
//! `flow_minutes` so the console and `GET /v1/admin/flow` show the last hour
//! summed over every instance, across restarts.
//!
//! Counting costs a relaxed atomic add where it happens (next to the
//! Prometheus counter of the same event, after the write it counts), never
//! a statement. Every `--flow-interval` (ticks on wall-clock multiples of
//! it) and once at shutdown, the counts are taken (swapped to zero) and
//! added to their minute's row in one statement ([`HousekeepingStore::add_flow`]); the
//! minute is the one of the middle of the span they were counted in, so with
//! an interval that divides a minute no count lands in the wrong minute.
//! A flush that fails gives its counts back to be added next time (one
//! given up after its deadline may still have been applied: then they
//! count twice, the price of never losing them). The
//! last backlog sample (`crate::workers::backlog`, PREPARED and PENDING) goes with
//! the flush that follows it if taken in the same minute; of the samples
//! of a minute the database keeps the latest, whoever adds it. Minutes older than a day are deleted, about
//! once an hour.
//!
//! The counts are process-wide, like the Prometheus counters: one service
//! per process.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use trustmsg_verify_api::MessageStatus;

use crate::store::{deadline, BacklogSample, DynStore, FlowCounts, FlowMinute};

/// What is counted; the index of its counter is its place in
/// [`FlowCounts::COLUMNS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    Prepared = 0,
    Committed = 1,
    RolledBack = 2,
    Sent = 3,
    /// VERIFY_FAILED or SEND_FAILED.
    Failed = 4,
    CheckCommit = 5,
    CheckRollback = 6,
    CheckUnknown = 7,
    CheckFailed = 8,
}

static COUNTS: [AtomicU64; 9] = [const { AtomicU64::new(0) }; 9];

/// The last backlog sample not yet flushed.
static SAMPLE: Mutex<Option<BacklogSample>> = Mutex::new(None);

/// When the counts were last taken, in milliseconds since the epoch (0: never).
static TAKEN_AT: AtomicI64 = AtomicI64::new(0);

/// How long minutes are kept.
const KEPT: TimeDelta = TimeDelta::days(1);

/// How often old minutes are deleted.
const PURGE_EVERY: TimeDelta = TimeDelta::hours(1);

/// Counts one `event`.
pub(crate) fn count(event: Event) {
    COUNTS[event as usize].fetch_add(1, Ordering::Relaxed);
}

/// Counts a decision that changed a row, by the state it led to.
pub(crate) fn count_decided(status: MessageStatus) {
    match status {
        MessageStatus::Committed => count(Event::Committed),
        MessageStatus::RolledBack => count(Event::RolledBack),
        _ => {}
    }
}

/// Keeps the backlog just read for the next flush.
pub(crate) fn sample_backlog(sample: BacklogSample) {
    *SAMPLE.lock().unwrap_or_else(|e| e.into_inner()) = Some(sample);
}

fn take() -> (FlowCounts, Option<BacklogSample>) {
    let mut values = [0; 9];
    for (v, c) in values.iter_mut().zip(&COUNTS) {
        *v = c.swap(0, Ordering::Relaxed);
    }
    let sample = SAMPLE.lock().unwrap_or_else(|e| e.into_inner()).take();
    (FlowCounts::from_values(values), sample)
}

/// Puts back what a failed flush took (a newer sample wins over its own).
fn give_back(counts: FlowCounts, sample: Option<BacklogSample>) {
    for (v, c) in counts.values().into_iter().zip(&COUNTS) {
        c.fetch_add(v, Ordering::Relaxed);
    }
    let mut kept = SAMPLE.lock().unwrap_or_else(|e| e.into_inner());
    if kept.is_none() {
        *kept = sample;
    }
}

/// The start of `t`'s minute.
pub(crate) fn minute_of(t: DateTime<Utc>) -> DateTime<Utc> {
    t.duration_trunc(TimeDelta::minutes(1)).unwrap_or(t)
}

/// How long until the next wall-clock multiple of `interval`.
fn until_next_tick(interval: Duration, now: DateTime<Utc>) -> Duration {
    let every = interval.as_millis().max(1) as i64;
    let ms = now.timestamp_millis();
    let next = (ms.div_euclid(every) + 1) * every;
    Duration::from_millis((next - ms) as u64)
}

/// Adds what was counted since the last flush to the minute of the middle
/// of that span; on failure the counts wait for the next flush.
async fn flush(store: &DynStore, limit: Duration) {
    let now = Utc::now();
    let from = match TAKEN_AT.swap(now.timestamp_millis(), Ordering::Relaxed) {
        0 => now,
        ms => DateTime::from_timestamp_millis(ms).unwrap_or(now),
    };
    let (counts, sample) = take();
    if counts.is_zero() && sample.is_none() {
        return;
    }
    let minute = minute_of(from + (now - from) / 2);
    let f = FlowMinute {
        minute,
        counts,
        // A sample belongs to its own minute; one from an earlier minute
        // (a flush at a minute's start) is dropped, the next one is near.
        backlog: sample.filter(|s| minute_of(s.at) == minute),
    };
    if let Err(e) = deadline::within(limit, "add the flow", store.add_flow(&f)).await {
        tracing::warn!(error = %e, "could not add this minute's flow counts; they are added with the next");
        give_back(counts, sample);
    }
}

/// The flush at shutdown, once every other worker has stopped counting.
pub(crate) async fn flush_at_shutdown(store: &DynStore, limit: Duration) {
    flush(store, limit).await;
}

/// Starts the flusher; it ends when `cancel` fires (the last counts are
/// added by [`flush_at_shutdown`]). Each statement takes at most `limit`.
pub(crate) fn spawn(
    store: DynStore,
    interval: Duration,
    limit: Duration,
    cancel: CancellationToken,
) -> JoinHandle<()> {
    TAKEN_AT.store(Utc::now().timestamp_millis(), Ordering::Relaxed);
    tokio::spawn(async move {
        let mut purged: Option<DateTime<Utc>> = None;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(until_next_tick(interval, Utc::now())) => {}
            }
            flush(&store, limit).await;
            let now = Utc::now();
            if purged.is_none_or(|p| now - p >= PURGE_EVERY) {
                match deadline::within(
                    limit,
                    "delete old flow minutes",
                    store.purge_flow(now - KEPT),
                )
                .await
                {
                    Ok(_) => purged = Some(now),
                    Err(e) => {
                        tracing::warn!(error = %e, "could not delete flow minutes older than a day")
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_fall_on_wall_clock_multiples_of_the_interval() {
        let t = DateTime::parse_from_rfc3339("2026-11-24T10:00:07.250Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            until_next_tick(Duration::from_secs(10), t),
            Duration::from_millis(2750)
        );
        assert_eq!(
            minute_of(t).to_rfc3339(),
            "2026-11-24T10:00:00+00:00",
            "a minute starts at second 0"
        );
    }
}
