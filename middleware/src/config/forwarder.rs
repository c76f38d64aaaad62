//! `--kafka-brokers` and the forwarder's flags, and the rules that relate
//! them: a record of the largest payload must fit Kafka and the payload
//! budget, and a send claim must outlive the send it covers.

use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};
use std::time::Duration;

use clap::Args;

use super::parse::{at_least_one, backoff_duration, positive_duration};
use super::{ConfigError, ServeArgs};
use crate::backoff::Backoff;
use crate::forwarder::exactly_once::ExactlyOnceConfig;
use crate::forwarder::kafka::KafkaSettings;
use crate::forwarder::ForwarderConfig;
use crate::handoff::record::record_size;
use crate::intake::validate::{MAX_BIZ_ID, MAX_MESSAGE_KEY};
use crate::net::kafka_settings::KafkaConfigArg;
use crate::net::secret::quiet_with;
use crate::store::SendOwner;

/// The host's name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`).
fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
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

    /// Send in Kafka transactions named by `--instance-id`, with a progress
    /// record each, so that a `read_committed` consumer sees every message
    /// once, across crashes and zombies, and a restarted instance takes its
    /// sends back at once instead of after `--send-lease`
    /// (docs/architecture.md, "Exactly once into Kafka"). Every forwarding
    /// instance of a database must run it or none.
    #[arg(long, env = "TRUSTMSG_EXACTLY_ONCE")]
    pub exactly_once: bool,

    /// This instance's name in the exactly-once mode: its Kafka
    /// `transactional.id` and the owner written on its claims. Unique per
    /// instance and the same across its restarts (a StatefulSet's pod
    /// name); letters, digits, `.`, `_`, `-`. Default: the host's name.
    #[arg(long, env = "TRUSTMSG_INSTANCE_ID")]
    pub instance_id: Option<String>,

    /// The compacted topic of the exactly-once mode's progress records
    /// (created, compacted, if missing).
    #[arg(
        long,
        env = "TRUSTMSG_PROGRESS_TOPIC",
        default_value = "trustmsg.progress"
    )]
    pub progress_topic: String,
}

impl ForwarderArgs {
    /// `--kafka-brokers`, unless it is missing or blank (then nothing is
    /// sent or consumed here).
    pub(super) fn brokers(&self) -> Option<String> {
        self.kafka_brokers.clone().filter(|b| !b.trim().is_empty())
    }
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
    /// A payload of the limit must make a record Kafka takes, or prepare
    /// would advertise a limit it can never honour; the range is librdkafka's.
    pub(super) fn check_record_limit(&self) -> Result<(), ConfigError> {
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

    pub(super) fn forwarding(&self) -> Result<Forwarding, ConfigError> {
        let f = &self.forwarder;
        let budget = self.payload_budget()?;
        let Some(brokers) = f.brokers() else {
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
                exactly_once: self.exactly_once()?,
            },
        })
    }

    /// The exactly-once mode's settings, when it is asked for.
    fn exactly_once(&self) -> Result<Option<Box<ExactlyOnceConfig>>, ConfigError> {
        let f = &self.forwarder;
        if !f.exactly_once {
            return Ok(None);
        }
        let name = match &f.instance_id {
            Some(name) => name.clone(),
            None => hostname().ok_or_else(|| {
                ConfigError(
                    "--exactly-once needs --instance-id: the host's name could not be read"
                        .to_string(),
                )
            })?,
        };
        let owner =
            SendOwner::new(&name).map_err(|why| ConfigError(format!("--instance-id: {why}")))?;
        let topic = f.progress_topic.trim();
        if topic.is_empty() {
            return Err(ConfigError(
                "--progress-topic must not be empty".to_string(),
            ));
        }
        Ok(Some(Box::new(ExactlyOnceConfig {
            owner,
            progress_topic: topic.to_string(),
        })))
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
