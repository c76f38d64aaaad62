//! The registry: producers (with their topic allow-list's rule) and
//! consumer groups, as stored and as written.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// A producer registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Producer {
    pub biz_id: String,
    pub verify_url: String,
    pub verify_timeout_ms: u32,
    pub first_verify_after_ms: u32,
    pub max_verify_attempts: u32,
    /// SHA-256 of the bearer token.
    pub token_hash: Vec<u8>,
    pub signing_secret: String,
    /// The topics it may prepare for (exact names, prefixes ending in `*`,
    /// or `*`); None: no allow-list (any topic).
    pub topics: Option<Vec<String>>,
    /// In order per key (issue 28).
    pub ordered: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Producer {
    /// Whether its allow-list lets it prepare for `topic` (None: it has no
    /// list). A linear scan: a list holds at most a hundred short entries,
    /// and it runs on the registration the API already holds.
    pub fn allows_topic(&self, topic: &str) -> Option<bool> {
        let list = self.topics.as_ref()?;
        Some(list.iter().any(|entry| match entry.strip_suffix('*') {
            Some(prefix) => topic.starts_with(prefix),
            None => entry == topic,
        }))
    }
}

/// The writable fields of a producer registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerRecord {
    pub biz_id: String,
    pub verify_url: String,
    pub verify_timeout_ms: u32,
    pub first_verify_after_ms: u32,
    pub max_verify_attempts: u32,
    pub token_hash: Vec<u8>,
    pub signing_secret: String,
    /// Replaces the stored list on an update (None removes it).
    pub topics: Option<Vec<String>>,
    /// In order per key.
    pub ordered: bool,
}

/// A registered consumer group (the consumption ledger).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroup {
    pub name: String,
    /// The topics it consumes: exact names, prefixes ending in `*`, or `*`.
    pub topics: Vec<String>,
    /// SHA-256 of the group's bearer token.
    pub token_hash: Vec<u8>,
    pub max_failures: u32,
    pub in_progress_timeout_ms: u32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl ConsumerGroup {
    /// How long a begun consumption holds its message.
    pub fn in_progress_timeout(&self) -> Duration {
        Duration::from_millis(u64::from(self.in_progress_timeout_ms))
    }
}

/// What a consumer group registration stores; an update keeps the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupRecord {
    pub name: String,
    pub topics: Vec<String>,
    /// Stored on creation only.
    pub token_hash: Vec<u8>,
    pub max_failures: u32,
    pub in_progress_timeout_ms: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allow_list_matches_exact_names_and_prefixes_only() {
        let producer = |topics: Option<&[&str]>| Producer {
            biz_id: "shop".into(),
            verify_url: "http://127.0.0.1:9/check".into(),
            verify_timeout_ms: 1,
            first_verify_after_ms: 1,
            max_verify_attempts: 1,
            token_hash: vec![],
            signing_secret: String::new(),
            topics: topics.map(|t| t.iter().map(|s| s.to_string()).collect()),
            ordered: false,
            created_at: DateTime::<Utc>::MIN_UTC,
            updated_at: DateTime::<Utc>::MIN_UTC,
        };
        let shop = producer(Some(&["orders", "shop.*"]));
        for (topic, allowed) in [
            ("orders", true),
            ("shop.x", true),
            ("shop.", true),
            ("shop", false),
            ("orders2", false),
            ("Orders", false),
            ("payments", false),
        ] {
            assert_eq!(shop.allows_topic(topic), Some(allowed), "{topic}");
        }
        assert_eq!(producer(Some(&["*"])).allows_topic("anything"), Some(true));
        assert_eq!(producer(None).allows_topic("anything"), None);
    }
}
