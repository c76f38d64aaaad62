//! Retry delays, one rule for the forwarder (sends) and the verifier
//! (check-backs): `base × 2^(n-1)` after the n-th failure, capped at `max`,
//! spread by ±20 % so a burst of failures does not come back as a burst, and
//! never above `max` whatever the jitter: "max" means max.
//!
//! The backoff is stateless on purpose. Its state is the row's attempt count,
//! not an in-memory iterator, because the next attempt may be made by another
//! instance after this one crashed.

use std::time::Duration;

use rand::RngExt;

/// How far the jitter moves a delay, as a fraction of it.
const JITTER: f64 = 0.2;

/// Exponential backoff with a cap and jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The delay after the first failure.
    pub base: Duration,
    /// The longest delay, jitter included.
    pub max: Duration,
}

impl Backoff {
    /// The delay after `failures` failed attempts (1 for the first), jittered.
    pub fn delay(&self, failures: u32) -> Duration {
        self.delay_at(failures, rand::rng().random_range(-1.0..=1.0))
    }

    /// [`Backoff::delay`] with the jitter drawn as `unit` in `[-1, 1]`:
    /// -1 is the shortest delay the jitter allows, 1 the longest.
    pub fn delay_at(&self, failures: u32, unit: f64) -> Duration {
        let exp = failures.saturating_sub(1).min(30);
        let nominal = self.base.saturating_mul(1u32 << exp).min(self.max);
        // `mul_f64` panics past `Duration::MAX`; a huge `max` saturates instead.
        let factor = 1.0 + JITTER * unit.clamp(-1.0, 1.0);
        Duration::try_from_secs_f64(nominal.as_secs_f64() * factor)
            .unwrap_or(Duration::MAX)
            .min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn delays_double_from_the_base_and_stop_at_the_cap() {
        let b = Backoff {
            base: S(10),
            max: S(300),
        };
        let d = |n| b.delay_at(n, 0.0);
        assert_eq!(
            [
                d(0),
                d(1),
                d(2),
                d(3),
                d(4),
                d(5),
                d(6),
                d(7),
                d(15),
                d(u32::MAX)
            ],
            [
                S(10),
                S(10),
                S(20),
                S(40),
                S(80),
                S(160),
                S(300),
                S(300),
                S(300),
                S(300)
            ]
        );
    }

    #[test]
    fn jitter_moves_a_delay_by_at_most_twenty_percent_and_never_past_the_cap() {
        let b = Backoff {
            base: S(10),
            max: S(300),
        };
        assert_eq!(b.delay_at(1, -1.0), S(8));
        assert_eq!(b.delay_at(1, 1.0), S(12));
        assert_eq!(b.delay_at(1, 7.0), S(12), "the jitter draw is clamped");
        assert_eq!(b.delay_at(9, 1.0), S(300), "max means max");
        assert_eq!(b.delay_at(9, -1.0), S(240));
        for _ in 0..200 {
            let d = b.delay(4);
            assert!(d >= S(64) && d <= S(96), "{d:?}");
            assert!(b.delay(30) <= S(300));
        }
    }

    #[test]
    fn an_enormous_cap_saturates_instead_of_panicking() {
        let b = Backoff {
            base: Duration::MAX,
            max: Duration::MAX,
        };
        assert_eq!(b.delay_at(1, 1.0), Duration::MAX);
        assert!(b.delay_at(3, -1.0) < Duration::MAX);
    }

    #[test]
    fn delays_are_jittered() {
        let b = Backoff {
            base: S(1),
            max: S(60),
        };
        let first = b.delay(4);
        assert!(
            (0..50).any(|_| b.delay(4) != first),
            "50 draws all equal: no jitter"
        );
    }
}
