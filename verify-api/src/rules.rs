//! The rules a message's fields follow, the same wherever they are checked:
//! by the service on a prepare (and on a relayed outbox row), and by an SDK
//! before it writes an outbox row, with the same error codes and messages.

use std::collections::BTreeMap;

use crate::kafka_headers;

/// Longest message_key, in bytes.
pub const MAX_MESSAGE_KEY: usize = 128;
/// Longest Kafka topic name (Kafka's own limit).
pub const MAX_TOPIC: usize = 249;
/// Longest record key, in bytes.
pub const MAX_RECORD_KEY: usize = 1024;
/// Most user headers per message.
pub const MAX_HEADERS: usize = 64;
/// Longest header name, in bytes.
pub const MAX_HEADER_NAME: usize = 256;
/// Most bytes of all header names and values together.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Longest outbox table name.
pub const MAX_TABLE: usize = 64;

/// A field trustmsg refuses: the API's error code (`invalid_topic`, …) and
/// a message a person can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The API's error code, e.g. `invalid_topic`.
    pub code: &'static str,
    /// What is wrong, and the limit.
    pub message: String,
}

fn refuse<T>(code: &'static str, message: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal {
        code,
        message: message.into(),
    })
}

/// The first character of `v` outside `[A-Za-z0-9._-]`, the alphabet of
/// biz_ids, Kafka topic names and topic allow-list entries.
pub fn outside_name_alphabet(v: &str) -> Option<char> {
    v.chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "._-".contains(*c)))
}

/// message_key: 1–128 bytes, no control characters.
pub fn message_key(v: &str) -> Result<(), Refusal> {
    if v.is_empty() || v.len() > MAX_MESSAGE_KEY {
        return refuse(
            "invalid_message_key",
            format!(
                "message_key must be 1 to {MAX_MESSAGE_KEY} bytes long (got {})",
                v.len()
            ),
        );
    }
    if v.chars().any(char::is_control) {
        return refuse(
            "invalid_message_key",
            "message_key must not contain control characters",
        );
    }
    Ok(())
}

/// A Kafka topic name: 1–249 of `[a-zA-Z0-9._-]`, and not `.` or `..`.
pub fn topic(v: &str) -> Result<(), Refusal> {
    let bad = |why: String| refuse("invalid_topic", why);
    if v.is_empty() || v.len() > MAX_TOPIC {
        return bad(format!(
            "topic must be 1 to {MAX_TOPIC} characters long (got {})",
            v.len()
        ));
    }
    if v == "." || v == ".." {
        return bad(format!("topic cannot be {v:?}"));
    }
    if let Some(c) = outside_name_alphabet(v) {
        return bad(format!(
            "topic may contain only ASCII letters, digits, '.', '_' and '-' (found {c:?})"
        ));
    }
    Ok(())
}

/// The record key: at most 1024 bytes.
pub fn record_key(v: Option<&str>) -> Result<(), Refusal> {
    match v {
        Some(k) if k.len() > MAX_RECORD_KEY => refuse(
            "invalid_key",
            format!(
                "key must be at most {MAX_RECORD_KEY} bytes (got {})",
                k.len()
            ),
        ),
        _ => Ok(()),
    }
}

/// User headers: bounded count and size, non-empty names, no control
/// characters, none in the reserved `trustmsg-` namespace.
pub fn headers(h: &BTreeMap<String, String>) -> Result<(), Refusal> {
    let bad = |why: String| refuse("invalid_headers", why);
    if h.len() > MAX_HEADERS {
        return bad(format!(
            "at most {MAX_HEADERS} headers are allowed (got {})",
            h.len()
        ));
    }
    let mut total = 0;
    for (name, value) in h {
        if name.is_empty() || name.len() > MAX_HEADER_NAME {
            return bad(format!(
                "header names must be 1 to {MAX_HEADER_NAME} bytes long"
            ));
        }
        // Headers are stored as JSON, where each control character is a
        // six-byte escape: within the raw limit they could still overflow the
        // column, and no header a consumer reads needs one.
        if name.chars().any(char::is_control) {
            return bad(format!(
                "header name {name:?} contains a control character; names and values must be printable text"
            ));
        }
        if value.chars().any(char::is_control) {
            return bad(format!(
                "the value of header {name:?} contains a control character; values must be printable text"
            ));
        }
        if name
            .to_ascii_lowercase()
            .starts_with(kafka_headers::RESERVED_PREFIX)
        {
            return bad(format!(
                "header {name:?} uses the reserved prefix {:?}; trustmsg sets those itself",
                kafka_headers::RESERVED_PREFIX
            ));
        }
        total += name.len() + value.len();
    }
    if total > MAX_HEADER_BYTES {
        return bad(format!(
            "headers total {total} bytes; at most {MAX_HEADER_BYTES} are allowed"
        ));
    }
    Ok(())
}

/// An outbox table's name, which the relay puts in its statements unquoted:
/// 1 to 64 of `A-Z a-z 0-9 _`, not starting with a digit.
pub fn outbox_table(name: &str) -> Result<(), Refusal> {
    let ok = !name.is_empty()
        && name.len() <= MAX_TABLE
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit();
    if ok {
        Ok(())
    } else {
        refuse(
            "invalid_table",
            format!(
                "{name:?} is not a table name the relay accepts: 1 to {MAX_TABLE} of \
                 A-Z a-z 0-9 _, not starting with a digit"
            ),
        )
    }
}

/// A delivery delay (`deliver_after_ms`): at most
/// [`crate::MAX_DELIVERY_DELAY_MS`] (7 days).
pub fn delivery_delay_ms(ms: u64) -> Result<(), Refusal> {
    let max = crate::MAX_DELIVERY_DELAY_MS;
    if ms > max {
        return refuse(
            "invalid_deliver_after_ms",
            format!(
                "deliver_after_ms is {ms}; the longest delay is {max} ms ({} days)",
                max_delay_days()
            ),
        );
    }
    Ok(())
}

/// A delivery time (`deliver_at`) as trustmsg keeps it, to the millisecond
/// (what is stored is what is sent): not before 1970 (no database keeps
/// that the same way), and at most [`crate::MAX_DELIVERY_DELAY_MS`] after
/// `now`, the checker's clock (only the limit depends on it: a skew of
/// seconds between clocks moves the limit by seconds). A time in the past
/// is kept as given: it means at once.
pub fn delivery_time(
    at: chrono::DateTime<chrono::Utc>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<chrono::DateTime<chrono::Utc>, Refusal> {
    let millis =
        |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let bad = |why: String| refuse("invalid_deliver_at", why);
    let Some(t) = chrono::DateTime::from_timestamp_millis(at.timestamp_millis()) else {
        return bad(format!("deliver_at {} is out of range", millis(at)));
    };
    if t.timestamp_millis() < 0 {
        return bad(format!("deliver_at {} is before 1970", millis(t)));
    }
    let latest = now + chrono::TimeDelta::milliseconds(crate::MAX_DELIVERY_DELAY_MS as i64);
    if t > latest {
        let days = max_delay_days();
        return bad(format!(
            "deliver_at {} is more than {days} days ahead (the latest now is {}); the longest \
             delay is {days} days",
            millis(t),
            millis(latest)
        ));
    }
    Ok(t)
}

fn max_delay_days() -> u64 {
    crate::MAX_DELIVERY_DELAY_MS / (24 * 60 * 60 * 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: Result<(), Refusal>) -> &'static str {
        r.err().map_or("ok", |r| r.code)
    }

    #[test]
    fn each_rule_refuses_with_the_apis_code_and_accepts_its_limit() {
        assert_eq!(code(message_key(&"k".repeat(MAX_MESSAGE_KEY))), "ok");
        assert_eq!(
            code(message_key(&"k".repeat(MAX_MESSAGE_KEY + 1))),
            "invalid_message_key"
        );
        assert_eq!(code(message_key("a\nb")), "invalid_message_key");
        assert_eq!(code(topic(&"t".repeat(MAX_TOPIC))), "ok");
        for bad in ["", ".", "..", "a b", "é"] {
            assert_eq!(code(topic(bad)), "invalid_topic", "{bad:?}");
        }
        assert_eq!(code(record_key(Some(&"k".repeat(MAX_RECORD_KEY)))), "ok");
        assert_eq!(
            code(record_key(Some(&"k".repeat(MAX_RECORD_KEY + 1)))),
            "invalid_key"
        );
        let reserved = BTreeMap::from([("Trustmsg-Id".to_string(), "1".to_string())]);
        assert_eq!(code(headers(&reserved)), "invalid_headers");
        let full = BTreeMap::from([("a".to_string(), "x".repeat(MAX_HEADER_BYTES - 1))]);
        assert_eq!(code(headers(&full)), "ok");
        let over = BTreeMap::from([("a".to_string(), "x".repeat(MAX_HEADER_BYTES))]);
        let refused = headers(&over).unwrap_err();
        assert_eq!(
            refused.message,
            format!("headers total 16385 bytes; at most {MAX_HEADER_BYTES} are allowed")
        );
        assert_eq!(code(outbox_table(&"t".repeat(MAX_TABLE))), "ok");
        for bad in ["", "1x", "a-b", "t;drop"] {
            assert_eq!(code(outbox_table(bad)), "invalid_table", "{bad:?}");
        }
    }
}
