//! `trustmsg tail`: print the records of a Kafka topic as they arrive: where
//! each sits, its key, its headers and its payload (as text when it is text).
//! It reads every partition without joining a consumer group and commits no
//! offsets, so it never disturbs the topic's real consumers. Works against
//! any Kafka, not only `trustmsg dev`.

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{json, Map, Value};
use trustmsg::net::kafka_settings::{self, KafkaConfigArg};

/// `trustmsg tail` flags.
#[derive(Debug, clap::Args)]
pub(crate) struct TailArgs {
    /// Kafka bootstrap servers, `host:port,…` (credentials go in
    /// `--kafka-config`).
    #[arg(long, env = "TRUSTMSG_BROKERS", hide_env_values = true, value_parser = trustmsg::config::quiet_with(kafka_settings::brokers))]
    pub(crate) brokers: String,

    /// The topic to print.
    #[arg(long)]
    pub(crate) topic: String,

    /// Print what the topic already holds too, not only new records.
    #[arg(long)]
    pub(crate) from_beginning: bool,

    /// Stop after this many records.
    #[arg(long)]
    pub(crate) count: Option<u64>,

    /// One JSON object per line instead of text (binary values as `…_base64`).
    #[arg(long)]
    pub(crate) json: bool,

    /// A librdkafka setting `KEY=VALUE` (repeatable), e.g. for SASL or TLS,
    /// or `@FILE` of such lines (keeps a password out of `ps`); the same as
    /// `trustmsg serve --kafka-config`.
    #[arg(
        long = "kafka-config",
        value_name = "KEY=VALUE|@FILE",
        env = "TRUSTMSG_KAFKA_CONFIG",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub(crate) kafka_config: Vec<KafkaConfigArg>,
}

/// Reads until `--count` records were printed, or forever.
pub(crate) async fn run(args: TailArgs) -> anyhow::Result<()> {
    tokio::task::spawn_blocking(move || tail(&args))
        .await
        .context("the tail thread")?
}

fn tail(args: &TailArgs) -> anyhow::Result<()> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &args.brokers)
        // Required by librdkafka for a consumer; no group is joined (assign,
        // not subscribe) and no offset is committed.
        .set("group.id", "trustmsg-tail")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("allow.auto.create.topics", "false");
    for (k, v) in kafka_settings::settings(&args.kafka_config)? {
        config.set(k, v);
    }
    let consumer: BaseConsumer = config.create().context("creating the Kafka consumer")?;
    let topic = &args.topic;

    // A topic that does not exist yet is waited for; everything written to it
    // once it exists is new, so it is read from its beginning.
    let mut from_beginning = args.from_beginning;
    let mut said_waiting = false;
    let partitions = loop {
        let md = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .with_context(|| format!("reading the metadata of {topic} from {}", args.brokers))?;
        let n = md
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .map_or(0, |t| t.partitions().len());
        if n > 0 {
            break n;
        }
        if !said_waiting {
            eprintln!("waiting for topic {topic} to exist…");
            said_waiting = true;
        }
        from_beginning = true;
        std::thread::sleep(Duration::from_millis(500));
    };
    // "From the end" is the end now, read before assigning: left to the
    // fetcher, it would be wherever the end is when fetching starts.
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions as i32 {
        let start = if from_beginning {
            Offset::Beginning
        } else {
            let (_, high) = consumer
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .with_context(|| format!("reading the end of {topic}/{p}"))?;
            Offset::Offset(high)
        };
        tpl.add_partition_offset(topic, p, start)?;
    }
    consumer.assign(&tpl)?;
    eprintln!(
        "reading {topic} ({partitions} partition(s)) from the {}",
        if from_beginning { "beginning" } else { "end" }
    );

    let mut printed = 0u64;
    let stdout = std::io::stdout();
    while args.count.is_none_or(|n| printed < n) {
        match consumer.poll(Duration::from_millis(500)) {
            None => {}
            Some(Err(e)) => eprintln!("kafka: {e}"),
            Some(Ok(m)) => {
                let text = if args.json {
                    as_json(&m).to_string()
                } else {
                    as_text(&m)
                };
                let mut out = stdout.lock();
                writeln!(out, "{text}")?;
                out.flush()?;
                printed += 1;
            }
        }
    }
    Ok(())
}

/// The bytes as text when they are UTF-8 without control characters other
/// than tab and line breaks; None when they are better shown as base64.
fn text(bytes: &[u8]) -> Option<&str> {
    std::str::from_utf8(bytes).ok().filter(|s| {
        !s.chars()
            .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    })
}

/// `"text"` (quoted, escaped) or `base64:…` for a key or header value.
fn shown(bytes: Option<&[u8]>) -> String {
    match bytes {
        None => "(null)".into(),
        Some(b) => match text(b) {
            Some(s) => format!("{s:?}"),
            None => format!("base64:{}", STANDARD.encode(b)),
        },
    }
}

fn timestamp(m: &BorrowedMessage<'_>) -> String {
    m.timestamp()
        .to_millis()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| "-".into())
}

/// ```text
/// orders/2@0 2026-11-23T07:01:02.123Z key "42"
///   trustmsg-message-id: "17"
///   {"total":42}
/// ```
fn as_text(m: &BorrowedMessage<'_>) -> String {
    let mut s = format!(
        "{}/{}@{} {} key {}",
        m.topic(),
        m.partition(),
        m.offset(),
        timestamp(m),
        shown(m.key())
    );
    if let Some(headers) = m.headers() {
        for h in headers.iter() {
            s.push_str(&format!("\n  {}: {}", h.key, shown(h.value)));
        }
    }
    let payload = match m.payload() {
        None => "(null payload)".to_string(),
        Some(p) => match text(p) {
            Some(t) => t.replace('\n', "\n  "),
            None => format!("({} bytes) base64:{}", p.len(), STANDARD.encode(p)),
        },
    };
    s.push_str("\n  ");
    s.push_str(&payload);
    s
}

/// Puts `bytes` under `name` when text, under `name_base64` when not, and
/// `name: null` when absent.
fn put(obj: &mut Map<String, Value>, name: &str, bytes: Option<&[u8]>) {
    match bytes {
        None => {
            obj.insert(name.into(), Value::Null);
        }
        Some(b) => match text(b) {
            Some(t) => {
                obj.insert(name.into(), t.into());
            }
            None => {
                obj.insert(format!("{name}_base64"), STANDARD.encode(b).into());
            }
        },
    }
}

fn as_json(m: &BorrowedMessage<'_>) -> Value {
    let mut obj = Map::new();
    obj.insert("topic".into(), m.topic().into());
    obj.insert("partition".into(), m.partition().into());
    obj.insert("offset".into(), m.offset().into());
    obj.insert("timestamp_ms".into(), json!(m.timestamp().to_millis()));
    put(&mut obj, "key", m.key());
    let headers: Vec<Value> = m
        .headers()
        .map(|hs| {
            hs.iter()
                .map(|h| {
                    let mut o = Map::new();
                    o.insert("name".into(), h.key.into());
                    put(&mut o, "value", h.value);
                    Value::Object(o)
                })
                .collect()
        })
        .unwrap_or_default();
    obj.insert("headers".into(), headers.into());
    put(&mut obj, "payload", m.payload());
    Value::Object(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_printable_utf8_and_anything_else_is_base64() {
        assert_eq!(text(b"{\"a\":1}\n"), Some("{\"a\":1}\n"));
        assert_eq!(text(b"\xff\x00"), None);
        assert_eq!(text(b"bell\x07"), None);
        assert_eq!(shown(Some(b"42")), "\"42\"");
        assert_eq!(shown(Some(&[0, 1])), "base64:AAE=");
        assert_eq!(shown(None), "(null)");
    }
}
