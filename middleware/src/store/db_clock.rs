//! The database clock between readings: a write that must know the time it
//! stamps without a statement of its own to read it (a producer's decision
//! batch, one UPDATE) binds the time this clock tells.
//!
//! A reading is `UTC_TIMESTAMP(3)` taken with the monotonic time halfway
//! through its round trip; the clock tells that reading plus the monotonic
//! time since, to the millisecond (what the columns hold), and is read again
//! once the reading is older than [`READING_AGE`]. Its error is half a round
//! trip to the database plus the drift of a second, well under a
//! millisecond here; instances sharing a database agree as closely.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, DurationRound, TimeDelta, Utc};

use super::StoreResult;

/// How long a reading is used before the clock is read again.
const READING_AGE: Duration = Duration::from_secs(1);

/// A reading of the database clock, and when it was taken (monotonic).
type Reading = (DateTime<Utc>, Instant);

/// The database clock as last read.
#[derive(Debug, Clone, Default)]
pub(crate) struct DbClock {
    reading: Arc<Mutex<Option<Reading>>>,
}

impl DbClock {
    /// The database's time now, from the last reading, or from a new one
    /// (`read`, a `SELECT UTC_TIMESTAMP(3)`) when that is too old.
    pub(crate) async fn now<F>(&self, read: F) -> StoreResult<DateTime<Utc>>
    where
        F: Future<Output = StoreResult<DateTime<Utc>>>,
    {
        let last = *self.reading.lock().expect("clock lock");
        let (at, since) = match last {
            Some((at, since)) if since.elapsed() < READING_AGE => (at, since),
            _ => {
                let before = Instant::now();
                let at = read.await?;
                let since = before + before.elapsed() / 2;
                *self.reading.lock().expect("clock lock") = Some((at, since));
                (at, since)
            }
        };
        let elapsed = TimeDelta::from_std(since.elapsed()).unwrap_or(TimeDelta::zero());
        Ok((at + elapsed)
            .duration_trunc(TimeDelta::milliseconds(1))
            .unwrap_or(at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn it_reads_once_a_second_and_moves_on_by_the_monotonic_time_in_between() {
        let clock = DbClock::default();
        let start: DateTime<Utc> = "2026-11-24T10:00:00.000Z".parse().unwrap();
        let reads = std::sync::atomic::AtomicUsize::new(0);
        let read = || async {
            reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(start)
        };
        let since_start = async |clock: &DbClock, read| {
            (clock.now(read).await.unwrap() - start).num_milliseconds()
        };
        assert!((0..30).contains(&since_start(&clock, read()).await));
        tokio::time::sleep(Duration::from_millis(30)).await;
        let later = clock.now(read()).await.unwrap();
        assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 1);
        let moved = (later - start).num_milliseconds();
        assert!((30..1000).contains(&moved), "{moved} ms");
        assert_eq!(
            later.timestamp_subsec_micros() % 1000,
            0,
            "whole milliseconds"
        );
        tokio::time::sleep(READING_AGE).await;
        assert!(
            (0..30).contains(&since_start(&clock, read()).await),
            "read again"
        );
        assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}
