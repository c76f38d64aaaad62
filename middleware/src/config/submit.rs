//! `--submit-topic` and its group: the Kafka way in.

use std::num::NonZeroUsize;
use std::time::Duration;

use clap::Args;

use super::parse::{at_least_one, positive_duration};
use super::{ConfigError, ServeArgs};

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

impl ServeArgs {
    /// `--submit-topic`: a valid topic name whose dead-letter topic is one
    /// too, and brokers to consume it from.
    pub(super) fn submit(&self) -> Result<Option<crate::submit::SubmitSettings>, ConfigError> {
        let a = &self.submit;
        let Some(topic) = a.submit_topic.clone() else {
            return Ok(None);
        };
        let dead_letters = format!("{topic}{}", trustmsg_verify_api::submit::DLQ_SUFFIX);
        crate::intake::validate::topic(&dead_letters).map_err(|e| {
            ConfigError(format!(
                "--submit-topic {topic:?}: its dead-letter topic {dead_letters:?}: {e}"
            ))
        })?;
        crate::intake::validate::topic(&topic)
            .map_err(|e| ConfigError(format!("--submit-topic {topic:?}: {e}")))?;
        if a.submit_group.trim().is_empty() {
            return Err(ConfigError("--submit-group must not be empty".into()));
        }
        let f = &self.forwarder;
        let Some(brokers) = f.brokers() else {
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
}
