//! What only the end-to-end tests need on top of the kit: a Kafka cluster with
//! a reader per topic, the message ledger read straight from the table, and
//! fast check-back settings.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{json, Value};
use sqlx::MySqlPool;
use trustmsg_tests::kafka::{Consumed, MockKafka, TopicReader};

/// Kafka: a mock cluster with the given topics (3 partitions each), each read
/// from the beginning.
pub(crate) struct Kafka {
    pub(crate) mock: MockKafka,
    readers: Mutex<Vec<TopicReader>>,
}

impl Kafka {
    pub(crate) fn start(topics: &[&str]) -> Self {
        let mock = MockKafka::start(1);
        for topic in topics {
            mock.create_topic(topic, 3);
        }
        let readers = topics
            .iter()
            .map(|topic| TopicReader::new(mock.bootstrap(), topic))
            .collect();
        Self {
            mock,
            readers: Mutex::new(readers),
        }
    }

    /// Every record delivered by now, across the topics.
    pub(crate) fn records(&self) -> Vec<Consumed> {
        let mut readers = self.readers.lock().unwrap();
        readers.iter_mut().flat_map(|r| r.poll().to_vec()).collect()
    }

    /// Message id → how many times it was delivered by now.
    pub(crate) fn deliveries(&self) -> HashMap<u64, usize> {
        let mut m = HashMap::new();
        for r in self.records() {
            *m.entry(r.message_id).or_default() += 1;
        }
        m
    }
}

/// A message row as raw columns: key, id, status, send_status.
type StatusRow = (Vec<u8>, u64, Vec<u8>, Option<Vec<u8>>);

/// Status of every message of `biz_id`, by message key.
pub(crate) async fn statuses(
    pool: &MySqlPool,
    biz_id: &str,
) -> HashMap<String, (u64, String, Option<String>)> {
    let rows: Vec<StatusRow> = sqlx::query_as(
        "SELECT message_key, id, status, send_status FROM messages WHERE biz_id = ?",
    )
    .bind(biz_id)
    .fetch_all(pool)
    .await
    .unwrap();
    rows.into_iter()
        .map(|(k, id, s, ss)| {
            (
                String::from_utf8(k).unwrap(),
                (
                    id,
                    String::from_utf8(s).unwrap(),
                    ss.map(|s| String::from_utf8(s).unwrap()),
                ),
            )
        })
        .collect()
}

/// Fast check-back settings for tests (seconds, not minutes).
pub(crate) const FAST_VERIFY: &[&str] = &[
    "--verify-interval",
    "50ms",
    "--verify-backoff-base",
    "100ms",
    "--verify-backoff-max",
    "300ms",
    "--sweep-interval",
    "200ms",
];

/// A producer registration checked back at `verify_url`, first after
/// `first_ms`, at most `attempts` times.
pub(crate) fn settings(verify_url: &str, first_ms: u32, attempts: u32) -> Value {
    json!({
        "verify_url": verify_url,
        "first_verify_after_ms": first_ms,
        "max_verify_attempts": attempts,
        "verify_timeout_ms": 5000,
    })
}
