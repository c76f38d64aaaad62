//! Latency percentiles of a phase's samples.

use std::time::Duration;

use serde::Serialize;

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct Percentiles {
    /// Samples.
    pub(crate) count: usize,
    /// Median.
    pub(crate) p50_ms: f64,
    /// 99th percentile.
    pub(crate) p99_ms: f64,
    /// 99.9th percentile.
    pub(crate) p999_ms: f64,
    /// Largest sample.
    pub(crate) max_ms: f64,
}

impl Percentiles {
    pub(crate) fn of(mut samples: Vec<Duration>) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_unstable();
        let at = |q: f64| {
            let i = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1;
            samples[i].as_secs_f64() * 1000.0
        };
        Self {
            count: samples.len(),
            p50_ms: at(0.50),
            p99_ms: at(0.99),
            p999_ms: at(0.999),
            max_ms: samples[samples.len() - 1].as_secs_f64() * 1000.0,
        }
    }
}
