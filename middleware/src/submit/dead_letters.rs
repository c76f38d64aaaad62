//! The dead-letter topic (`<submit topic>.dlq`): a record that cannot be
//! applied is produced there as it came (key, value, headers) plus
//! `trustmsg-error-code` and `trustmsg-error`, idempotently with acks=all,
//! and its offset is committed only once the broker has it.

use std::time::Duration;

use anyhow::Context;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use trustmsg_verify_api::submit;

use super::SubmitSettings;

/// A record to dead-letter, and why.
#[derive(Debug, Clone)]
pub(crate) struct DeadLetter {
    pub(crate) key: Option<Vec<u8>>,
    pub(crate) headers: Vec<(String, Option<Vec<u8>>)>,
    pub(crate) value: Vec<u8>,
    /// The HTTP API's error code.
    pub(crate) code: &'static str,
    /// What went wrong, for a person.
    pub(crate) error: String,
}

/// The producer of dead letters.
pub(crate) struct DeadLetters {
    producer: FutureProducer,
    topic: String,
    timeout: Duration,
}

impl DeadLetters {
    pub(crate) fn new(s: &SubmitSettings) -> anyhow::Result<Self> {
        let producer = s
            .client_config()
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set(
                "message.timeout.ms",
                s.kafka_timeout.as_millis().to_string(),
            )
            .create()
            .context("invalid Kafka producer configuration for the dead-letter topic")?;
        Ok(Self {
            producer,
            topic: s.dead_letters.clone(),
            timeout: s.kafka_timeout,
        })
    }

    /// Produces `d` and waits for the broker's acknowledgement. A record too
    /// large for the topic once the error headers are added goes without its
    /// value (the error says so) rather than never.
    pub(crate) async fn send(&self, d: &DeadLetter) -> Result<(), KafkaError> {
        match self.produce(d, Some(&d.value), "").await {
            Err(KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge)) => {
                let note = " (its value was left out: with these headers it was too large for the dead-letter topic)";
                self.produce(d, None, note).await
            }
            other => other,
        }
    }

    async fn produce(
        &self,
        d: &DeadLetter,
        value: Option<&Vec<u8>>,
        note: &str,
    ) -> Result<(), KafkaError> {
        let error = format!("{}{note}", d.error);
        let mut headers = OwnedHeaders::new_with_capacity(d.headers.len() + 2);
        for (name, value) in &d.headers {
            headers = headers.insert(Header {
                key: name,
                value: value.as_deref(),
            });
        }
        headers = headers
            .insert(Header {
                key: submit::ERROR_CODE,
                value: Some(d.code),
            })
            .insert(Header {
                key: submit::ERROR,
                value: Some(&error),
            });
        let mut record = FutureRecord::<Vec<u8>, Vec<u8>>::to(&self.topic).headers(headers);
        if let Some(key) = &d.key {
            record = record.key(key);
        }
        if let Some(value) = value {
            record = record.payload(value);
        }
        self.producer
            .send(record, self.timeout)
            .await
            .map(drop)
            .map_err(|(e, _)| e)?;
        metrics::counter!("trustmsg_submit_dead_letters_total", "code" => d.code).increment(1);
        tracing::warn!(
            code = d.code,
            error = %error,
            topic = %self.topic,
            "a submitted record could not be applied; it is on the dead-letter topic"
        );
        Ok(())
    }
}
