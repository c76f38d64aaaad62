//! How many check-back calls one producer gets at once: a limit per producer
//! that adapts to how its endpoint answers (additive increase, multiplicative
//! decrease, as TCP does for its window).
//!
//! - Every producer starts at [`ProducerLimits::new`]'s `initial` calls.
//! - An answer in less than half the producer's timeout raises its limit: by
//!   one per answer until the first sign of overload (so the limit doubles
//!   each round trip), then by one per limit's worth of answers.
//! - A sign of overload halves it, at least 1: a timeout, a transport error
//!   (refused, reset), HTTP 429 or 5xx, or an answer slower than half the
//!   timeout. Calls already in flight when the limit was halved do not halve it
//!   again: one overload costs one halving.
//! - Other failures (a 4xx, a garbage body, a refused address) say nothing about
//!   load and leave the limit alone.
//!
//! The limit never exceeds `max` (`--verify-concurrency-per-producer`). Each
//! producer's is exported as the gauge `trustmsg_verify_concurrency_limit`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What one call said about its endpoint's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Load {
    /// Answered well within its timeout: room for more.
    Fine,
    /// Timed out, failed to connect, 429/5xx, or answered slowly: back off.
    Overloaded,
    /// Says nothing about load.
    Unknown,
}

impl Load {
    /// The load signal of an answer that took `took` out of `timeout`.
    pub(crate) fn of_answer(took: Duration, timeout: Duration) -> Self {
        if took.saturating_mul(2) > timeout {
            Load::Overloaded
        } else {
            Load::Fine
        }
    }
}

/// Per-producer limits; shared by every call of one verifier.
pub(crate) struct ProducerLimits {
    initial: usize,
    max: usize,
    producers: Mutex<HashMap<String, State>>,
}

#[derive(Debug)]
struct State {
    limit: f64,
    in_flight: usize,
    /// False once the first overload was seen: growth turns additive.
    slow_start: bool,
    /// Calls started before this were in flight at the last halving.
    halved_at: Option<Instant>,
}

impl ProducerLimits {
    /// Limits starting at `initial` (clamped into 1..=max) and never above `max`.
    pub(crate) fn new(initial: usize, max: usize) -> Arc<Self> {
        let max = max.max(1);
        Arc::new(Self {
            initial: initial.clamp(1, max),
            max,
            producers: Mutex::new(HashMap::new()),
        })
    }

    fn with<R>(&self, biz_id: &str, f: impl FnOnce(&mut State) -> R) -> R {
        let mut map = self.producers.lock().unwrap_or_else(|p| p.into_inner());
        let state = map.entry(biz_id.to_string()).or_insert_with(|| State {
            limit: self.initial as f64,
            in_flight: 0,
            slow_start: true,
            halved_at: None,
        });
        f(state)
    }

    /// A call slot for `biz_id`, or None when it is at its limit.
    pub(crate) fn try_acquire(self: &Arc<Self>, biz_id: &str) -> Option<Permit> {
        let took = self.with(biz_id, |s| {
            let free = (s.limit as usize) > s.in_flight;
            if free {
                s.in_flight += 1;
            }
            free
        });
        took.then(|| Permit {
            limits: self.clone(),
            biz_id: biz_id.to_string(),
            started: Instant::now(),
        })
    }

    /// The producer's current limit (whole calls).
    pub(crate) fn limit(&self, biz_id: &str) -> usize {
        self.with(biz_id, |s| s.limit as usize)
    }

    fn observe(&self, biz_id: &str, started: Instant, load: Load) {
        let max = self.max as f64;
        let limit = self.with(biz_id, |s| {
            match load {
                Load::Fine if s.slow_start => s.limit = (s.limit + 1.0).min(max),
                Load::Fine => s.limit = (s.limit + 1.0 / s.limit).min(max),
                Load::Overloaded => {
                    if s.halved_at.is_none_or(|at| started > at) {
                        s.limit = (s.limit / 2.0).max(1.0);
                        s.slow_start = false;
                        s.halved_at = Some(Instant::now());
                    }
                }
                Load::Unknown => {}
            }
            s.limit as usize
        });
        metrics::gauge!("trustmsg_verify_concurrency_limit", "biz_id" => biz_id.to_string())
            .set(limit as f64);
    }
}

/// One call slot; dropping it frees the slot.
pub(crate) struct Permit {
    limits: Arc<ProducerLimits>,
    biz_id: String,
    started: Instant,
}

impl Permit {
    /// Feeds what the call said about its endpoint into the producer's limit.
    pub(crate) fn observe(&self, load: Load) {
        self.limits.observe(&self.biz_id, self.started, load);
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.limits.with(&self.biz_id, |s| {
            s.in_flight = s.in_flight.saturating_sub(1);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers(limits: &Arc<ProducerLimits>, biz: &str, n: usize, load: Load) {
        for _ in 0..n {
            let p = limits.try_acquire(biz).expect("a free slot");
            p.observe(load);
        }
    }

    #[test]
    fn a_fast_endpoint_grows_to_the_maximum_and_no_further() {
        let limits = ProducerLimits::new(8, 64);
        let held: Vec<_> = (0..8).map(|_| limits.try_acquire("a").unwrap()).collect();
        assert!(limits.try_acquire("a").is_none(), "at its limit of 8");
        assert!(
            limits.try_acquire("b").is_some(),
            "other producers have their own"
        );
        drop(held);
        answers(&limits, "a", 100, Load::Fine);
        assert_eq!(limits.limit("a"), 64);
        let held: Vec<_> = (0..64).map(|_| limits.try_acquire("a").unwrap()).collect();
        assert!(limits.try_acquire("a").is_none());
        drop(held);
    }

    #[test]
    fn an_overload_halves_once_for_the_calls_in_flight_then_growth_is_additive() {
        let limits = ProducerLimits::new(16, 64);
        let in_flight: Vec<_> = (0..16).map(|_| limits.try_acquire("a").unwrap()).collect();
        for p in &in_flight {
            p.observe(Load::Overloaded);
        }
        assert_eq!(
            limits.limit("a"),
            8,
            "16 timeouts of one burst: one halving"
        );
        drop(in_flight);
        std::thread::sleep(Duration::from_millis(2));
        answers(&limits, "a", 1, Load::Overloaded);
        assert_eq!(limits.limit("a"), 4, "a later overload halves again");
        answers(&limits, "a", 4, Load::Fine);
        assert_eq!(
            limits.limit("a"),
            4,
            "+1/limit per answer: four answers come to 4.92"
        );
        answers(&limits, "a", 1, Load::Fine);
        assert_eq!(limits.limit("a"), 5);
        for _ in 0..10 {
            std::thread::sleep(Duration::from_millis(1));
            answers(&limits, "a", 1, Load::Overloaded);
        }
        assert_eq!(limits.limit("a"), 1, "never below one call");
        answers(&limits, "a", 3, Load::Unknown);
        assert_eq!(
            limits.limit("a"),
            1,
            "a failure that says nothing about load"
        );
    }

    #[test]
    fn an_answer_slower_than_half_the_timeout_is_a_sign_of_overload() {
        let t = Duration::from_millis(1000);
        assert_eq!(Load::of_answer(Duration::from_millis(10), t), Load::Fine);
        assert_eq!(Load::of_answer(Duration::from_millis(500), t), Load::Fine);
        assert_eq!(
            Load::of_answer(Duration::from_millis(501), t),
            Load::Overloaded
        );
    }
}
