//! The value parsers the flags share: durations the human way, counts that
//! must not be zero. A value they refuse stops the parse with one line
//! naming the flag.

use std::time::Duration;

/// Any duration, `0s` included.
pub(super) fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| e.to_string())
}

/// A duration that must not be zero (intervals, timeouts, leases, backoff).
pub(super) fn positive_duration(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d.is_zero() => Err("must be longer than 0".into()),
        d => Ok(d),
    }
}

/// `--flow-interval`: longer than 0 and at most a minute, so every minute
/// of the flow gets its counts by the end of the next one.
pub(super) fn flow_interval(s: &str) -> Result<Duration, String> {
    match positive_duration(s)? {
        d if d > Duration::from_secs(60) => Err("must be at most 1m".into()),
        d => Ok(d),
    }
}

/// The longest backoff flag accepted. A retry delay becomes a due time in the
/// database: an absurd one (`1000000000y`) used to panic the worker that
/// computed it, or would leave the row due never.
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(30 * 24 * 3600);

/// A backoff delay: longer than 0, at most [`MAX_BACKOFF`].
pub(super) fn backoff_duration(s: &str) -> Result<Duration, String> {
    match positive_duration(s)? {
        d if d > MAX_BACKOFF => Err(format!(
            "must be at most {}",
            humantime::format_duration(MAX_BACKOFF)
        )),
        d => Ok(d),
    }
}

/// `--verify-lease-margin`: half of it is what a claimed row has to start
/// its call, the claim's own round trip included; much less than a second
/// and every row would be given back unchecked.
pub(super) fn lease_margin(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d < Duration::from_secs(1) => Err("must be at least 1s".into()),
        d => Ok(d),
    }
}

/// A count that must be at least 1.
pub(super) fn at_least_one<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    match s.trim().parse::<u64>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(_) => s.trim().parse().map_err(|_| format!("{s:?} is too large")),
        Err(e) => Err(format!("{s:?} is not a whole number: {e}")),
    }
}
