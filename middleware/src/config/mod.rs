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
//!
//! One file per group of flags (`#[command(flatten)]`), each with the rules
//! that relate its own flags: `database`, `tls`, `forwarder` (Kafka and the
//! forwarder), `verifier` (check-back and the address policy), `alerts`,
//! `otlp` (trustmsg's own spans), `submit` (the Kafka way in), `outbox`
//! (the producers' own outbox tables); `parse` holds
//! the value parsers they share. This file holds `serve`'s own flags and
//! [`ServeArgs::settings`], which joins the groups into [`Settings`].

mod alerts;
mod database;
mod forwarder;
mod otlp;
mod outbox;
mod parse;
mod submit;
#[cfg(test)]
mod tests;
mod tls;
mod verifier;

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::time::Duration;

use clap::{Args, Parser};

use crate::backoff::Backoff;
use crate::group_commit::producer_writes::WriteSettings;
use crate::net::address_policy::AddressPolicy;
pub use crate::net::secret::{quiet, quiet_with, Quiet, RedactedUrl, Secret};
use crate::net::server_tls::TlsFiles;
use crate::store::DatabaseUrl;
use crate::store::VerifyLease;
use crate::verifier::VerifierConfig;
use crate::workers::overdue::OverdueSettings;

use alerts::check_signing_secret;
use parse::{at_least_one, duration, flow_interval, positive_duration};
use verifier::address_policy;

pub use alerts::AlertArgs;
pub use database::DatabaseArgs;
pub use forwarder::ForwarderArgs;
pub(crate) use forwarder::Forwarding;
pub use otlp::TracingArgs;
pub use outbox::{OutboxArgs, OutboxSource};
pub use submit::SubmitArgs;
pub use tls::TlsArgs;
pub use verifier::{ResolveOverride, VerifierArgs};

/// A bad combination of flags, refused at start-up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

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
    /// history) unchanged for longer than this. A week by default, as long
    /// as an operator is likely to look back; 0 keeps everything, and the
    /// tables then grow without bound (the start-up log warns).
    #[arg(long, env = "TRUSTMSG_RETENTION", default_value = "7d", value_parser = duration)]
    pub retention: Duration,

    /// Where retention writes finished messages (with their audit trail,
    /// check-back calls and ledger rows) before it deletes them, as gzip'd
    /// JSON Lines: `file:///dir`, `s3://bucket/prefix`, `gs://bucket/prefix`
    /// or `az://container/prefix`, credentials and endpoint from the cloud's
    /// usual environment variables (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT_URL`,
    /// `AWS_ALLOW_HTTP`, …). A batch is deleted only once its object is
    /// written and read back; while the archive fails nothing is deleted
    /// (one `archive_failed` alert). Needs `--retention`; MySQL/MariaDB or
    /// PostgreSQL. See docs/operations.md, "Archive".
    #[arg(long, env = "TRUSTMSG_ARCHIVE")]
    pub archive: Option<String>,
    /// How long one time partition takes new messages (MySQL/MariaDB and
    /// PostgreSQL): the messages of a period, with their audit, check-back,
    /// ledger and content rows, are dropped together once all of them are
    /// past --retention. About retention / period partitions are kept, plus
    /// two made ahead.
    #[arg(long, env = "TRUSTMSG_PARTITION_PERIOD", default_value = "1d", value_parser = positive_duration)]
    pub partition_period: Duration,

    /// How often the backlog gauges of `/metrics` are read from the database.
    #[arg(long, env = "TRUSTMSG_BACKLOG_INTERVAL", default_value = "15s", value_parser = positive_duration)]
    pub backlog_interval: Duration,

    /// How often the large tables' sizes and the oldest message's age
    /// (`trustmsg_table_rows`, `trustmsg_table_bytes`,
    /// `trustmsg_oldest_message_age_seconds`) are read from the database's
    /// catalog: slower than the backlog, since MySQL's `information_schema`
    /// can be slow on a server with many tables.
    #[arg(long, env = "TRUSTMSG_TABLE_SIZE_INTERVAL", default_value = "60s", value_parser = positive_duration)]
    pub table_size_interval: Duration,

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

    /// The local message table way: the producers' own outbox tables.
    #[command(flatten)]
    pub outbox: OutboxArgs,
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
    /// How often the tables' sizes are read.
    pub(crate) table_size_interval: Duration,
    /// How often the flow counts are added to the database.
    pub(crate) flow_interval: Duration,
    /// How long finished messages are kept; None: forever.
    pub(crate) retention: Option<Duration>,
    /// Where retention archives what it deletes, if anywhere.
    pub(crate) archive: Option<crate::archive::Archive>,
    /// How long one time partition takes new messages.
    pub(crate) partition_period: Duration,
    /// Where spans are exported, if anywhere.
    pub(crate) otlp: Option<crate::observability::trace::OtlpSettings>,
    /// The Kafka way in, if on.
    pub(crate) submit: Option<crate::submit::SubmitSettings>,
    /// The producers' outbox tables relayed, if any.
    pub(crate) outbox: Option<crate::outbox::OutboxSettings>,
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
        // The exactly-once forwarder claims under its own name, not through
        // commits: its commits are due at once, as without a forwarder.
        let send_lease = match &forwarding {
            Forwarding::Kafka { config, .. } if config.exactly_once.is_none() => f.send_lease,
            Forwarding::Kafka { .. } | Forwarding::Off { .. } => Duration::ZERO,
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
            table_size_interval: self.table_size_interval,
            flow_interval: self.flow_interval,
            retention: Some(self.retention).filter(|d| !d.is_zero()),
            archive: self.archive()?,
            partition_period: self.partition_period,
            otlp: self.otlp()?,
            submit: self.submit()?,
            outbox: self.outbox()?,
            overdue: OverdueSettings {
                send_after: Some(self.alerts.alert_send_overdue_after).filter(|d| !d.is_zero()),
                verify_after: Some(self.alerts.alert_verify_overdue_after).filter(|d| !d.is_zero()),
            },
        })
    }
}

impl ServeArgs {
    /// `--archive`, opened: it needs retention (it keeps what retention
    /// deletes) and a database server (SQLite keeps deleting, unarchived).
    fn archive(&self) -> Result<Option<crate::archive::Archive>, ConfigError> {
        let Some(url) = &self.archive else {
            return Ok(None);
        };
        if self.retention.is_zero() {
            return Err(ConfigError(
                "--archive needs --retention: the archive keeps what retention deletes, \
                 and without --retention nothing is deleted"
                    .into(),
            ));
        }
        if self
            .database
            .database_urls
            .iter()
            .any(|u| u.backend() == crate::store::Backend::Sqlite)
        {
            return Err(ConfigError(
                "--archive needs MySQL/MariaDB or PostgreSQL (--database-url); with SQLite \
                 retention deletes without an archive"
                    .into(),
            ));
        }
        crate::archive::Archive::open(url)
            .map(Some)
            .map_err(|e| ConfigError(format!("--archive: {e}")))
    }
}

/// Who may do what.
#[derive(Debug, Clone)]
pub(crate) struct AuthConfig {
    /// The admin token; None disables the admin API (unless insecure).
    pub(crate) admin_token: Option<Secret>,
    /// Accept everything (`--insecure-no-auth`).
    pub(crate) insecure: bool,
}

/// Defaults a producer registration falls back to.
#[derive(Debug, Clone)]
pub(crate) struct ProducerDefaults {
    /// Delay after prepare before the first check-back.
    pub(crate) first_verify_after: Duration,
    /// Timeout of one check-back call.
    pub(crate) verify_timeout: Duration,
    /// The longest timeout a registration may set (`--verify-timeout-max`).
    pub(crate) max_verify_timeout: Duration,
    /// Check-back attempts before VERIFY_FAILED.
    pub(crate) max_verify_attempts: u32,
}
