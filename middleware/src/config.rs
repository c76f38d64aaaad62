//! Command-line and environment configuration.
//!
//! Every flag is also an environment variable (`TRUSTMSG_…`). Durations are
//! written the human way (`30s`, `5m`, `250ms`). Secrets are wrapped in
//! [`Secret`] so they never reach a log line or a `Debug` dump.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// A value that must not be logged: `Debug` and `Display` print `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }
    /// The secret itself; call only where it is used, never to log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_string()))
    }
}

fn duration(s: &str) -> Result<Duration, humantime::DurationError> {
    humantime::parse_duration(s)
}

/// trustmsg: reliable messages to Kafka with prepare/commit and check-back.
#[derive(Debug, Parser)]
#[command(name = "trustmsg", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the service: producer API, admin API, forwarder and verifier.
    Serve(Box<ServeArgs>),
    /// Apply database migrations and exit.
    Migrate(DatabaseArgs),
    /// Measure throughput and latency next to the database's own ceiling.
    Bench(Box<crate::bench::BenchArgs>),
}

/// Where the store lives.
#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// Database URL: `mysql://user:pass@host:3306/db` (production) or `sqlite://path.db?mode=rwc`.
    #[arg(long, env = "TRUSTMSG_DATABASE_URL")]
    pub database_url: Secret,
}

/// Everything `trustmsg serve` needs.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// The store.
    #[command(flatten)]
    pub database: DatabaseArgs,

    /// Address the HTTP API listens on (port 0 picks a free port).
    #[arg(long, env = "TRUSTMSG_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Bearer token for the admin API (producer registry, operators).
    #[arg(long, env = "TRUSTMSG_ADMIN_TOKEN")]
    pub admin_token: Option<Secret>,

    /// Accept every request without a token. Local development only.
    #[arg(long, env = "TRUSTMSG_INSECURE_NO_AUTH")]
    pub insecure_no_auth: bool,

    /// Apply pending migrations at start-up.
    #[arg(long, env = "TRUSTMSG_AUTO_MIGRATE")]
    pub auto_migrate: bool,

    /// Largest accepted message payload, in bytes (after base64 decoding).
    #[arg(long, env = "TRUSTMSG_MAX_PAYLOAD_BYTES", default_value_t = 1024 * 1024)]
    pub max_payload_bytes: usize,

    /// How long a producer registration is cached before it is read again.
    /// Updates made through this instance are seen at once.
    #[arg(long, env = "TRUSTMSG_PRODUCER_CACHE_TTL", default_value = "30s", value_parser = duration)]
    pub producer_cache_ttl: Duration,

    /// Concurrent write batches (prepares, and decisions, each): requests that
    /// arrive while these are busy are written together in the next batch.
    #[arg(long, env = "TRUSTMSG_WRITE_WORKERS", default_value_t = 2)]
    pub write_workers: usize,

    /// Most prepares (or decisions) written in one transaction.
    #[arg(long, env = "TRUSTMSG_WRITE_BATCH", default_value_t = 128)]
    pub write_batch: usize,

    /// How long in-flight requests and sends may take to finish on shutdown.
    #[arg(long, env = "TRUSTMSG_SHUTDOWN_GRACE", default_value = "10s", value_parser = duration)]
    pub shutdown_grace: Duration,

    /// Kafka and forwarder settings.
    #[command(flatten)]
    pub forwarder: ForwarderArgs,

    /// Check-back settings.
    #[command(flatten)]
    pub verifier: VerifierArgs,

    /// Alerting.
    #[command(flatten)]
    pub alerts: AlertArgs,
}

/// Kafka and forwarder settings.
#[derive(Debug, Clone, Args)]
pub struct ForwarderArgs {
    /// Kafka bootstrap servers (`host:port,host:port`). Without it nothing is sent
    /// and committed messages wait, safely, until a forwarder runs.
    #[arg(long, env = "TRUSTMSG_KAFKA_BROKERS")]
    pub kafka_brokers: Option<String>,

    /// Extra librdkafka producer settings, `key=value`, repeatable.
    #[arg(
        long = "kafka-config",
        env = "TRUSTMSG_KAFKA_CONFIG",
        value_delimiter = ','
    )]
    pub kafka_config: Vec<String>,

    /// librdkafka `message.timeout.ms`: how long one send may stay in flight.
    #[arg(long, env = "TRUSTMSG_KAFKA_MESSAGE_TIMEOUT", default_value = "30s", value_parser = duration)]
    pub kafka_message_timeout: Duration,

    /// How long a claim on a committed row lasts; must exceed the Kafka message timeout.
    #[arg(long, env = "TRUSTMSG_SEND_LEASE", default_value = "60s", value_parser = duration)]
    pub send_lease: Duration,

    /// How often the sweeper looks for due sends (retries, other instances' expired claims).
    #[arg(long, env = "TRUSTMSG_SWEEP_INTERVAL", default_value = "1s", value_parser = duration)]
    pub sweep_interval: Duration,

    /// Rows claimed per sweep.
    #[arg(long, env = "TRUSTMSG_SWEEP_BATCH", default_value_t = 256)]
    pub sweep_batch: u32,

    /// First retry delay after a transient send error (doubles each time).
    #[arg(long, env = "TRUSTMSG_SEND_BACKOFF_BASE", default_value = "1s", value_parser = duration)]
    pub send_backoff_base: Duration,

    /// Longest retry delay after a transient send error.
    #[arg(long, env = "TRUSTMSG_SEND_BACKOFF_MAX", default_value = "60s", value_parser = duration)]
    pub send_backoff_max: Duration,

    /// Send attempts before SEND_FAILED.
    #[arg(long, env = "TRUSTMSG_MAX_SEND_ATTEMPTS", default_value_t = 30)]
    pub max_send_attempts: u32,

    /// Sends in flight at once (fast path and sweeper together).
    #[arg(long, env = "TRUSTMSG_SEND_CONCURRENCY", default_value_t = 1024)]
    pub send_concurrency: usize,

    /// Do not run the forwarder in this instance.
    #[arg(long, env = "TRUSTMSG_NO_FORWARDER")]
    pub no_forwarder: bool,
}

/// Check-back settings; the per-producer values are defaults a registration may override.
#[derive(Debug, Clone, Args)]
pub struct VerifierArgs {
    /// Default delay after prepare before the first check-back.
    #[arg(long, env = "TRUSTMSG_FIRST_VERIFY_AFTER", default_value = "30s", value_parser = duration)]
    pub first_verify_after: Duration,

    /// Default timeout of one check-back call.
    #[arg(long, env = "TRUSTMSG_VERIFY_TIMEOUT", default_value = "5s", value_parser = duration)]
    pub verify_timeout: Duration,

    /// Default check-back attempts before VERIFY_FAILED.
    #[arg(long, env = "TRUSTMSG_MAX_VERIFY_ATTEMPTS", default_value_t = 15)]
    pub max_verify_attempts: u32,

    /// First retry delay after a check-back that decided nothing (doubles each time).
    #[arg(long, env = "TRUSTMSG_VERIFY_BACKOFF_BASE", default_value = "10s", value_parser = duration)]
    pub verify_backoff_base: Duration,

    /// Longest retry delay between check-backs.
    #[arg(long, env = "TRUSTMSG_VERIFY_BACKOFF_MAX", default_value = "5m", value_parser = duration)]
    pub verify_backoff_max: Duration,

    /// How long a claim on a PREPARED row for check-back lasts.
    #[arg(long, env = "TRUSTMSG_VERIFY_LEASE", default_value = "2m", value_parser = duration)]
    pub verify_lease: Duration,

    /// How often the verifier looks for due check-backs.
    #[arg(long, env = "TRUSTMSG_VERIFY_INTERVAL", default_value = "1s", value_parser = duration)]
    pub verify_interval: Duration,

    /// Rows claimed per verifier round.
    #[arg(long, env = "TRUSTMSG_VERIFY_BATCH", default_value_t = 256)]
    pub verify_batch: u32,

    /// Check-back calls in flight at once, in all.
    #[arg(long, env = "TRUSTMSG_VERIFY_CONCURRENCY", default_value_t = 64)]
    pub verify_concurrency: usize,

    /// Check-back calls in flight at once to one producer.
    #[arg(
        long,
        env = "TRUSTMSG_VERIFY_CONCURRENCY_PER_PRODUCER",
        default_value_t = 8
    )]
    pub verify_concurrency_per_producer: usize,

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

/// Alerting.
#[derive(Debug, Clone, Args)]
pub struct AlertArgs {
    /// URL that receives a JSON POST for every alert (VERIFY_FAILED, SEND_FAILED).
    #[arg(long, env = "TRUSTMSG_ALERT_WEBHOOK")]
    pub alert_webhook: Option<url::Url>,
}

impl ServeArgs {
    /// Parses serve flags from an argument list (tests build configs this way).
    pub fn from_args<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        #[derive(Parser)]
        struct Wrapper {
            #[command(flatten)]
            serve: ServeArgs,
        }
        let args = std::iter::once(std::ffi::OsString::from("trustmsg"))
            .chain(args.into_iter().map(Into::into));
        Ok(Wrapper::try_parse_from(args)?.serve)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), "Secret(***)");
        let args = ServeArgs::from_args([
            "--database-url",
            "mysql://u:pw@h/db",
            "--admin-token",
            "tok",
        ])
        .unwrap();
        let dump = format!("{args:?}");
        assert!(!dump.contains("pw@") && !dump.contains("tok\""), "{dump}");
    }

    #[test]
    fn durations_parse_the_human_way() {
        let args = ServeArgs::from_args([
            "--database-url",
            "sqlite://x.db",
            "--first-verify-after",
            "250ms",
            "--verify-backoff-max",
            "5m",
        ])
        .unwrap();
        assert_eq!(args.verifier.first_verify_after, Duration::from_millis(250));
        assert_eq!(args.verifier.verify_backoff_max, Duration::from_secs(300));
        assert_eq!(args.listen.to_string(), "127.0.0.1:8080");
    }
}
