//! The Kafka way in, for tests: records signed as a producer signs them
//! (with the contract's own `trustmsg_verify_api::submit`), unsigned or
//! malformed ones, and a reader that keeps every record of a topic (the
//! dead-letter topic's records carry no `trustmsg-message-id`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Message as _, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use trustmsg_verify_api::submit::{self, Op, Signed};

/// One record's headers as they go on the wire (None: a null value).
pub type RawHeaders = Vec<(String, Option<Vec<u8>>)>;

/// A producer of submitted records for one biz_id.
pub struct Submitter {
    producer: FutureProducer,
    topic: String,
    biz_id: String,
    secret: String,
}

/// What one signed record asks for.
#[derive(Debug, Clone, Default)]
pub struct Submission<'a> {
    /// A prepare's target topic.
    pub topic: &'a str,
    /// A prepare's target record key.
    pub key: Option<&'a str>,
    /// Other headers (signed as `name=value`).
    pub headers: &'a [(&'a str, &'a str)],
    /// The payload.
    pub value: &'a [u8],
    /// The submit topic's partition to produce to (None: by the record key).
    pub partition: Option<i32>,
}

impl Submitter {
    /// Produces to `topic` of `bootstrap`, signing for `biz_id` with `secret`.
    pub fn new(bootstrap: &str, topic: &str, biz_id: &str, secret: &str) -> Self {
        let producer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "1")
            .create()
            .expect("a producer");
        Self {
            producer,
            topic: topic.to_string(),
            biz_id: biz_id.to_string(),
            secret: secret.to_string(),
        }
    }

    /// The same, signing as another producer, or with another secret.
    pub fn with_identity(&self, biz_id: &str, secret: &str) -> Self {
        Self {
            producer: self.producer.clone(),
            topic: self.topic.clone(),
            biz_id: biz_id.to_string(),
            secret: secret.to_string(),
        }
    }

    /// The headers of a signed record: the contract's, the others, and
    /// `trustmsg-signature`.
    pub fn signed_headers(&self, op: Op, message_key: &str, s: &Submission<'_>) -> RawHeaders {
        let others: BTreeMap<String, String> = s
            .headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        let signature = submit::sign(
            &self.secret,
            &Signed {
                op,
                biz_id: &self.biz_id,
                message_key,
                topic: s.topic,
                key: s.key,
                headers: &others,
                value: s.value,
            },
        )
        .expect("signable");
        let mut h: RawHeaders = vec![
            (submit::OP.into(), Some(op.as_str().into())),
            (submit::BIZ_ID.into(), Some(self.biz_id.clone().into())),
            (submit::MESSAGE_KEY.into(), Some(message_key.into())),
        ];
        if op == Op::Prepare {
            h.push((submit::TOPIC.into(), Some(s.topic.into())));
            if let Some(k) = s.key {
                h.push((submit::KEY.into(), Some(k.into())));
            }
        }
        h.extend(others.into_iter().map(|(n, v)| (n, Some(v.into_bytes()))));
        h.push((submit::SIGNATURE.into(), Some(signature.into_bytes())));
        h
    }

    /// A signed prepare of `message_key`, keyed by it; (partition, offset).
    pub async fn prepare(&self, message_key: &str, s: Submission<'_>) -> (i32, i64) {
        self.signed(Op::Prepare, message_key, s).await
    }

    /// A signed commit of `message_key`, keyed by it.
    pub async fn commit(&self, message_key: &str) -> (i32, i64) {
        self.signed(Op::Commit, message_key, Submission::default())
            .await
    }

    /// A signed rollback of `message_key`, keyed by it.
    pub async fn rollback(&self, message_key: &str) -> (i32, i64) {
        self.signed(Op::Rollback, message_key, Submission::default())
            .await
    }

    /// A signed record of `op`, keyed by `message_key`.
    pub async fn signed(&self, op: Op, message_key: &str, s: Submission<'_>) -> (i32, i64) {
        let headers = self.signed_headers(op, message_key, &s);
        self.raw(Some(message_key.as_bytes()), headers, s.value, s.partition)
            .await
    }

    /// Any record, as given.
    pub async fn raw(
        &self,
        key: Option<&[u8]>,
        headers: RawHeaders,
        value: &[u8],
        partition: Option<i32>,
    ) -> (i32, i64) {
        let mut h = OwnedHeaders::new_with_capacity(headers.len());
        for (name, v) in &headers {
            h = h.insert(Header {
                key: name,
                value: v.as_deref(),
            });
        }
        let mut record = FutureRecord::<[u8], [u8]>::to(&self.topic)
            .headers(h)
            .payload(value);
        if let Some(key) = key {
            record = record.key(key);
        }
        if let Some(p) = partition {
            record = record.partition(p);
        }
        let delivered = self
            .producer
            .send(record, Duration::from_secs(30))
            .await
            .map_err(|(e, _)| e)
            .expect("the submit topic took the record");
        (delivered.partition, delivered.offset)
    }
}

/// One record of any topic.
#[derive(Debug, Clone)]
pub struct RawRecord {
    /// The partition it was read from.
    pub partition: i32,
    /// Its offset there.
    pub offset: i64,
    /// Its key (None: no key).
    pub key: Option<Vec<u8>>,
    /// Its value (None: a null value).
    pub value: Option<Vec<u8>>,
    /// Its headers in record order.
    pub headers: RawHeaders,
}

impl RawRecord {
    /// The first header called `name`, as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.as_deref())
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }
}

/// Every record of one topic, from its beginning.
pub struct RawReader {
    consumer: BaseConsumer,
    /// What was read so far, in the order read.
    pub records: Vec<RawRecord>,
}

impl RawReader {
    /// Reads `topic` of `bootstrap` from the beginning (a group of its own).
    pub fn new(bootstrap: &str, topic: &str) -> Self {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set(
                "group.id",
                format!("raw-reader-{topic}-{}", std::process::id()),
            )
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("fetch.wait.max.ms", "10")
            .create()
            .expect("a consumer");
        consumer.subscribe(&[topic]).expect("subscribed");
        Self {
            consumer,
            records: Vec::new(),
        }
    }

    /// Whatever arrived since the last call.
    pub fn poll(&mut self) -> &[RawRecord] {
        while let Some(read) = self.consumer.poll(Duration::from_millis(50)) {
            let Ok(m) = read else { continue };
            self.records.push(RawRecord {
                partition: m.partition(),
                offset: m.offset(),
                key: m.key().map(<[u8]>::to_vec),
                value: m.payload().map(<[u8]>::to_vec),
                headers: crate::kafka::record_headers(&m),
            });
        }
        &self.records
    }

    /// Reads until `done(records)` holds; panics after `deadline`, naming `what`.
    pub async fn read_until(
        &mut self,
        deadline: Duration,
        what: &str,
        mut done: impl FnMut(&[RawRecord]) -> bool,
    ) {
        let start = Instant::now();
        loop {
            // A poll waits at most 50 ms: short enough to block a test's task.
            let records = self.poll();
            if done(records) {
                return;
            }
            assert!(
                start.elapsed() < deadline,
                "timed out after {deadline:?} waiting for {what}; got {records:#?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl RawReader {
    /// Keeps reading for a second, to see what else arrives (or that nothing does).
    pub async fn read_for_a_while(&mut self) {
        let until = Instant::now() + Duration::from_secs(1);
        while Instant::now() < until {
            self.poll();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The offsets `group` has committed for `topic`'s partitions `0..partitions`
/// (the next record each will read; absent: none committed yet), asked of the
/// group coordinator without joining the group, so the group's own members
/// are not disturbed.
pub fn committed_offsets(
    bootstrap: &str,
    group: &str,
    topic: &str,
    partitions: i32,
) -> BTreeMap<i32, i64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("a consumer");
    let mut asked = rdkafka::TopicPartitionList::new();
    for p in 0..partitions {
        asked.add_partition(topic, p);
    }
    // The coordinator may answer with a transient error while the group
    // rebalances (or the machine is loaded): ask again, for up to 60 s.
    let deadline = Instant::now() + Duration::from_secs(60);
    let committed = loop {
        match consumer.committed_offsets(asked.clone(), Duration::from_secs(10)) {
            Ok(c) => break c,
            Err(e) if Instant::now() < deadline => {
                eprintln!("asking for the group's committed offsets again: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("the group's committed offsets: {e}"),
        }
    };
    committed
        .elements()
        .iter()
        .filter_map(|e| match e.offset() {
            rdkafka::Offset::Offset(o) => Some((e.partition(), o)),
            _ => None,
        })
        .collect()
}

/// The dead-letter topic `dead_letters` holds no letter of what was
/// submitted to `submitter`'s topic (`partitions` partitions) by now. Not
/// by looking for a while: an unsigned record (a sentinel, keyed
/// `sentinel-<partition>`) is first submitted to each partition, which the
/// service dead-letters only after every record before it there was
/// applied or dead-lettered, and the topic is read (with
/// [`crate::kafka::records_in`]) until each sentinel's letter is in it;
/// then any other letter fails the test, as does a sentinel dead-lettered
/// twice.
pub async fn assert_nothing_dead_lettered(
    bootstrap: &str,
    submitter: &Submitter,
    partitions: i32,
    dead_letters: &str,
) {
    let run = format!("{:?}", Instant::now());
    let sentinel_key = |p: i32| format!("sentinel-{p}-{run}");
    for p in 0..partitions {
        let key = sentinel_key(p);
        let s = Submission {
            topic: "sentinels",
            value: b"s",
            partition: Some(p),
            ..Default::default()
        };
        let mut h = submitter.signed_headers(Op::Prepare, &key, &s);
        h.retain(|(n, _)| n != submit::SIGNATURE);
        submitter.raw(Some(key.as_bytes()), h, b"s", Some(p)).await;
    }
    let sentinels: Vec<Vec<u8>> = (0..partitions)
        .map(|p| sentinel_key(p).into_bytes())
        .collect();
    let is_sentinel = |r: &RawRecord| r.key.as_ref().is_some_and(|k| sentinels.contains(k));
    let deadline = Instant::now() + Duration::from_secs(60);
    let letters = loop {
        let letters = crate::kafka::records_in(bootstrap, dead_letters).await;
        let seen = sentinels
            .iter()
            .filter(|s| letters.iter().any(|r| r.key.as_ref() == Some(*s)))
            .count();
        if seen == sentinels.len() {
            break letters;
        }
        assert!(
            Instant::now() < deadline,
            "{seen} of the {} sentinels dead-lettered within 60 s; the letters: {letters:#?}",
            sentinels.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let others: Vec<String> = letters
        .iter()
        .filter(|r| !is_sentinel(r))
        .map(|r| {
            format!(
                "{:?} {:?}: {:?} {:?}",
                r.key.as_deref().map(String::from_utf8_lossy),
                r.header(submit::OP),
                r.header(submit::ERROR_CODE),
                r.header(submit::ERROR)
            )
        })
        .collect();
    assert!(others.is_empty(), "dead-lettered: {others:#?}");
    assert_eq!(
        letters.len(),
        sentinels.len(),
        "each sentinel dead-lettered once: {letters:#?}"
    );
}
