//! Input validation with messages a person can act on.
//!
//! Everything a prepare carries is checked here before anything is written, so
//! a rejected request leaves no trace.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use chrono::{DateTime, Utc};
use trustmsg_verify_api::rules::{self, outside_name_alphabet, MAX_TOPIC};
use trustmsg_verify_api::{PayloadEncoding, PrepareRequest};

use super::IntakeError;
use crate::handoff::record::record_size;
use crate::store::Delivery;

/// Longest biz_id.
pub(crate) const MAX_BIZ_ID: usize = 64;
pub(crate) use trustmsg_verify_api::rules::MAX_MESSAGE_KEY;

/// biz_id: 1–64 of `[A-Za-z0-9._-]`.
pub(crate) fn biz_id(v: &str) -> Result<(), IntakeError> {
    if v.is_empty() || v.len() > MAX_BIZ_ID {
        return Err(IntakeError::invalid(
            "invalid_biz_id",
            format!(
                "biz_id must be 1 to {MAX_BIZ_ID} characters long (got {})",
                v.len()
            ),
        ));
    }
    if let Some(c) = outside_name_alphabet(v) {
        return Err(IntakeError::invalid(
            "invalid_biz_id",
            format!("biz_id may contain only letters, digits, '.', '_' and '-' (found {c:?})"),
        ));
    }
    Ok(())
}

/// A consumer group's name: as a biz_id, 1–64 of `[A-Za-z0-9._-]`.
pub(crate) fn group(v: &str) -> Result<(), IntakeError> {
    if v.is_empty() || v.len() > MAX_BIZ_ID {
        return Err(IntakeError::invalid(
            "invalid_group",
            format!(
                "group must be 1 to {MAX_BIZ_ID} characters long (got {})",
                v.len()
            ),
        ));
    }
    if let Some(c) = outside_name_alphabet(v) {
        return Err(IntakeError::invalid(
            "invalid_group",
            format!("group may contain only letters, digits, '.', '_' and '-' (found {c:?})"),
        ));
    }
    Ok(())
}

/// message_key: 1–128 bytes, no control characters.
pub(crate) fn message_key(v: &str) -> Result<(), IntakeError> {
    Ok(rules::message_key(v)?)
}

/// A Kafka topic name: 1–249 of `[a-zA-Z0-9._-]`, and not `.` or `..`.
pub(crate) fn topic(v: &str) -> Result<(), IntakeError> {
    Ok(rules::topic(v)?)
}

/// Most entries in a producer's topic allow-list.
pub(crate) const MAX_ALLOWED_TOPICS: usize = 100;

/// A registration's `topics`: 1 to [`MAX_ALLOWED_TOPICS`] entries, each a
/// topic name, a prefix of one followed by a single `*`, or `*` alone.
pub(crate) fn topic_allow_list(list: &[String]) -> Result<(), IntakeError> {
    let bad = |why: String| Err(IntakeError::invalid("invalid_topics", why));
    if list.is_empty() {
        return bad(
            "topics is empty, which would allow no topic at all: list the topics this producer \
             may prepare messages for, exact names or prefixes ending in `*` (e.g. \
             [\"orders\", \"shop.*\"]); [\"*\"] allows any topic explicitly"
                .into(),
        );
    }
    if list.len() > MAX_ALLOWED_TOPICS {
        return bad(format!(
            "topics has {} entries; at most {MAX_ALLOWED_TOPICS} are allowed (use a prefix \
             ending in `*` to cover many topics)",
            list.len()
        ));
    }
    for (i, entry) in list.iter().enumerate() {
        if let Some(why) = allow_list_entry(entry) {
            return bad(format!(
                "topics[{i}] {entry:?} {why}; each entry is a topic name (`orders`), a prefix of \
                 one followed by a single `*` (`shop.*`), or `*` alone"
            ));
        }
    }
    Ok(())
}

/// What is wrong with one allow-list entry, if anything.
fn allow_list_entry(entry: &str) -> Option<String> {
    let name = match entry.strip_suffix('*') {
        Some("") => return None,
        Some(prefix) => prefix,
        None => entry,
    };
    if name.is_empty() || entry.len() > MAX_TOPIC {
        return Some(format!(
            "must be 1 to {MAX_TOPIC} characters long (got {})",
            entry.len()
        ));
    }
    if let Some(c) = outside_name_alphabet(name) {
        return Some(if c == '*' {
            "has a `*` that is not its single last character".to_string()
        } else {
            format!("may contain only ASCII letters, digits, '.', '_' and '-' before an optional trailing `*` (found {c:?})")
        });
    }
    if name.len() == entry.len() && (name == "." || name == "..") {
        return Some("is not a valid topic name".into());
    }
    None
}

/// The record key: at most 1024 bytes.
pub(crate) fn record_key(v: Option<&str>) -> Result<(), IntakeError> {
    Ok(rules::record_key(v)?)
}

/// User headers: bounded count and size, non-empty names, no control
/// characters, none in the reserved namespace.
pub(crate) fn headers(h: &BTreeMap<String, String>) -> Result<(), IntakeError> {
    Ok(rules::headers(h)?)
}

/// Decodes the payload and checks its size.
pub(crate) fn payload(
    payload: &str,
    encoding: PayloadEncoding,
    max_bytes: usize,
) -> Result<Vec<u8>, IntakeError> {
    let bytes = match encoding {
        PayloadEncoding::Utf8 => payload.as_bytes().to_vec(),
        PayloadEncoding::Base64 => STANDARD.decode(payload).map_err(|e| {
            IntakeError::invalid(
                "invalid_payload",
                format!("payload is not valid standard base64 (with padding): {e}"),
            )
        })?,
    };
    payload_size(bytes.len(), max_bytes)?;
    Ok(bytes)
}

/// A decoded payload of `len` bytes is within `--max-payload-bytes`.
fn payload_size(len: usize, max_bytes: usize) -> Result<(), IntakeError> {
    if len > max_bytes {
        return Err(IntakeError::TooLarge(format!(
            "payload is {len} bytes; the limit is {max_bytes} bytes (--max-payload-bytes)"
        )));
    }
    Ok(())
}

/// A checked prepare: every field valid, payload decoded.
#[derive(Debug)]
pub(crate) struct ValidPrepare {
    /// The decoded record value.
    pub(crate) payload: Vec<u8>,
    /// The user headers (empty when none were given).
    pub(crate) headers: BTreeMap<String, String>,
    /// When it may be sent at the earliest; None: once committed.
    pub(crate) deliver: Option<Delivery>,
}

/// A prepare's `deliver_at` or `deliver_after_ms` (not both): at most
/// [`trustmsg_verify_api::MAX_DELIVERY_DELAY_MS`] ahead. `deliver_at` is checked against `now`,
/// this instance's clock: only the limit depends on it (the instant itself
/// is stored as given), so a skew of seconds between instances moves the
/// limit by seconds. A `deliver_at` in the past is kept as given (it means
/// at once: a commit after it is due at once), which keeps a replayed
/// prepare the same message once its time has passed; one before 1970 is
/// refused (no database stores it the same way).
pub(crate) fn delivery(
    req: &PrepareRequest,
    now: DateTime<Utc>,
) -> Result<Option<Delivery>, IntakeError> {
    match (&req.deliver_at, req.deliver_after_ms) {
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err(IntakeError::invalid(
            "invalid_delivery",
            "give deliver_at (a time) or deliver_after_ms (a delay), not both",
        )),
        (None, Some(ms)) => {
            rules::delivery_delay_ms(ms)?;
            Ok(Some(Delivery::After(Duration::from_millis(ms))))
        }
        (Some(at), None) => {
            let Ok(t) = DateTime::parse_from_rfc3339(at) else {
                return Err(IntakeError::invalid(
                    "invalid_deliver_at",
                    format!(
                        "deliver_at {at:?} is not an RFC 3339 time with an offset, such as \
                         2030-01-01T09:00:00Z or 2030-01-01T10:00:00+01:00"
                    ),
                ));
            };
            // The stores keep milliseconds: the digest and the row agree.
            let t = rules::delivery_time(t.with_timezone(&Utc), now)?;
            Ok(Some(Delivery::At(t)))
        }
    }
}

/// The Kafka record the message will be must fit the producer's
/// `message.max.bytes`, or the forwarder could never send what prepare accepted.
pub(crate) fn record(
    req: &PrepareRequest,
    payload_len: usize,
    headers: &BTreeMap<String, String>,
    max_record: usize,
    traced: bool,
) -> Result<(), IntakeError> {
    let size = record_size(
        req.key.as_deref(),
        payload_len,
        headers,
        &req.biz_id,
        &req.message_key,
        None,
        traced,
    );
    if size > max_record {
        return Err(IntakeError::TooLarge(format!(
            "the Kafka record would be {size} bytes (payload {payload_len}, plus key, headers \
             and framing); the record limit is {max_record} bytes (--kafka-message-max-bytes): \
             send a smaller payload, key or headers"
        )));
    }
    Ok(())
}

/// Checks a whole prepare request.
pub(crate) fn prepare(
    req: &PrepareRequest,
    max_payload: usize,
    max_record: usize,
    traced: bool,
) -> Result<ValidPrepare, IntakeError> {
    let hdrs = fields(req)?;
    let payload = payload(
        &req.payload,
        req.payload_encoding.unwrap_or_default(),
        max_payload,
    )?;
    checked_prepare(req, payload, hdrs, max_record, traced)
}

/// Checks a prepare whose payload came as bytes (a record submitted to
/// Kafka; `req.payload` is not read): every check [`prepare`] makes.
pub(crate) fn prepare_bytes(
    req: &PrepareRequest,
    payload: Vec<u8>,
    max_payload: usize,
    max_record: usize,
    traced: bool,
) -> Result<ValidPrepare, IntakeError> {
    let hdrs = fields(req)?;
    payload_size(payload.len(), max_payload)?;
    checked_prepare(req, payload, hdrs, max_record, traced)
}

/// A prepare's names, key and headers (the headers, checked, are returned).
fn fields(req: &PrepareRequest) -> Result<BTreeMap<String, String>, IntakeError> {
    biz_id(&req.biz_id)?;
    message_key(&req.message_key)?;
    topic(&req.topic)?;
    record_key(req.key.as_deref())?;
    let hdrs = req.headers.clone().unwrap_or_default();
    headers(&hdrs)?;
    Ok(hdrs)
}

fn checked_prepare(
    req: &PrepareRequest,
    payload: Vec<u8>,
    hdrs: BTreeMap<String, String>,
    max_record: usize,
    traced: bool,
) -> Result<ValidPrepare, IntakeError> {
    record(req, payload.len(), &hdrs, max_record, traced)?;
    let deliver = delivery(req, Utc::now())?;
    Ok(ValidPrepare {
        payload,
        headers: hdrs,
        deliver,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use trustmsg_verify_api::MAX_DELIVERY_DELAY_MS;

    fn code(r: Result<(), IntakeError>) -> &'static str {
        match r {
            Err(IntakeError::Invalid { code, .. }) => code,
            Err(e) => panic!("unexpected error {e:?}"),
            Ok(()) => "ok",
        }
    }

    #[test]
    fn topics_follow_kafka_rules() {
        assert_eq!(code(topic("orders.v1_x-y")), "ok");
        assert_eq!(code(topic(&"a".repeat(249))), "ok");
        assert_eq!(code(topic(&"a".repeat(250))), "invalid_topic");
        assert_eq!(code(topic("")), "invalid_topic");
        assert_eq!(code(topic(".")), "invalid_topic");
        assert_eq!(code(topic("..")), "invalid_topic");
        assert_eq!(code(topic("a b")), "invalid_topic");
        assert_eq!(code(topic("ördér")), "invalid_topic");
    }

    #[test]
    fn an_allow_list_takes_names_prefixes_and_a_lone_star() {
        let list = |v: &[&str]| -> Vec<String> { v.iter().map(|s| s.to_string()).collect() };
        assert_eq!(
            code(topic_allow_list(&list(&["orders", "shop.*", "*"]))),
            "ok"
        );
        assert_eq!(code(topic_allow_list(&list(&[&"a".repeat(249)]))), "ok");
        assert_eq!(
            code(topic_allow_list(&list(&[&format!("{}*", "a".repeat(248))]))),
            "ok"
        );
        for bad in ["", "a b", "**", "a*b", "*a", ".", "..", "ördér*"] {
            assert_eq!(
                code(topic_allow_list(&list(&[bad]))),
                "invalid_topics",
                "{bad:?}"
            );
        }
        assert_eq!(
            code(topic_allow_list(&list(&[&"a".repeat(250)]))),
            "invalid_topics"
        );
        assert_eq!(
            code(topic_allow_list(&list(&[&format!("{}*", "a".repeat(249))]))),
            "invalid_topics"
        );
        assert_eq!(code(topic_allow_list(&[])), "invalid_topics");
        let many: Vec<String> = (0..=MAX_ALLOWED_TOPICS).map(|i| format!("t{i}")).collect();
        assert_eq!(code(topic_allow_list(&many)), "invalid_topics");
    }

    #[test]
    fn reserved_and_oversized_headers_are_refused() {
        let mut h = BTreeMap::new();
        h.insert("Trustmsg-Message-Id".to_string(), "1".to_string());
        assert_eq!(code(headers(&h)), "invalid_headers");
        let big: BTreeMap<_, _> = (0..65).map(|i| (format!("h{i}"), String::new())).collect();
        assert_eq!(code(headers(&big)), "invalid_headers");
        let mut huge = BTreeMap::new();
        huge.insert("a".to_string(), "x".repeat(rules::MAX_HEADER_BYTES));
        assert_eq!(code(headers(&huge)), "invalid_headers");
    }

    #[test]
    fn payload_size_is_checked_after_decoding() {
        assert!(payload("aGVsbG8=", PayloadEncoding::Base64, 5).is_ok());
        assert!(matches!(
            payload("aGVsbG8h", PayloadEncoding::Base64, 5),
            Err(IntakeError::TooLarge(_))
        ));
        assert!(matches!(
            payload("not base64!", PayloadEncoding::Base64, 100),
            Err(IntakeError::Invalid {
                code: "invalid_payload",
                ..
            })
        ));
    }

    fn with_delivery(at: Option<&str>, after: Option<u64>) -> PrepareRequest {
        PrepareRequest {
            biz_id: "shop".into(),
            message_key: "k".into(),
            topic: "t".into(),
            key: None,
            payload: String::new(),
            payload_encoding: None,
            headers: None,
            deliver_at: at.map(str::to_string),
            deliver_after_ms: after,
        }
    }

    #[test]
    fn a_delivery_time_is_an_offset_time_or_a_delay_within_7_days_never_both() {
        let now = DateTime::parse_from_rfc3339("2030-01-01T00:00:00Z")
            .unwrap()
            .to_utc();
        let ok = |at: Option<&str>, after: Option<u64>| {
            delivery(&with_delivery(at, after), now).unwrap()
        };
        let refused =
            |at: Option<&str>, after: Option<u64>| match delivery(&with_delivery(at, after), now) {
                Err(IntakeError::Invalid { code, .. }) => code,
                other => panic!("{other:?}"),
            };
        assert_eq!(ok(None, None), None);
        assert_eq!(
            ok(None, Some(MAX_DELIVERY_DELAY_MS)),
            Some(Delivery::After(Duration::from_millis(
                MAX_DELIVERY_DELAY_MS
            )))
        );
        assert_eq!(
            refused(None, Some(MAX_DELIVERY_DELAY_MS + 1)),
            "invalid_deliver_after_ms"
        );
        // Any offset, the same instant; kept to the millisecond.
        assert_eq!(
            ok(Some("2030-01-01T10:00:00.123456+10:00"), None),
            Some(Delivery::At(
                DateTime::parse_from_rfc3339("2030-01-01T00:00:00.123Z")
                    .unwrap()
                    .to_utc()
            ))
        );
        assert!(ok(Some("2030-01-08T00:00:00Z"), None).is_some());
        assert_eq!(
            refused(Some("2030-01-08T00:00:00.001Z"), None),
            "invalid_deliver_at"
        );
        // The past is kept as given (it means now); before 1970 is not.
        assert!(ok(Some("2000-01-01T00:00:00Z"), None).is_some());
        assert_eq!(
            refused(Some("1969-12-31T23:59:59Z"), None),
            "invalid_deliver_at"
        );
        for bad in ["tomorrow", "2030-01-01", "2030-01-01T00:00:00", ""] {
            assert_eq!(refused(Some(bad), None), "invalid_deliver_at", "{bad:?}");
        }
        assert_eq!(
            refused(Some("2030-01-01T00:00:00Z"), Some(0)),
            "invalid_delivery"
        );
    }
}
