//! Command-line and environment configuration, and the one place it is checked.
//!
//! Every flag is also an environment variable (`TRUSTMSG_…`). Durations are
//! written the human way (`30s`, `5m`, `250ms`). Secrets are wrapped in
//! [`Secret`] so they never reach a log line or a `Debug` dump.
//!
//! A bad value is refused before anything starts, with one line naming the
//! flag: counts, intervals, timeouts and leases that must not be zero are
//! refused while parsing (a zero worker count would panic, a zero interval would
//! kill a worker while the API keeps accepting), and the rules that relate two
//! flags (a lease must outlive the call it covers) by [`ServeArgs::settings`],
//! which also turns the flags into the typed settings each component takes.
//! Components never read flags themselves.

use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser};

use crate::api::auth::AuthConfig;
use crate::api::validate::{MAX_BIZ_ID, MAX_MESSAGE_KEY};
use crate::api::ProducerDefaults;
use crate::backoff::Backoff;
use crate::forwarder::kafka::KafkaSettings;
use crate::forwarder::ForwarderConfig;
use crate::group_commit::producer_writes::WriteSettings;
use crate::handoff::record::record_size;
use crate::net::address_policy::{AddressPolicy, StaticResolver, SystemResolver};
use crate::net::kafka_settings::KafkaConfigArg;
pub use crate::net::secret::{quiet, quiet_with, Quiet, RedactedUrl, Secret};
use crate::net::server_tls::TlsFiles;
use crate::store::DatabaseUrl;
use crate::store::VerifyLease;
use crate::verifier::VerifierConfig;
use crate::workers::overdue::OverdueSettings;

/// Any duration, `0s` included.
fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| e.to_string())
}

/// A duration that must not be zero (intervals, timeouts, leases, backoff).
fn positive_duration(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d.is_zero() => Err("must be longer than 0".into()),
        d => Ok(d),
    }
}

/// `--flow-interval`: longer than 0 and at most a minute, so every minute
/// of the flow gets its counts by the end of the next one.
fn flow_interval(s: &str) -> Result<Duration, String> {
    match positive_duration(s)? {
        d if d > Duration::from_secs(60) => Err("must be at most 1m".into()),
        d => Ok(d),
    }
}

/// The longest backoff flag accepted. A retry delay becomes a due time in the
/// database: an absurd one (`1000000000y`) used to panic the worker that
/// computed it, or would leave the row due never.
const MAX_BACKOFF: Duration = Duration::from_secs(30 * 24 * 3600);

/// A backoff delay: longer than 0, at most [`MAX_BACKOFF`].
fn backoff_duration(s: &str) -> Result<Duration, String> {
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
fn lease_margin(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d < Duration::from_secs(1) => Err("must be at least 1s".into()),
        d => Ok(d),
    }
}

/// A count that must be at least 1.
fn at_least_one<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    match s.trim().parse::<u64>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(_) => s.trim().parse().map_err(|_| format!("{s:?} is too large")),
        Err(e) => Err(format!("{s:?} is not a whole number: {e}")),
    }
}

/// `--alert-signing-secret`: `whsec_` and the base64 of a 24- to 64-byte
/// key, as Standard Webhooks libraries expect. Checked here rather than by
/// clap, whose refusals repeat the value: this one never does.
fn check_signing_secret(secret: &Secret) -> Result<(), ConfigError> {
    use base64::Engine;
    let prefix = trustmsg_verify_api::webhook::SECRET_PREFIX;
    let refuse = |why: String| {
        Err(ConfigError(format!(
            "--alert-signing-secret (TRUSTMSG_ALERT_SIGNING_SECRET) {why}; \
             make one with: echo whsec_$(openssl rand -base64 32)"
        )))
    };
    let Some(b64) = secret.expose().strip_prefix(prefix) else {
        return refuse(format!("must start with {prefix:?} (whsec_<base64 key>)"));
    };
    let Ok(key) = base64::engine::general_purpose::STANDARD.decode(b64) else {
        return refuse(format!("is not {prefix:?} followed by standard base64"));
    };
    if !(24..=64).contains(&key.len()) {
        return refuse(format!(
            "has a key of {} bytes; it must be 24 to 64",
            key.len()
        ));
    }
    Ok(())
}

/// A bad combination of flags, refused at start-up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

/// Where the store lives. The URLs are parsed here, once, into
/// [`DatabaseUrl`]s, which never show their passwords; one that cannot be
/// used is refused without being repeated.
#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// Database URL: `mysql://user:pass@host:3306/db` (production) or
    /// `sqlite://path.db?mode=rwc`; characters such as `# / ? @ %` in the
    /// user name or password percent-encoded (`%23 %2F %3F %40 %25`). Repeat
    /// it to spread messages over several MySQL/MariaDB databases (shards,
    /// docs/scaling.md): the first also holds the producers, the consumer
    /// groups and the slot map, and the list keeps the order it was first
    /// given in.
    #[arg(long = "database-url", env = "TRUSTMSG_DATABASE_URL", hide_env_values = true, required = true, value_parser = quiet::<DatabaseUrl>())]
    pub database_urls: Vec<DatabaseUrl>,

    /// A read replica of a `--database-url` (MySQL/MariaDB), repeatable: the
    /// first `--replica-url` is the first database's, and so on. Operator
    /// views that read much (message and alert lists, the summary, the
    /// backlog gauges) read it, as stale as its lag; claims, decisions and
    /// single-message reads never do. Falls back to the database itself
    /// while the replica does not answer.
    #[arg(long = "replica-url", env = "TRUSTMSG_REPLICA_URL", hide_env_values = true, value_parser = quiet::<DatabaseUrl>())]
    pub replica_urls: Vec<DatabaseUrl>,
}

impl DatabaseArgs {
    /// The URLs, first the one that holds the registry.
    pub fn urls(&self) -> &[DatabaseUrl] {
        &self.database_urls
    }

    /// The replicas' URLs, in the order of the databases they copy.
    pub fn replicas(&self) -> &[DatabaseUrl] {
        &self.replica_urls
    }
}

/// `--tls-cert` and `--tls-key`: both or neither.
#[derive(Debug, Clone, Args)]
pub struct TlsArgs {
    /// Serve HTTPS (API, console, /metrics) with this certificate chain: a
    /// PEM file, the server's certificate first, then intermediates. Needs
    /// --tls-key. Reloaded on SIGHUP and when the file changes.
    #[arg(
        long,
        env = "TRUSTMSG_TLS_CERT",
        value_name = "FILE",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,

    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1). Needs
    /// --tls-cert. Reloaded with it.
    #[arg(
        long,
        env = "TRUSTMSG_TLS_KEY",
        value_name = "FILE",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,

    /// How often --tls-cert and --tls-key are read to see whether they
    /// changed (a renewal is then served without a restart); 0s: only on
    /// SIGHUP.
    #[arg(long, env = "TRUSTMSG_TLS_RELOAD_INTERVAL", default_value = "5s", value_parser = duration)]
    pub tls_reload_interval: Duration,
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

    /// HTTPS on `--listen` instead of plain HTTP.
    #[command(flatten)]
    pub tls: TlsArgs,

    /// Bearer token for the admin API (producer registry, operators).
    #[arg(long, env = "TRUSTMSG_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<Secret>,

    /// Accept every request without a token. Local development only.
    #[arg(long, env = "TRUSTMSG_INSECURE_NO_AUTH")]
    pub insecure_no_auth: bool,

    /// Apply pending migrations at start-up.
    #[arg(long, env = "TRUSTMSG_AUTO_MIGRATE")]
    pub auto_migrate: bool,

    /// Largest accepted message payload, in bytes (after base64 decoding).
    /// With the record's framing it must fit `--kafka-message-max-bytes`; the
    /// default leaves room for the largest key and headers too.
    #[arg(long, env = "TRUSTMSG_MAX_PAYLOAD_BYTES", default_value = "960000", value_parser = at_least_one::<NonZeroUsize>)]
    pub max_payload_bytes: NonZeroUsize,

    /// API requests served at once; more are answered 503 `overloaded` with
    /// `Retry-After` instead of queueing (health and metrics are not counted).
    #[arg(long, env = "TRUSTMSG_MAX_CONCURRENT_REQUESTS", default_value = "512", value_parser = at_least_one::<NonZeroUsize>)]
    pub max_concurrent_requests: NonZeroUsize,

    /// How long a producer registration is cached before it is read again.
    /// Updates made through this instance are seen at once.
    #[arg(long, env = "TRUSTMSG_PRODUCER_CACHE_TTL", default_value = "30s", value_parser = duration)]
    pub producer_cache_ttl: Duration,

    /// Every producer must have a topic allow-list (`topics`): a registration
    /// without one is refused (400 `topics_required`), and a producer
    /// registered without one before can no longer prepare (403
    /// `topic_not_allowed`) until an operator gives it one. Start-up logs a
    /// warning naming each such producer.
    #[arg(long, env = "TRUSTMSG_REQUIRE_PRODUCER_TOPICS")]
    pub require_producer_topics: bool,

    /// Concurrent write batches (prepares, and decisions, each): requests that
    /// arrive while these are busy are written together in the next batch.
    /// More overlap the database's fsyncs; fewer make fuller batches (fewer
    /// statements per message). See docs/performance.md.
    #[arg(long, env = "TRUSTMSG_WRITE_WORKERS", default_value = "2", value_parser = at_least_one::<NonZeroUsize>)]
    pub write_workers: NonZeroUsize,

    /// Most prepares (or decisions) written in one transaction.
    #[arg(long, env = "TRUSTMSG_WRITE_BATCH", default_value = "128", value_parser = at_least_one::<NonZeroUsize>)]
    pub write_batch: NonZeroUsize,

    /// MiB of just-prepared rows this instance keeps for their commit or
    /// rollback, which then skips reading the row (0: keep none, always read).
    #[arg(long, env = "TRUSTMSG_PREPARED_CACHE_MIB", default_value = "32")]
    pub prepared_cache_mib: u64,

    /// Longest time an API request may take. Past it the request is answered
    /// 503 `request_timeout` with `Retry-After`, whatever it was waiting for
    /// (an unreachable or slow database, a full write queue): callers get an
    /// answer they can act on instead of hanging. A write cut off this way may
    /// still have been applied; prepare, commit and rollback are safe to repeat.
    /// Each database statement of the background workers gets the same
    /// deadline and is retried on the worker's next round.
    #[arg(long, env = "TRUSTMSG_REQUEST_TIMEOUT", default_value = "5s", value_parser = positive_duration)]
    pub request_timeout: Duration,

    /// Delete SENT and ROLLED_BACK messages (with their audit and check-back
    /// history) unchanged for longer than this, e.g. `7d`. 0 keeps everything.
    #[arg(long, env = "TRUSTMSG_RETENTION", default_value = "0s", value_parser = duration)]
    pub retention: Duration,

    /// How often the backlog gauges of `/metrics` are read from the database.
    #[arg(long, env = "TRUSTMSG_BACKLOG_INTERVAL", default_value = "15s", value_parser = positive_duration)]
    pub backlog_interval: Duration,

    /// How often this instance adds what it counted (prepared, committed,
    /// sent, failed, check-back answers) to the database's flow per minute
    /// (`GET /v1/admin/flow`, the console's charts); also done at shutdown.
    /// One statement per interval, whatever the traffic. At most 1m.
    #[arg(long, env = "TRUSTMSG_FLOW_INTERVAL", default_value = "10s", value_parser = flow_interval)]
    pub flow_interval: Duration,

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

    /// Spans of our own, exported over OTLP.
    #[command(flatten)]
    pub tracing: TracingArgs,

    /// The Kafka way in: prepare, commit and rollback submitted as records.
    #[command(flatten)]
    pub submit: SubmitArgs,
}

/// The Kafka way in (docs/kafka-submit.md): producers submit prepare,
/// commit and rollback as signed records to a topic this instance consumes.
#[derive(Debug, Clone, Args)]
pub struct SubmitArgs {
    /// Consume producers' prepare, commit and rollback records from this
    /// topic (needs `--kafka-brokers`; `--kafka-config` applies to its
    /// consumer too). What cannot be applied goes to `<NAME>.dlq`. Off when
    /// not given.
    #[arg(long, env = "TRUSTMSG_SUBMIT_TOPIC")]
    pub submit_topic: Option<String>,

    /// The consumer group the instances consuming `--submit-topic` share.
    #[arg(long, env = "TRUSTMSG_SUBMIT_GROUP", default_value = "trustmsg")]
    pub submit_group: String,

    /// How long a submitted commit whose prepare has not been seen waits for
    /// it (its prepare may be on another partition) before it is
    /// dead-lettered with `message_not_found`.
    #[arg(long, env = "TRUSTMSG_SUBMIT_COMMIT_WAIT", default_value = "5m", value_parser = positive_duration)]
    pub submit_commit_wait: Duration,

    /// Most submitted records applied as one batch (their offsets are
    /// committed together once the database has them).
    #[arg(long, env = "TRUSTMSG_SUBMIT_BATCH", default_value = "1000", value_parser = at_least_one::<NonZeroUsize>)]
    pub submit_batch: NonZeroUsize,
}

/// Spans of trustmsg's own (prepare, commit, rollback, check-back, send),
/// exported over OTLP/HTTP protobuf. Trace propagation (a prepare's
/// `traceparent` to check-back and the Kafka record) works without them.
#[derive(Debug, Clone, Args)]
pub struct TracingArgs {
    /// Export spans to this OpenTelemetry collector: its OTLP/HTTP base URL
    /// (e.g. `http://127.0.0.1:4318`; spans are POSTed to `<URL>/v1/traces`
    /// as protobuf). Off when not given: no spans are made at all.
    #[arg(long, env = "TRUSTMSG_OTLP_ENDPOINT", hide_env_values = true, value_parser = quiet::<RedactedUrl>())]
    pub otlp_endpoint: Option<RedactedUrl>,

    /// The `service.name` the exported spans carry.
    #[arg(long, env = "TRUSTMSG_OTLP_SERVICE_NAME", default_value = "trustmsg")]
    pub otlp_service_name: String,

    /// How often the batched spans are exported (and at shutdown).
    #[arg(long, env = "TRUSTMSG_OTLP_EXPORT_INTERVAL", default_value = "5s", value_parser = positive_duration)]
    pub otlp_export_interval: Duration,
}

/// Kafka and forwarder settings.
#[derive(Debug, Clone, Args)]
pub struct ForwarderArgs {
    /// Kafka bootstrap servers (`host:port,host:port`; credentials go in
    /// `--kafka-config`). Without it nothing is sent and committed messages
    /// wait, safely, until a forwarder runs.
    #[arg(long, env = "TRUSTMSG_KAFKA_BROKERS", hide_env_values = true, value_parser = quiet_with(crate::net::kafka_settings::brokers))]
    pub kafka_brokers: Option<String>,

    /// Extra librdkafka producer settings, `key=value`, repeatable (TLS,
    /// SASL: docs/operations.md), or `@FILE` of such lines, which keeps a
    /// password out of `ps`. Secret values are never logged.
    #[arg(
        long = "kafka-config",
        env = "TRUSTMSG_KAFKA_CONFIG",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub kafka_config: Vec<KafkaConfigArg>,

    /// librdkafka `message.max.bytes`: the largest Kafka record (payload, key,
    /// headers and framing). Prepare refuses a message whose record would be
    /// larger, so what is accepted can be sent; keep it within the topics'
    /// `max.message.bytes` and the same on every instance.
    #[arg(long, env = "TRUSTMSG_KAFKA_MESSAGE_MAX_BYTES", default_value = "1000000", value_parser = at_least_one::<NonZeroUsize>)]
    pub kafka_message_max_bytes: NonZeroUsize,

    /// librdkafka `message.timeout.ms`: how long one send may stay in flight.
    #[arg(long, env = "TRUSTMSG_KAFKA_MESSAGE_TIMEOUT", default_value = "30s", value_parser = positive_duration)]
    pub kafka_message_timeout: Duration,

    /// How long a claim on a committed row lasts; must exceed the Kafka message timeout.
    /// (An instance without a forwarder takes no claim on its commits.)
    #[arg(long, env = "TRUSTMSG_SEND_LEASE", default_value = "60s", value_parser = positive_duration)]
    pub send_lease: Duration,

    /// How often the sweeper looks for due sends (retries, other instances' expired claims).
    #[arg(long, env = "TRUSTMSG_SWEEP_INTERVAL", default_value = "1s", value_parser = positive_duration)]
    pub sweep_interval: Duration,

    /// Rows claimed per sweep, at most the free send slots; also the most SENT
    /// marks written in one statement. Larger claims drain a backlog faster
    /// (fewer claim transactions and mark statements per row; see
    /// docs/performance.md). A claim reads its rows whole, so it takes at most
    /// as many as `--payload-budget-mib` holds at `--max-payload-bytes` each.
    #[arg(long, env = "TRUSTMSG_SWEEP_BATCH", default_value = "1024", value_parser = at_least_one::<NonZeroU32>)]
    pub sweep_batch: NonZeroU32,

    /// First retry delay after a transient send error (doubles each time; at most 30d).
    #[arg(long, env = "TRUSTMSG_SEND_BACKOFF_BASE", default_value = "1s", value_parser = backoff_duration)]
    pub send_backoff_base: Duration,

    /// Longest retry delay after a transient send error (at most 30d).
    #[arg(long, env = "TRUSTMSG_SEND_BACKOFF_MAX", default_value = "60s", value_parser = backoff_duration)]
    pub send_backoff_max: Duration,

    /// Send attempts before SEND_FAILED.
    #[arg(long, env = "TRUSTMSG_MAX_SEND_ATTEMPTS", default_value = "30", value_parser = at_least_one::<NonZeroU32>)]
    pub max_send_attempts: NonZeroU32,

    /// Sends in flight at once (fast path and sweeper together).
    #[arg(long, env = "TRUSTMSG_SEND_CONCURRENCY", default_value = "1024", value_parser = at_least_one::<NonZeroUsize>)]
    pub send_concurrency: NonZeroUsize,

    /// MiB of payloads held for sending at once: commits waiting for a send
    /// slot, rows a sweep read, records in librdkafka's queue (its
    /// `queue.buffering.max.kbytes` is set to it). Beyond it commits are left
    /// to the sweepers and sweeps claim less, so memory stays bounded however
    /// large the payloads and however long Kafka is away. At least
    /// `--kafka-message-max-bytes`. See docs/operations.md, "Memory".
    #[arg(long, env = "TRUSTMSG_PAYLOAD_BUDGET_MIB", default_value = "128", value_parser = at_least_one::<NonZeroU64>)]
    pub payload_budget_mib: NonZeroU64,

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

/// Alerting.
#[derive(Debug, Clone, Args)]
pub struct AlertArgs {
    /// URL that receives a JSON POST for every alert (verify_failed,
    /// send_failed, quarantined, send_overdue, verify_overdue), retried until
    /// it answers 2xx, from whichever instance is running. Without it alerts
    /// are logged and counted only (state no_webhook).
    /// The webhook is dialled under the check-back address rules
    /// (--verify-allow-cidr, --verify-deny-cidr, the built-in denials),
    /// checked at start-up and on every connection.
    #[arg(long, env = "TRUSTMSG_ALERT_WEBHOOK", hide_env_values = true, value_parser = quiet::<RedactedUrl>())]
    pub alert_webhook: Option<RedactedUrl>,

    /// Sign every alert POST the Standard Webhooks way (`webhook-id` = the
    /// alert id, `webhook-timestamp`, `webhook-signature`) with this secret,
    /// `whsec_` followed by the base64 of 24 to 64 random bytes (e.g.
    /// `echo whsec_$(openssl rand -base64 32)`). Without it alerts are POSTed
    /// unsigned and anyone who can reach the webhook can forge one.
    #[arg(long, env = "TRUSTMSG_ALERT_SIGNING_SECRET", hide_env_values = true)]
    pub alert_signing_secret: Option<Secret>,

    /// Alert once for a committed message still not in Kafka this long after
    /// its commit (its sends keep timing out or finding the cluster away,
    /// which counts no attempt). 0 turns this alert off.
    #[arg(long, env = "TRUSTMSG_ALERT_SEND_OVERDUE_AFTER", default_value = "15m", value_parser = duration)]
    pub alert_send_overdue_after: Duration,

    /// Alert once for a message still PREPARED this long after its prepare
    /// (its check-back keeps being put off). 0 turns this alert off.
    #[arg(long, env = "TRUSTMSG_ALERT_VERIFY_OVERDUE_AFTER", default_value = "2h", value_parser = duration)]
    pub alert_verify_overdue_after: Duration,
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

/// What `trustmsg serve` runs with: checked, and typed for each component.
#[derive(Debug)]
pub(crate) struct Settings {
    /// The store's URLs, one per shard (usually one).
    pub(crate) database_urls: Vec<DatabaseUrl>,
    /// Read replicas of the first of them.
    pub(crate) replica_urls: Vec<DatabaseUrl>,
    /// Create the database and apply migrations at start-up.
    pub(crate) auto_migrate: bool,
    /// Where the HTTP API listens.
    pub(crate) listen: SocketAddr,
    /// The certificate and key to serve HTTPS with; None: plain HTTP.
    pub(crate) tls: Option<TlsFiles>,
    /// Who may call what.
    pub(crate) auth: AuthConfig,
    /// Largest payload in bytes after decoding.
    pub(crate) max_payload_bytes: usize,
    /// Largest Kafka record (librdkafka's `message.max.bytes`).
    pub(crate) max_record_bytes: usize,
    /// API requests served at once.
    pub(crate) max_concurrent_requests: usize,
    /// Fallbacks for producer registrations.
    pub(crate) producer_defaults: ProducerDefaults,
    /// How long a producer registration is cached.
    pub(crate) producer_cache_ttl: Duration,
    /// `--require-producer-topics`.
    pub(crate) require_producer_topics: bool,
    /// Group commit of prepares and decisions.
    pub(crate) writes: WriteSettings,
    /// Longest time an API request may take before it is answered 503.
    pub(crate) request_timeout: Duration,
    /// Which check-back addresses may be dialled (registration and verifier).
    pub(crate) address_policy: AddressPolicy,
    /// Whether and how this instance sends to Kafka.
    pub(crate) forwarding: Forwarding,
    /// This instance's verifier, unless `--no-verifier`.
    pub(crate) verifier: Option<VerifierConfig>,
    /// Where alerts are POSTed, if anywhere.
    pub(crate) alert_webhook: Option<RedactedUrl>,
    /// What alert POSTs are signed with, if anything.
    pub(crate) alert_signing_secret: Option<Secret>,
    /// How long in-flight alert POSTs may take to finish on shutdown.
    pub(crate) shutdown_grace: Duration,
    /// When a waiting message is alerted as overdue.
    pub(crate) overdue: OverdueSettings,
    /// How often the backlog gauges are refreshed.
    pub(crate) backlog_interval: Duration,
    /// How often the flow counts are added to the database.
    pub(crate) flow_interval: Duration,
    /// How long finished messages are kept; None: forever.
    pub(crate) retention: Option<Duration>,
    /// Where spans are exported, if anywhere.
    pub(crate) otlp: Option<crate::observability::trace::OtlpSettings>,
    /// The Kafka way in, if on.
    pub(crate) submit: Option<crate::submit::SubmitSettings>,
}

/// Whether this instance runs a forwarder.
#[derive(Debug)]
pub(crate) enum Forwarding {
    /// It sends nothing; committed messages wait for a forwarder elsewhere.
    Off {
        /// Why, for the start-up log.
        why: &'static str,
    },
    /// It publishes committed messages to Kafka.
    Kafka {
        /// The librdkafka producer's settings.
        kafka: KafkaSettings,
        /// The forwarder's.
        config: ForwarderConfig,
    },
}

impl ServeArgs {
    /// Checks the rules that relate several flags; the error names the flags
    /// to change. Starting the service checks them too.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.settings().map(drop)
    }

    /// Checks the rules that relate several flags and hands each component its
    /// settings.
    pub(crate) fn settings(&self) -> Result<Settings, ConfigError> {
        if !self.insecure_no_auth && self.admin_token.is_none() {
            return Err(ConfigError(
                "no admin token: pass --admin-token (or TRUSTMSG_ADMIN_TOKEN), \
                 or --insecure-no-auth for local development"
                    .into(),
            ));
        }
        let f = &self.forwarder;
        let v = &self.verifier;
        self.check_record_limit()?;
        if let Some(secret) = &self.alerts.alert_signing_secret {
            check_signing_secret(secret)?;
        }
        if v.verify_timeout > v.verify_timeout_max {
            return Err(ConfigError(format!(
                "--verify-timeout ({}) must not be longer than --verify-timeout-max ({}): \
                 the default a registration takes must be one it may set",
                humantime::format_duration(v.verify_timeout),
                humantime::format_duration(v.verify_timeout_max),
            )));
        }
        let forwarding = self.forwarding()?;
        // A commit claims its send for this instance's forwarder (the fast
        // path); with none here, it claims nothing and is due at once for
        // another instance's sweeper instead of waiting out a lease.
        let send_lease = match forwarding {
            Forwarding::Kafka { .. } => f.send_lease,
            Forwarding::Off { .. } => Duration::ZERO,
        };
        let verifier = if v.no_verifier {
            None
        } else {
            Some(VerifierConfig {
                interval: v.verify_interval,
                batch: v.verify_batch.get(),
                lease: VerifyLease {
                    margin: v.verify_lease_margin,
                    max_timeout: v.verify_timeout_max,
                },
                concurrency: v.verify_concurrency.get(),
                concurrency_per_producer: v.verify_concurrency_per_producer.get(),
                backoff: Backoff {
                    base: v.verify_backoff_base,
                    max: v.verify_backoff_max,
                },
                default_max_attempts: v.max_verify_attempts.get(),
                send_lease,
                shutdown_grace: self.shutdown_grace,
                statement_timeout: self.request_timeout,
            })
        };
        Ok(Settings {
            database_urls: self.database.database_urls.clone(),
            replica_urls: self.database.replica_urls.clone(),
            auto_migrate: self.auto_migrate,
            listen: self.listen,
            tls: match (&self.tls.tls_cert, &self.tls.tls_key) {
                (Some(cert), Some(key)) => Some(TlsFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                    poll: Some(self.tls.tls_reload_interval).filter(|d| !d.is_zero()),
                }),
                // clap refuses one without the other.
                _ => None,
            },
            auth: AuthConfig {
                admin_token: self.admin_token.clone(),
                insecure: self.insecure_no_auth,
            },
            max_payload_bytes: self.max_payload_bytes.get(),
            max_record_bytes: f.kafka_message_max_bytes.get(),
            max_concurrent_requests: self.max_concurrent_requests.get(),
            producer_defaults: ProducerDefaults {
                first_verify_after: v.first_verify_after,
                verify_timeout: v.verify_timeout,
                max_verify_timeout: v.verify_timeout_max,
                max_verify_attempts: v.max_verify_attempts.get(),
            },
            producer_cache_ttl: self.producer_cache_ttl,
            require_producer_topics: self.require_producer_topics,
            writes: WriteSettings {
                workers: self.write_workers,
                max_batch: self.write_batch,
                send_lease,
                deadline: self.request_timeout.saturating_mul(2),
                prepared_cache_bytes: self.prepared_cache_mib.saturating_mul(1 << 20),
            },
            request_timeout: self.request_timeout,
            address_policy: address_policy(v),
            forwarding,
            verifier,
            alert_webhook: self.alerts.alert_webhook.clone(),
            alert_signing_secret: self.alerts.alert_signing_secret.clone(),
            shutdown_grace: self.shutdown_grace,
            backlog_interval: self.backlog_interval,
            flow_interval: self.flow_interval,
            retention: Some(self.retention).filter(|d| !d.is_zero()),
            otlp: self.otlp()?,
            submit: self.submit()?,
            overdue: OverdueSettings {
                send_after: Some(self.alerts.alert_send_overdue_after).filter(|d| !d.is_zero()),
                verify_after: Some(self.alerts.alert_verify_overdue_after).filter(|d| !d.is_zero()),
            },
        })
    }

    /// `--otlp-endpoint`: an http or https URL without query or fragment.
    fn otlp(&self) -> Result<Option<crate::observability::trace::OtlpSettings>, ConfigError> {
        let t = &self.tracing;
        let Some(endpoint) = t.otlp_endpoint.clone() else {
            return Ok(None);
        };
        let url = endpoint.expose();
        if !matches!(url.scheme(), "http" | "https")
            || url.query().is_some()
            || url.fragment().is_some()
        {
            return Err(ConfigError(format!(
                "--otlp-endpoint {endpoint} must be the collector's OTLP/HTTP base URL, \
                 http or https without query or fragment (e.g. http://127.0.0.1:4318)"
            )));
        }
        if t.otlp_service_name.trim().is_empty() {
            return Err(ConfigError("--otlp-service-name must not be empty".into()));
        }
        Ok(Some(crate::observability::trace::OtlpSettings {
            endpoint,
            service_name: t.otlp_service_name.clone(),
            interval: t.otlp_export_interval,
        }))
    }

    /// A payload of the limit must make a record Kafka takes, or prepare
    /// would advertise a limit it can never honour; the range is librdkafka's.
    fn check_record_limit(&self) -> Result<(), ConfigError> {
        let limit = self.forwarder.kafka_message_max_bytes.get();
        if limit > 1_000_000_000 {
            return Err(ConfigError(format!(
                "--kafka-message-max-bytes ({limit}) must be at most 1000000000 (librdkafka's limit)"
            )));
        }
        let payload = self.max_payload_bytes.get();
        let record = record_size(
            None,
            payload,
            &Default::default(),
            &"b".repeat(MAX_BIZ_ID),
            &"k".repeat(MAX_MESSAGE_KEY),
            None,
            true,
        );
        if record > limit {
            return Err(ConfigError(format!(
                "--max-payload-bytes ({payload}) does not fit --kafka-message-max-bytes ({limit}): \
                 with trustmsg's own headers (trace context included) and the record framing its \
                 record is {record} bytes; \
                 lower --max-payload-bytes to at most {} or raise --kafka-message-max-bytes",
                payload - (record - limit)
            )));
        }
        Ok(())
    }

    /// `--submit-topic`: a valid topic name whose dead-letter topic is one
    /// too, and brokers to consume it from.
    fn submit(&self) -> Result<Option<crate::submit::SubmitSettings>, ConfigError> {
        let a = &self.submit;
        let Some(topic) = a.submit_topic.clone() else {
            return Ok(None);
        };
        let dead_letters = format!("{topic}{}", trustmsg_verify_api::submit::DLQ_SUFFIX);
        crate::api::validate::topic(&dead_letters).map_err(|e| {
            ConfigError(format!(
                "--submit-topic {topic:?}: its dead-letter topic {dead_letters:?}: {e}"
            ))
        })?;
        crate::api::validate::topic(&topic)
            .map_err(|e| ConfigError(format!("--submit-topic {topic:?}: {e}")))?;
        if a.submit_group.trim().is_empty() {
            return Err(ConfigError("--submit-group must not be empty".into()));
        }
        let f = &self.forwarder;
        let Some(brokers) = f.kafka_brokers.clone().filter(|b| !b.trim().is_empty()) else {
            return Err(ConfigError(format!(
                "--submit-topic {topic:?} needs --kafka-brokers: the records are consumed from Kafka"
            )));
        };
        let extra = crate::net::kafka_settings::settings(&f.kafka_config)
            .map_err(|e| ConfigError(e.to_string()))?;
        Ok(Some(crate::submit::SubmitSettings {
            topic,
            dead_letters,
            group: a.submit_group.clone(),
            brokers,
            extra,
            commit_wait: a.submit_commit_wait,
            batch: a.submit_batch.get(),
            kafka_timeout: f.kafka_message_timeout,
        }))
    }

    fn forwarding(&self) -> Result<Forwarding, ConfigError> {
        let f = &self.forwarder;
        let budget = self.payload_budget()?;
        let Some(brokers) = f.kafka_brokers.clone().filter(|b| !b.trim().is_empty()) else {
            return Ok(Forwarding::Off {
                why: "no --kafka-brokers: this instance sends nothing; committed messages wait for a forwarder",
            });
        };
        if f.no_forwarder {
            return Ok(Forwarding::Off {
                why: "--no-forwarder: this instance sends nothing",
            });
        }
        // Otherwise a second instance could claim and send a row whose first
        // send is still in flight.
        longer(
            ("--send-lease", f.send_lease),
            ("--kafka-message-timeout", f.kafka_message_timeout),
            "a claim could expire while its send is still in flight",
        )?;
        Ok(Forwarding::Kafka {
            kafka: KafkaSettings {
                brokers,
                extra: KafkaSettings::parse_extra(&f.kafka_config, f.kafka_message_max_bytes.get())
                    .map_err(|e| ConfigError(e.to_string()))?,
                message_timeout: f.kafka_message_timeout,
                message_max_bytes: f.kafka_message_max_bytes.get(),
                queue_max_bytes: budget,
            },
            config: ForwarderConfig {
                send_lease: f.send_lease,
                sweep_interval: f.sweep_interval,
                sweep_batch: f.sweep_batch.get(),
                backoff: Backoff {
                    base: f.send_backoff_base,
                    max: f.send_backoff_max,
                },
                max_send_attempts: f.max_send_attempts.get(),
                concurrency: f.send_concurrency.get(),
                shutdown_grace: self.shutdown_grace,
                statement_timeout: self.request_timeout,
                payload_budget: budget,
                max_payload_bytes: self.max_payload_bytes.get(),
            },
        })
    }

    /// `--payload-budget-mib` in bytes, refused when a record of the largest
    /// size would not fit it (it could then never be sent).
    fn payload_budget(&self) -> Result<usize, ConfigError> {
        let mib = self.forwarder.payload_budget_mib.get();
        let limit = self.forwarder.kafka_message_max_bytes.get();
        // librdkafka's queue.buffering.max.kbytes is an int of KiB.
        let most = (i32::MAX as u64) >> 10;
        if mib > most {
            return Err(ConfigError(format!(
                "--payload-budget-mib ({mib}) must be at most {most} (librdkafka's \
                 queue.buffering.max.kbytes limit)"
            )));
        }
        let bytes = usize::try_from(mib << 20).unwrap_or(usize::MAX);
        if bytes < limit {
            return Err(ConfigError(format!(
                "--payload-budget-mib ({mib} MiB = {bytes} bytes) must be at least \
                 --kafka-message-max-bytes ({limit}): a message of the largest size \
                 could never be sent"
            )));
        }
        Ok(bytes)
    }
}

/// `long` must be longer than `short`, or `why` happens.
fn longer(
    (long_flag, long): (&str, Duration),
    (short_flag, short): (&str, Duration),
    why: &str,
) -> Result<(), ConfigError> {
    if long > short {
        return Ok(());
    }
    Err(ConfigError(format!(
        "{long_flag} ({}) must be longer than {short_flag} ({}): otherwise {why}",
        humantime::format_duration(long),
        humantime::format_duration(short)
    )))
}

/// The address policy `--verify-allow-cidr`, `--verify-deny-cidr` and
/// `--verify-resolve` describe.
fn address_policy(args: &VerifierArgs) -> AddressPolicy {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), "Secret(***)");
        let args = ServeArgs::from_args([
            "--database-url",
            "mysql://u:db-pw%23@h/db",
            "--replica-url",
            "mysql://u:replica-pw@h/db",
            "--admin-token",
            "tok",
            "--kafka-brokers",
            "k:9093",
            "--kafka-config",
            "sasl.password=kafka-pw",
            "--alert-webhook",
            "https://u:webhook-pw@hooks.test/alerts",
            "--otlp-endpoint",
            "http://u:otlp-pw@collector.test:4318",
        ])
        .unwrap();
        let dump = format!("{args:?}");
        assert!(!dump.contains("-pw") && !dump.contains("tok\""), "{dump}");
        assert!(dump.contains("mysql://u:***@h/db"), "{dump}");
        let dump = format!("{:?}", args.settings().unwrap());
        assert!(
            !dump.contains("-pw") && dump.contains("sasl.password"),
            "{dump}"
        );
    }

    #[test]
    fn a_url_flag_that_cannot_be_used_is_refused_naming_the_flag_but_not_the_password() {
        for (flag, value) in [
            (
                "--database-url",
                "mysql://root:hunter2#swordfish@127.0.0.1:1/x",
            ),
            (
                "--database-url",
                "mysql//root:hunter2swordfish@127.0.0.1:1/x",
            ),
            (
                "--replica-url",
                "mysql://root:hunter2/swordfish@127.0.0.1:1/x",
            ),
            ("--alert-webhook", "https://u:hunter2?swordfish@hooks.test/"),
            (
                "--otlp-endpoint",
                "http://u:hunter2#swordfish@collector.test:4318",
            ),
            ("--kafka-brokers", "u:hunter2swordfish@k:9092"),
        ] {
            let mut args = vec!["--admin-token", "t", flag, value];
            if flag != "--database-url" {
                args.extend(["--database-url", "sqlite://x.db"]);
            }
            let err = ServeArgs::from_args(args).expect_err(value).to_string();
            assert!(
                !err.contains("hunter2") && !err.contains("swordfish"),
                "{flag}: {err}"
            );
            assert!(err.contains(flag), "{flag}: {err}");
        }
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

    fn parse(extra: &[&str]) -> Result<ServeArgs, clap::Error> {
        let mut args = vec!["--database-url", "sqlite://x.db", "--admin-token", "t"];
        args.extend_from_slice(extra);
        ServeArgs::from_args(args)
    }

    /// The first line of a refusal, which is all an operator sees.
    fn refusal(extra: &[&str]) -> String {
        match parse(extra) {
            Err(e) => e.to_string().lines().next().unwrap_or_default().to_string(),
            Ok(args) => args.settings().expect_err("refused").to_string(),
        }
    }

    #[test]
    fn zero_counts_are_refused_while_parsing_naming_the_flag() {
        for flag in [
            "--write-workers",
            "--write-batch",
            "--max-payload-bytes",
            "--max-concurrent-requests",
            "--sweep-batch",
            "--max-send-attempts",
            "--send-concurrency",
            "--max-verify-attempts",
            "--verify-batch",
            "--verify-concurrency",
            "--verify-concurrency-per-producer",
        ] {
            let why = refusal(&[flag, "0"]);
            assert!(
                why.contains(flag) && why.contains("at least 1"),
                "{flag}: {why}"
            );
            assert!(parse(&[flag, "1"]).is_ok(), "{flag} 1 is fine");
        }
    }

    #[test]
    fn zero_intervals_timeouts_and_leases_are_refused_while_parsing_naming_the_flag() {
        for flag in [
            "--sweep-interval",
            "--verify-interval",
            "--kafka-message-timeout",
            "--send-lease",
            "--verify-timeout",
            "--send-backoff-base",
            "--send-backoff-max",
            "--verify-backoff-base",
            "--verify-backoff-max",
            "--request-timeout",
        ] {
            let why = refusal(&[flag, "0s"]);
            assert!(
                why.contains(flag) && why.contains("longer than 0"),
                "{flag}: {why}"
            );
        }
        for flag in [
            "--send-backoff-base",
            "--send-backoff-max",
            "--verify-backoff-base",
            "--verify-backoff-max",
        ] {
            let why = refusal(&[flag, "1000000000y"]);
            assert!(
                why.contains(flag) && why.contains("at most 30days"),
                "{flag}: {why}"
            );
            assert!(parse(&[flag, "30d"]).is_ok(), "{flag} 30d is fine");
        }
        // A first check at once and no grace period are meaningful.
        assert!(parse(&["--first-verify-after", "0s", "--shutdown-grace", "0s"]).is_ok());
    }

    #[test]
    fn a_lease_not_longer_than_what_it_covers_is_refused_naming_both_flags() {
        let why = refusal(&[
            "--kafka-brokers",
            "127.0.0.1:9",
            "--kafka-message-timeout",
            "30s",
            "--send-lease",
            "30s",
        ]);
        assert!(
            why.contains("--send-lease (30s) must be longer than --kafka-message-timeout (30s)"),
            "{why}"
        );
        // Without a forwarder in this instance the send lease covers no send here.
        let api_only = parse(&["--send-lease", "100ms"]).unwrap();
        assert!(api_only.settings().is_ok());

        let why = refusal(&["--verify-timeout", "10s", "--verify-timeout-max", "5s"]);
        assert!(
            why.contains(
                "--verify-timeout (10s) must not be longer than --verify-timeout-max (5s)"
            ),
            "{why}"
        );
    }

    #[test]
    fn a_check_back_claim_covers_its_call_plus_the_margin_and_by_default_ends_within_ten_seconds_of_it(
    ) {
        let settings = |args: &[&str]| parse(args).unwrap().settings().unwrap();
        let default = settings(&[]).verifier.expect("verifier on");
        assert_eq!(
            default.lease,
            VerifyLease {
                margin: Duration::from_secs(5),
                max_timeout: Duration::from_secs(120),
            }
        );
        // The goal: after a crash, another instance checks a row again
        // within its producer's timeout + 10 s. The claim ends the margin
        // after the call could, and the next round comes an interval later.
        assert!(
            default.lease.margin + default.interval <= Duration::from_secs(10),
            "margin {:?} + interval {:?}",
            default.lease.margin,
            default.interval
        );
        let two_seconds = default.lease.covering(Some(2_000));
        assert_eq!(two_seconds, Duration::from_secs(7));
        // A registration made under a higher cap is covered up to the cap; an
        // unregistered producer for the cap.
        let capped = settings(&["--verify-timeout-max", "3s", "--verify-timeout", "1s"])
            .verifier
            .unwrap()
            .lease;
        assert_eq!(capped.covering(Some(60_000)), Duration::from_secs(8));
        assert_eq!(capped.covering(None), Duration::from_secs(8));
        let custom = settings(&["--verify-lease-margin", "2s"]).verifier.unwrap();
        assert_eq!(custom.lease.margin, Duration::from_secs(2));
    }

    #[test]
    fn a_lease_margin_under_a_second_is_refused_while_parsing() {
        for short in ["0s", "999ms"] {
            let why = refusal(&["--verify-lease-margin", short]);
            assert!(
                why.contains("--verify-lease-margin") && why.contains("at least 1s"),
                "{short}: {why}"
            );
        }
        assert!(parse(&["--verify-lease-margin", "1s"]).is_ok());
    }

    #[test]
    fn a_payload_limit_whose_record_would_not_fit_kafka_is_refused_naming_both_flags() {
        let why = refusal(&["--max-payload-bytes", "1048576"]);
        assert!(
            why.contains(
                "--max-payload-bytes (1048576) does not fit --kafka-message-max-bytes (1000000)"
            ),
            "{why}"
        );
        let fits = why
            .split("at most ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .expect("the refusal names the largest payload that fits");
        assert!(parse(&["--max-payload-bytes", fits])
            .unwrap()
            .settings()
            .is_ok());
        let next = (fits.parse::<usize>().unwrap() + 1).to_string();
        assert!(parse(&["--max-payload-bytes", &next])
            .unwrap()
            .settings()
            .is_err());
        assert!(parse(&[
            "--max-payload-bytes",
            "1048576",
            "--kafka-message-max-bytes",
            "1100000"
        ])
        .unwrap()
        .settings()
        .is_ok());
        // The defaults agree with each other.
        let s = parse(&[]).unwrap().settings().unwrap();
        assert_eq!(
            (s.max_payload_bytes, s.max_record_bytes),
            (960_000, 1_000_000)
        );
    }

    #[test]
    fn the_record_limit_reaches_librdkafka_and_a_disagreeing_override_is_refused() {
        let s = parse(&[
            "--kafka-brokers",
            "k:9092",
            "--kafka-message-max-bytes",
            "2000000",
        ])
        .unwrap()
        .settings()
        .unwrap();
        let Forwarding::Kafka { kafka, .. } = &s.forwarding else {
            panic!("forwarding on: {:?}", s.forwarding);
        };
        assert_eq!(kafka.message_max_bytes, 2_000_000);
        assert_eq!(s.max_record_bytes, 2_000_000);
        let why = refusal(&[
            "--kafka-brokers",
            "k:9092",
            "--kafka-config",
            "message.max.bytes=2000000",
        ]);
        assert!(why.contains("--kafka-message-max-bytes (1000000)"), "{why}");
    }

    #[test]
    fn the_payload_budget_bounds_librdkafkas_queue_and_must_hold_the_largest_record() {
        let s = parse(&["--kafka-brokers", "k:9092"])
            .unwrap()
            .settings()
            .unwrap();
        let Forwarding::Kafka { kafka, config } = &s.forwarding else {
            panic!("forwarding on: {:?}", s.forwarding);
        };
        assert_eq!(config.payload_budget, 128 << 20);
        assert_eq!(kafka.queue_max_bytes, 128 << 20);
        assert_eq!(
            refusal(&[
                "--kafka-brokers",
                "k:9092",
                "--kafka-message-max-bytes",
                "3000000",
                "--payload-budget-mib",
                "2",
            ]),
            "--payload-budget-mib (2 MiB = 2097152 bytes) must be at least \
             --kafka-message-max-bytes (3000000): a message of the largest size could never be sent"
        );
        // Refused whether or not this instance forwards: the flags are wrong.
        assert!(refusal(&["--payload-budget-mib", "0"]).contains("--payload-budget-mib"));
        let why = refusal(&[
            "--kafka-brokers",
            "k:9092",
            "--kafka-config",
            "queue.buffering.max.kbytes=1048576",
        ]);
        assert!(why.contains("--payload-budget-mib"), "{why}");
    }

    #[test]
    fn requests_are_answered_within_five_seconds_by_default() {
        let s = parse(&[]).unwrap().settings().unwrap();
        assert_eq!(s.request_timeout, Duration::from_secs(5));
        let s = parse(&["--request-timeout", "750ms"])
            .unwrap()
            .settings()
            .unwrap();
        assert_eq!(s.request_timeout, Duration::from_millis(750));
    }

    #[test]
    fn no_admin_token_is_refused_unless_insecure() {
        let args = ServeArgs::from_args(["--database-url", "sqlite://x.db"]).unwrap();
        assert!(args
            .settings()
            .unwrap_err()
            .to_string()
            .contains("--admin-token"));
        let args = ServeArgs::from_args(["--database-url", "sqlite://x.db", "--insecure-no-auth"])
            .unwrap();
        assert!(args.settings().is_ok());
    }

    #[test]
    fn settings_carry_the_flags_to_each_component() {
        let s = parse(&[
            "--kafka-brokers",
            "k:9092",
            "--kafka-config",
            "linger.ms=1",
            "--write-workers",
            "3",
            "--verify-batch",
            "7",
            "--verify-backoff-base",
            "1s",
            "--verify-backoff-max",
            "9s",
            "--send-lease",
            "45s",
        ])
        .unwrap()
        .settings()
        .unwrap();
        let Forwarding::Kafka { kafka, config } = &s.forwarding else {
            panic!("forwarding on: {:?}", s.forwarding);
        };
        assert_eq!(kafka.brokers, "k:9092");
        assert_eq!(kafka.extra, vec![("linger.ms".into(), "1".into())]);
        assert_eq!(config.send_lease, Duration::from_secs(45));
        let v = s.verifier.expect("verifier on");
        assert_eq!(v.batch, 7);
        assert_eq!(v.send_lease, Duration::from_secs(45));
        assert_eq!(
            v.backoff,
            Backoff {
                base: Duration::from_secs(1),
                max: Duration::from_secs(9)
            }
        );
        assert_eq!(s.writes.workers.get(), 3);
        let off = parse(&[]).unwrap().settings().unwrap();
        assert!(matches!(off.forwarding, Forwarding::Off { .. }));
        assert_eq!(
            (off.writes.send_lease, off.verifier.map(|v| v.send_lease)),
            (Duration::ZERO, Some(Duration::ZERO)),
            "without a forwarder a commit claims nothing: it is due at once"
        );
    }

    #[test]
    fn resolve_overrides_go_through_the_policy() {
        let s = parse(&[
            "--verify-resolve",
            "canary.test=127.0.0.2,ok.test=127.0.0.1",
            "--verify-deny-cidr",
            "127.0.0.2/32",
        ])
        .unwrap()
        .settings()
        .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            assert!(s
                .address_policy
                .resolve_allowed("canary.test")
                .await
                .is_err());
            assert_eq!(
                s.address_policy.resolve_allowed("ok.test").await,
                Ok(vec!["127.0.0.1".parse().unwrap()])
            );
        });
    }
}
