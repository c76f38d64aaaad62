//! Check-back's flags (the per-producer values are defaults a registration
//! may override) and the address policy they describe.

use std::num::{NonZeroU32, NonZeroUsize};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::parse::{at_least_one, backoff_duration, duration, lease_margin, positive_duration};
use crate::net::address_policy::{AddressPolicy, StaticResolver, SystemResolver};

/// Check-back settings; the per-producer values are defaults a registration may override.
#[derive(Debug, Clone, Args)]
pub struct VerifierArgs {
    /// Default delay after prepare before the first check-back.
    #[arg(long, env = "TRUSTMSG_FIRST_VERIFY_AFTER", default_value = "30s", value_parser = duration)]
    pub first_verify_after: Duration,

    /// Default timeout of one check-back call.
    #[arg(long, env = "TRUSTMSG_VERIFY_TIMEOUT", default_value = "5s", value_parser = positive_duration)]
    pub verify_timeout: Duration,

    /// Default check-back attempts before VERIFY_FAILED.
    #[arg(long, env = "TRUSTMSG_MAX_VERIFY_ATTEMPTS", default_value = "15", value_parser = at_least_one::<NonZeroU32>)]
    pub max_verify_attempts: NonZeroU32,

    /// First retry delay after a check-back that decided nothing (doubles each time; at most 30d).
    #[arg(long, env = "TRUSTMSG_VERIFY_BACKOFF_BASE", default_value = "10s", value_parser = backoff_duration)]
    pub verify_backoff_base: Duration,

    /// Longest retry delay between check-backs (at most 30d).
    #[arg(long, env = "TRUSTMSG_VERIFY_BACKOFF_MAX", default_value = "5m", value_parser = backoff_duration)]
    pub verify_backoff_max: Duration,

    /// The longest check-back timeout a registration may set
    /// (`verify_timeout_ms`), and so the longest one call may take.
    #[arg(long, env = "TRUSTMSG_VERIFY_TIMEOUT_MAX", default_value = "2m", value_parser = positive_duration)]
    pub verify_timeout_max: Duration,

    /// How much longer than its call a check-back claim lasts. A claim on a
    /// PREPARED row covers its producer's call (`verify_timeout_ms`, at most
    /// --verify-timeout-max) plus this: during the first half a claimed row
    /// may wait for a free call slot, the second half is left for the writes
    /// after the call. A crashed instance's rows are checked again within
    /// their producer's timeout + this + --verify-interval of another
    /// instance running. At least 1s.
    #[arg(long, env = "TRUSTMSG_VERIFY_LEASE_MARGIN", default_value = "5s", value_parser = lease_margin)]
    pub verify_lease_margin: Duration,

    /// How often the verifier looks for due check-backs.
    #[arg(long, env = "TRUSTMSG_VERIFY_INTERVAL", default_value = "1s", value_parser = positive_duration)]
    pub verify_interval: Duration,

    /// Rows claimed per verifier round.
    #[arg(long, env = "TRUSTMSG_VERIFY_BATCH", default_value = "256", value_parser = at_least_one::<NonZeroU32>)]
    pub verify_batch: NonZeroU32,

    /// Check-back calls in flight at once, in all.
    #[arg(long, env = "TRUSTMSG_VERIFY_CONCURRENCY", default_value = "256", value_parser = at_least_one::<NonZeroUsize>)]
    pub verify_concurrency: NonZeroUsize,

    /// Check-back calls in flight at once to one producer, at most. Each
    /// producer starts at 8 (or this, when lower); its limit grows while its
    /// endpoint answers in under half its timeout and halves on timeouts,
    /// failed connections, 429 and 5xx.
    #[arg(
        long,
        env = "TRUSTMSG_VERIFY_CONCURRENCY_PER_PRODUCER",
        default_value = "256",
        value_parser = at_least_one::<NonZeroUsize>
    )]
    pub verify_concurrency_per_producer: NonZeroUsize,

    /// Addresses check-back may dial (CIDR, repeatable). Empty: all but the denied.
    #[arg(
        long = "verify-allow-cidr",
        env = "TRUSTMSG_VERIFY_ALLOW_CIDR",
        value_delimiter = ','
    )]
    pub verify_allow_cidr: Vec<ipnet::IpNet>,

    /// Addresses check-back must never dial (CIDR, repeatable), on top of the
    /// built-in link-local/metadata, unspecified and multicast ranges.
    #[arg(
        long = "verify-deny-cidr",
        env = "TRUSTMSG_VERIFY_DENY_CIDR",
        value_delimiter = ','
    )]
    pub verify_deny_cidr: Vec<ipnet::IpNet>,

    /// Fixed DNS answers for check-back hostnames, `HOST=IP` (repeatable), like
    /// curl's `--resolve`. The answers still pass the allow/deny rules.
    #[arg(
        long = "verify-resolve",
        env = "TRUSTMSG_VERIFY_RESOLVE",
        value_delimiter = ',',
        value_parser = resolve_override
    )]
    pub verify_resolve: Vec<ResolveOverride>,

    /// Do not run the verifier in this instance.
    #[arg(long, env = "TRUSTMSG_NO_VERIFIER")]
    pub no_verifier: bool,
}

/// One `--verify-resolve HOST=IP`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveOverride {
    /// The hostname (compared case-insensitively).
    pub host: String,
    /// The address it stands for.
    pub ip: std::net::IpAddr,
}

fn resolve_override(s: &str) -> Result<ResolveOverride, String> {
    let (host, ip) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not HOST=IP"))?;
    let ip = ip
        .trim_matches(|c| c == '[' || c == ']')
        .parse()
        .map_err(|e| format!("{ip:?} is not an IP address: {e}"))?;
    if host.is_empty() {
        return Err(format!("{s:?} has no host"));
    }
    Ok(ResolveOverride {
        host: host.to_ascii_lowercase(),
        ip,
    })
}

/// The address policy `--verify-allow-cidr`, `--verify-deny-cidr` and
/// `--verify-resolve` describe.
pub(super) fn address_policy(args: &VerifierArgs) -> AddressPolicy {
    let policy = AddressPolicy::new(
        args.verify_allow_cidr.clone(),
        args.verify_deny_cidr.clone(),
    );
    if args.verify_resolve.is_empty() {
        return policy;
    }
    policy.with_resolver(Arc::new(StaticResolver::new(
        args.verify_resolve.iter().map(|o| (o.host.clone(), o.ip)),
        Some(Arc::new(SystemResolver)),
    )))
}
