#![warn(missing_docs)]
//! Wire types shared by the trustmsg middleware, its producer SDK and its
//! operator tools.
//!
//! Everything here is plain data with serde derives and no I/O, so the SDK can
//! depend on it without pulling in the service. Field and enum spellings are the
//! JSON contract of the producer API, of the operator API ([`admin`]) and of
//! check-back (`docs/openapi.json`, `docs/check-back.md`): renaming anything
//! here is a breaking change for every producer and operator tool.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub mod admin;
pub mod consumers;
pub mod rules;
pub mod submit;
pub mod trace_context;

/// The decision state of a message (`status` in the message view).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MessageStatus {
    /// Stored by `prepare`; waiting for the producer's commit or rollback.
    Prepared,
    /// Decided for delivery; the forwarder publishes it to Kafka.
    Committed,
    /// Decided against delivery; it is never published.
    RolledBack,
    /// Check-back gave no answer within the attempt limit; an operator decides.
    VerifyFailed,
}

impl MessageStatus {
    /// The spelling used on the wire and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prepared => "PREPARED",
            Self::Committed => "COMMITTED",
            Self::RolledBack => "ROLLED_BACK",
            Self::VerifyFailed => "VERIFY_FAILED",
        }
    }

    /// Parses the wire/database spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "PREPARED" => Self::Prepared,
            "COMMITTED" => Self::Committed,
            "ROLLED_BACK" => Self::RolledBack,
            "VERIFY_FAILED" => Self::VerifyFailed,
            _ => return None,
        })
    }

    /// COMMITTED and ROLLED_BACK never change again.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Committed | Self::RolledBack)
    }
}

/// The delivery state of a committed message (`send_status`, null before commit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SendStatus {
    /// Waiting for (or in) a send attempt.
    Pending,
    /// Kafka acknowledged the record.
    Sent,
    /// Gave up (permanent error or attempt limit); an operator may redeliver.
    SendFailed,
}

impl SendStatus {
    /// The spelling used on the wire and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Sent => "SENT",
            Self::SendFailed => "SEND_FAILED",
        }
    }

    /// Parses the wire/database spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "PENDING" => Self::Pending,
            "SENT" => Self::Sent,
            "SEND_FAILED" => Self::SendFailed,
            _ => return None,
        })
    }
}

/// How a payload string is encoded: in a prepare request, and in an
/// operator's view of a message (`admin::MessageDetail`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PayloadEncoding {
    /// The payload string's UTF-8 bytes are the record value.
    #[default]
    Utf8,
    /// The payload is standard base64 (with padding) of the record value.
    Base64,
}

/// `POST /v1/messages/prepare`. A field it does not know is refused (400).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PrepareRequest {
    /// The producer's id (its registration in trustmsg): 1 to 64 of
    /// `A-Z a-z 0-9 . _ -`.
    #[schema(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub biz_id: String,
    /// The producer's unique key for this message, e.g. an order id: 1 to 128
    /// bytes of UTF-8 (as many ASCII characters, fewer wider ones), no control
    /// characters.
    #[schema(
        min_length = 1,
        max_length = 128,
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$"
    )]
    pub message_key: String,
    /// The Kafka topic the message goes to once committed: 1 to 249 of
    /// `A-Z a-z 0-9 . _ -`, not `.` or `..` (Kafka's rules).
    #[schema(
        min_length = 1,
        max_length = 249,
        pattern = "^(?!\\.\\.?$)[A-Za-z0-9._-]{1,249}$"
    )]
    pub topic: String,
    /// The Kafka record key, at most 1024 bytes of UTF-8; absent means Kafka's
    /// default partitioner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 1024)]
    pub key: Option<String>,
    /// The record value, encoded as `payload_encoding` says: with `base64`,
    /// standard base64 with padding. At most `--max-payload-bytes` once
    /// decoded (default 960000), and the record it makes (with key, headers
    /// and framing) at most `--kafka-message-max-bytes`: 413 beyond.
    pub payload: String,
    /// `utf8` (default) or `base64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_encoding: Option<PayloadEncoding>,
    /// Extra Kafka record headers: at most 64; names of 1 to 256 bytes not
    /// starting with `trustmsg-` (any case; trustmsg sets those); no control
    /// characters in names or values; names and values 16 KiB in all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = schemas::record_headers)]
    pub headers: Option<BTreeMap<String, String>>,
    /// Send no earlier than this time: RFC 3339 with an offset, e.g.
    /// `2030-01-01T09:00:00+01:00` (millisecond precision). A time in the
    /// past means at once; at most 7 days (604800000 ms) from now. Not
    /// together with `deliver_after_ms`. It takes part in the content
    /// comparison (the same instant again is the same message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime, example = "2030-01-01T09:00:00+01:00")]
    pub deliver_at: Option<String>,
    /// Send no earlier than this many milliseconds after the prepare (by the
    /// database clock): 0 to 604800000 (7 days).
    /// Not together with `deliver_at`. It takes part in the content
    /// comparison as given: a repeated prepare with the same value is the
    /// same message (200, the time stored first), another value is a 409.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "whole_number::optional"
    )]
    #[schema(minimum = 0, maximum = 604800000)]
    pub deliver_after_ms: Option<u64>,
}

/// A JSON number that is a whole number, also when written with a zero
/// fraction (`5000.0`): JSON Schema's `integer` is any number without a
/// fractional part, so a client that serialises whole numbers as floats
/// sends a valid request.
pub(crate) mod whole_number {
    use std::fmt;

    use serde::de::{self, Deserializer, Visitor};

    struct Whole;

    impl Visitor<'_> for Whole {
        type Value = Option<u64>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a whole number from 0 up, or null")
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v))
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            u64::try_from(v)
                .map(Some)
                .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            // 2^64 is exactly representable; every whole float below it fits.
            if v.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&v) {
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                Ok(Some(v as u64))
            } else {
                Err(E::invalid_value(de::Unexpected::Float(v), &self))
            }
        }
    }

    pub(crate) fn optional<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        d.deserialize_any(Whole)
    }
}

/// The longest delivery delay prepare accepts (`deliver_at`,
/// `deliver_after_ms`): 7 days, in milliseconds. A delayed message is a
/// live row of the hot table until it is sent (retention never deletes a
/// PENDING send), so a longer delay is a job for a scheduler, not for a
/// transactional outbox.
pub const MAX_DELIVERY_DELAY_MS: u64 = 7 * 24 * 60 * 60 * 1000;

/// `POST /v1/messages/commit` and `POST /v1/messages/rollback`. A field it
/// does not know is refused (400).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionRequest {
    /// The producer's id.
    #[schema(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub biz_id: String,
    /// The message's key as given to prepare.
    #[schema(
        min_length = 1,
        max_length = 128,
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$"
    )]
    pub message_key: String,
}

/// A message as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MessageView {
    /// trustmsg's id for the message; also the `trustmsg-message-id` Kafka header.
    pub id: u64,
    /// The producer's id.
    pub biz_id: String,
    /// The producer's key for the message.
    pub message_key: String,
    /// The Kafka topic (null for a rollback tombstone, which never had content).
    pub topic: Option<String>,
    /// The Kafka record key.
    pub key: Option<String>,
    /// The decision state.
    pub status: MessageStatus,
    /// The delivery state; null before commit.
    pub send_status: Option<SendStatus>,
    /// Check-back calls made so far.
    pub verify_attempts: u32,
    /// Kafka send attempts made so far.
    pub send_attempts: u32,
    /// The last check-back or send error, if any.
    pub last_error: Option<String>,
    /// Size of the record value in bytes.
    pub payload_size: u64,
    /// When the next check-back is due (PREPARED only).
    pub next_verify_at: Option<DateTime<Utc>>,
    /// When the next send attempt is due (PENDING only).
    pub next_send_at: Option<DateTime<Utc>>,
    /// Kafka partition of the delivered record.
    pub kafka_partition: Option<i32>,
    /// Kafka offset of the delivered record.
    pub kafka_offset: Option<i64>,
    /// When prepare stored the message (database clock, UTC).
    pub created_at: DateTime<Utc>,
    /// Last change of the row.
    pub updated_at: DateTime<Utc>,
    /// When the commit/rollback/verify-failed decision was made.
    pub decided_at: Option<DateTime<Utc>>,
    /// When Kafka acknowledged the record.
    pub sent_at: Option<DateTime<Utc>>,
    /// An ordered producer's keyed message, once committed: its place in its
    /// key's commit order (1, 2, …). Absent for every other message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_seq: Option<u64>,
    /// The earliest time the message may be sent (prepare's `deliver_at` or
    /// `deliver_after_ms`); null when it was not delayed. A committed message
    /// whose send is PENDING and whose `deliver_at` is in the future is
    /// scheduled ("due at …"), not late.
    #[serde(default)]
    pub deliver_at: Option<DateTime<Utc>>,
    /// The W3C trace id (32 lower-case hex) of the `traceparent` the prepare
    /// request carried; null when it carried none (or an invalid one).
    #[serde(default)]
    #[schema(pattern = "^[0-9a-f]{32}$")]
    pub trace_id: Option<String>,
}

/// Every error response: `{"error": {"code": ..., "message": ...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// The inside of [`ErrorBody`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// A stable machine-readable code, e.g. `invalid_topic`, `conflict`.
    pub code: String,
    /// A sentence a person can act on.
    pub message: String,
}

/// `PUT /v1/producers/{biz_id}`: create or update a producer registration.
/// An update replaces the whole registration (a field left out takes its
/// default; `topics` left out removes the allow-list). A field it does not
/// know is refused (400).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProducerSettings {
    /// The producer's check-back endpoint: an absolute http or https URL
    /// without user name or password, whose host is an address (or resolves
    /// now to addresses) the service's check-back address policy allows.
    #[schema(pattern = "^[Hh][Tt][Tt][Pp][Ss]?://[^@/?#]+([/?#].*)?$")]
    pub verify_url: String,
    /// Timeout of one check-back call in milliseconds: at least 10, at most
    /// the service's `--verify-timeout-max` (default 2 minutes, 120000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 10, maximum = 120000)]
    pub verify_timeout_ms: Option<u32>,
    /// Delay after prepare before the first check-back, in milliseconds (at most a day).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 86400000)]
    pub first_verify_after_ms: Option<u32>,
    /// Check-back attempts before the message goes to VERIFY_FAILED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 10000)]
    pub max_verify_attempts: Option<u32>,
    /// The topics this producer may prepare messages for: 1 to 100 entries,
    /// each an exact topic name (`orders`) or a prefix ending in `*`
    /// (`shop.*` allows `shop.x` and `shop.` itself); `*` alone allows any
    /// topic, explicitly. A prepare for any other topic is refused (403
    /// `topic_not_allowed`). Left out (or null): no allow-list, any topic,
    /// and the registration is flagged (`topics_missing`); a service run with
    /// `--require-producer-topics` refuses that (400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = schemas::topic_allow_list)]
    pub topics: Option<Vec<String>>,
    /// In order per key: the messages of one (topic, record key) are sent
    /// one after the other, each only once every message of that key
    /// committed before it is SENT (or skipped by an operator). A message
    /// without a record key is not ordered. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ordered: bool,
}

/// A producer registration as the admin API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProducerView {
    /// The producer's id.
    pub biz_id: String,
    /// The check-back endpoint.
    pub verify_url: String,
    /// Timeout of one check-back call in milliseconds.
    pub verify_timeout_ms: u32,
    /// Delay after prepare before the first check-back, in milliseconds.
    pub first_verify_after_ms: u32,
    /// Check-back attempts before VERIFY_FAILED.
    pub max_verify_attempts: u32,
    /// The topics it may prepare messages for (exact names and prefixes
    /// ending in `*`); null when the registration has no allow-list.
    pub topics: Option<Vec<String>>,
    /// True when the registration has no topic allow-list (`topics` is
    /// null): the producer may publish to any topic. Operators should give
    /// it one; `--require-producer-topics` refuses its prepares.
    pub topics_missing: bool,
    /// In order per key (see the registration's `ordered`).
    #[serde(default)]
    pub ordered: bool,
    /// The secret check-back requests are signed with (Standard Webhooks
    /// `whsec_…`). Present only in the answers to creation and to
    /// `rotate-token`; `POST /v1/producers/{biz_id}/reveal-signing-secret`
    /// shows it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<String>,
    /// The producer's bearer token. Present only in the response that issued it
    /// (creation or rotation): trustmsg keeps only its hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// When the registration was created.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// Every registration (`GET /v1/producers`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProducerList {
    /// By biz_id.
    pub items: Vec<ProducerView>,
}

/// A producer's check-back signing secret
/// (`POST /v1/producers/{biz_id}/reveal-signing-secret`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SigningSecret {
    /// The producer's id.
    pub biz_id: String,
    /// The secret check-back requests are signed with (Standard Webhooks `whsec_…`).
    pub signing_secret: String,
}

/// The body trustmsg POSTs to a producer's `verify_url` (check-back).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CheckRequest {
    /// The producer's id.
    pub biz_id: String,
    /// The producer's key for the message.
    pub message_key: String,
    /// trustmsg's id for the message; the answer must echo it.
    pub message_id: u64,
    /// 1 for the first check-back of this message, then 2, 3, …
    pub attempt: u32,
    /// When prepare stored the message.
    pub prepared_at: DateTime<Utc>,
}

/// The producer's decision in a check-back answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// The local transaction committed: deliver the message.
    Commit,
    /// The local transaction rolled back (or never happened): drop the message.
    Rollback,
    /// The producer cannot tell yet: ask again later.
    Unknown,
}

/// The answer a producer returns to a check-back call (HTTP 2xx).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CheckResponse {
    /// Must equal the request's `message_id`, or the answer is ignored.
    pub message_id: u64,
    /// The decision.
    pub decision: Decision,
}

/// Schemas of fields whose rules the derive cannot state.
mod schemas {
    use utoipa::openapi::schema::{
        AdditionalProperties, Array, ArrayBuilder, Object, ObjectBuilder, Type,
    };
    use utoipa::openapi::Schema;

    /// No control characters (Unicode Cc, as Rust's `char::is_control`).
    pub(crate) const NO_CONTROL: &str = "^[^\\u0000-\\u001F\\u007F-\\u009F]*$";

    /// A registration's `topics`: exact topic names, prefixes ending in a
    /// single `*`, or `*` alone.
    pub(crate) fn topic_allow_list() -> Array {
        ArrayBuilder::new()
            .schema_type(utoipa::openapi::schema::SchemaType::from_iter([
                Type::Array,
                Type::Null,
            ]))
            .min_items(Some(1))
            .max_items(Some(100))
            .items(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .min_length(Some(1))
                    .max_length(Some(249))
                    .pattern(Some(
                        "^(?:(?!\\.\\.?$)[A-Za-z0-9._-]{1,249}|[A-Za-z0-9._-]{0,248}\\*)$",
                    )),
            )
            .build()
    }

    /// A consumer group's `topics`: as a producer's allow-list, but required.
    pub(crate) fn topic_list_required() -> Array {
        let mut list = topic_allow_list();
        list.schema_type = utoipa::openapi::schema::SchemaType::from_iter([Type::Array]);
        list
    }

    /// A prepare's `headers`.
    pub(crate) fn record_headers() -> Object {
        ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::SchemaType::from_iter([
                Type::Object,
                Type::Null,
            ]))
            .max_properties(Some(64))
            .property_names(Some(Schema::Object(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .min_length(Some(1))
                    .max_length(Some(256))
                    .pattern(Some(
                        "^(?![Tt][Rr][Uu][Ss][Tt][Mm][Ss][Gg]-)[^\\u0000-\\u001F\\u007F-\\u009F]+$",
                    ))
                    .build(),
            )))
            .additional_properties(Some(AdditionalProperties::RefOr(
                utoipa::openapi::RefOr::T(Schema::Object(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .pattern(Some(NO_CONTROL))
                        .build(),
                )),
            )))
            .build()
    }
}

/// Standard Webhooks header names used to sign check-back calls.
pub mod webhook {
    /// A unique id of this delivery attempt.
    pub const ID: &str = "webhook-id";
    /// Unix seconds when the request was signed.
    pub const TIMESTAMP: &str = "webhook-timestamp";
    /// `v1,<base64 HMAC-SHA256(secret, "<id>.<timestamp>.<body>")>`, space-separated if several.
    pub const SIGNATURE: &str = "webhook-signature";
    /// Prefix of a signing secret; the rest is the base64 key.
    pub const SECRET_PREFIX: &str = "whsec_";
    /// The largest check-back answer trustmsg reads, in bytes.
    pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;
}

/// Standard Webhooks signing and verification of check-back calls.
///
/// The signed content is `"<webhook-id>.<webhook-timestamp>.<body>"`, the key is
/// the base64 part of the `whsec_…` secret, the MAC is HMAC-SHA256, and the
/// header value is `v1,<base64 MAC>` (several may be space-separated, which is
/// how secrets are rotated). Any Standard Webhooks library verifies these.
pub mod signature {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine;
    use hmac::{Hmac, KeyInit, Mac};
    use sha2::Sha256;
    use subtle::ConstantTimeEq;

    use super::webhook::SECRET_PREFIX;

    /// Why a signature was not accepted.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum SignatureError {
        /// The secret is not `whsec_<base64>`.
        BadSecret,
        /// No `v1,` signature matched.
        Mismatch,
        /// The timestamp is not a number.
        BadTimestamp,
        /// The timestamp is further from now than the tolerance.
        Expired,
    }

    impl std::fmt::Display for SignatureError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(match self {
                Self::BadSecret => "signing secret is not whsec_<base64>",
                Self::Mismatch => "no signature matches",
                Self::BadTimestamp => "webhook-timestamp is not a number",
                Self::Expired => "webhook-timestamp is outside the tolerance",
            })
        }
    }

    impl std::error::Error for SignatureError {}

    /// The HMAC key of a `whsec_<base64>` secret (the prefix may be left out).
    pub(crate) fn secret_key(secret: &str) -> Result<Vec<u8>, SignatureError> {
        let b64 = secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret);
        STANDARD.decode(b64).map_err(|_| SignatureError::BadSecret)
    }

    fn mac(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> Vec<u8> {
        let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
        m.update(id.as_bytes());
        m.update(b".");
        m.update(timestamp.to_string().as_bytes());
        m.update(b".");
        m.update(body);
        m.finalize().into_bytes().to_vec()
    }

    /// The `webhook-signature` header value for this request.
    pub fn sign(
        secret: &str,
        id: &str,
        timestamp: i64,
        body: &[u8],
    ) -> Result<String, SignatureError> {
        Ok(format!(
            "v1,{}",
            STANDARD.encode(mac(&secret_key(secret)?, id, timestamp, body))
        ))
    }

    /// Checks a request: one of the `v1,` signatures in `header` must match,
    /// and `timestamp` must be within `tolerance_secs` of `now_unix`.
    pub fn verify(
        secret: &str,
        id: &str,
        timestamp: &str,
        body: &[u8],
        header: &str,
        now_unix: i64,
        tolerance_secs: i64,
    ) -> Result<(), SignatureError> {
        let ts: i64 = timestamp
            .trim()
            .parse()
            .map_err(|_| SignatureError::BadTimestamp)?;
        // `abs_diff` cannot overflow: the timestamp is the sender's to choose,
        // and `now - i64::MIN` would panic (or wrap into "fresh") in a producer's endpoint.
        let fresh = u64::try_from(tolerance_secs).is_ok_and(|tol| now_unix.abs_diff(ts) <= tol);
        if !fresh {
            return Err(SignatureError::Expired);
        }
        matches_one(header, &mac(&secret_key(secret)?, id, ts, body))
    }

    /// Ok when one of the space-separated `v1,<base64>` signatures in
    /// `header` is `expected` (compared in constant time).
    pub(crate) fn matches_one(header: &str, expected: &[u8]) -> Result<(), SignatureError> {
        let matched = header
            .split_whitespace()
            .filter_map(|s| s.strip_prefix("v1,"))
            .filter_map(|b64| STANDARD.decode(b64).ok())
            .any(|sig| sig.len() == expected.len() && bool::from(sig.ct_eq(expected)));
        if matched {
            Ok(())
        } else {
            Err(SignatureError::Mismatch)
        }
    }
}

/// Kafka header names trustmsg adds to every record.
pub mod kafka_headers {
    /// trustmsg's message id (decimal), stable across redeliveries: de-duplicate on it.
    pub const MESSAGE_ID: &str = "trustmsg-message-id";
    /// The producer's id.
    pub const BIZ_ID: &str = "trustmsg-biz-id";
    /// The producer's message key.
    pub const MESSAGE_KEY: &str = "trustmsg-message-key";
    /// User headers may not start with this prefix.
    pub const RESERVED_PREFIX: &str = "trustmsg-";
    /// W3C Trace Context of a message whose prepare carried a valid
    /// `traceparent`: the producer's trace, with trustmsg's send span as the
    /// parent when trustmsg exports spans (`--otlp-endpoint`), else the
    /// prepare's value as it came. It replaces a user header of the same
    /// name; a message prepared without one keeps its user headers as given.
    pub const TRACEPARENT: &str = crate::trace_context::TRACEPARENT;
    /// The prepare's `tracestate`, as it came, alongside [`TRACEPARENT`].
    pub const TRACESTATE: &str = crate::trace_context::TRACESTATE;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delay_of(json: &str) -> Result<Option<u64>, serde_json::Error> {
        let body = format!(
            r#"{{"biz_id":"shop","message_key":"k","topic":"t","payload":"","deliver_after_ms":{json}}}"#
        );
        serde_json::from_str::<PrepareRequest>(&body).map(|r| r.deliver_after_ms)
    }

    #[test]
    fn a_delay_is_any_whole_number_as_json_schema_counts_integers() {
        assert_eq!(delay_of("5000").unwrap(), Some(5000));
        assert_eq!(delay_of("5000.0").unwrap(), Some(5000));
        assert_eq!(delay_of("5e3").unwrap(), Some(5000));
        assert_eq!(delay_of("null").unwrap(), None);
        for bad in ["5000.5", "-1", "-1.0", "\"5000\"", "1e30"] {
            let e = delay_of(bad).expect_err(bad).to_string();
            assert!(e.contains("a whole number from 0 up"), "{bad}: {e}");
        }
    }

    #[test]
    fn status_spellings_round_trip_through_json_and_parse() {
        for s in [
            MessageStatus::Prepared,
            MessageStatus::Committed,
            MessageStatus::RolledBack,
            MessageStatus::VerifyFailed,
        ] {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
            assert_eq!(MessageStatus::parse(s.as_str()), Some(s));
        }
        for s in [
            SendStatus::Pending,
            SendStatus::Sent,
            SendStatus::SendFailed,
        ] {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
            assert_eq!(SendStatus::parse(s.as_str()), Some(s));
        }
    }

    #[test]
    fn signature_matches_the_standard_webhooks_reference_vector() {
        // The example from the Standard Webhooks specification.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        let body = br#"{"test": 2432232314}"#;
        let sig = signature::sign(secret, id, 1614265330, body).unwrap();
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        assert_eq!(
            signature::verify(
                secret,
                id,
                "1614265330",
                body,
                &format!("v1,bogus {sig}"),
                1614265330,
                300
            ),
            Ok(())
        );
        assert_eq!(
            signature::verify(secret, id, "1614265330", b"tampered", &sig, 1614265330, 300),
            Err(signature::SignatureError::Mismatch)
        );
        assert_eq!(
            signature::verify(secret, id, "1614265330", body, &sig, 1614265330 + 301, 300),
            Err(signature::SignatureError::Expired)
        );
    }

    #[test]
    fn timestamps_at_the_ends_of_i64_are_expired_not_an_overflow() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = b"{}";
        for ts in [i64::MIN, i64::MIN + 1, i64::MAX, i64::MAX - 1] {
            // Signed correctly, so only the timestamp can be what is refused.
            let sig = signature::sign(secret, "msg_1", ts, body).unwrap();
            for now in [0, 1_700_000_000, i64::MIN, i64::MAX] {
                let verdict =
                    signature::verify(secret, "msg_1", &ts.to_string(), body, &sig, now, 300);
                // i128 holds every difference of two i64s: an independent oracle.
                let expected = if (i128::from(now) - i128::from(ts)).abs() <= 300 {
                    Ok(())
                } else {
                    Err(signature::SignatureError::Expired)
                };
                assert_eq!(verdict, expected, "timestamp {ts} at now {now}");
            }
        }
        // A negative tolerance accepts nothing, as it always did.
        let sig = signature::sign(secret, "msg_1", 5, body).unwrap();
        assert_eq!(
            signature::verify(secret, "msg_1", "5", body, &sig, 5, -1),
            Err(signature::SignatureError::Expired)
        );
    }

    #[test]
    fn check_response_rejects_unknown_decision_words() {
        let ok: CheckResponse =
            serde_json::from_str(r#"{"message_id":7,"decision":"commit"}"#).unwrap();
        assert_eq!(ok.decision, Decision::Commit);
        assert!(
            serde_json::from_str::<CheckResponse>(r#"{"message_id":7,"decision":"yes"}"#).is_err()
        );
    }

    mod signature_properties {
        use super::super::signature::{sign, verify, SignatureError};
        use proptest::prelude::*;

        const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            /// Whatever a caller sends, verification answers and never panics;
            /// it accepts only a header that carries the right signature of
            /// this id, timestamp and body, with a fresh timestamp.
            #[test]
            fn verify_never_panics_and_accepts_only_a_fresh_matching_signature(
                id in ".{0,40}",
                ts in any::<i64>(),
                ts_text in prop_oneof![Just(None), ".{0,24}".prop_map(Some)],
                body in proptest::collection::vec(any::<u8>(), 0..256),
                header in ".{0,200}",
                now in any::<i64>(),
                tolerance in prop_oneof![Just(300i64), any::<i64>()],
            ) {
                let timestamp = ts_text.unwrap_or_else(|| ts.to_string());
                let result = verify(SECRET, &id, &timestamp, &body, &header, now, tolerance);
                if result.is_ok() {
                    let ts: i64 = timestamp.trim().parse().unwrap();
                    let good = sign(SECRET, &id, ts, &body).unwrap();
                    prop_assert!(header.split_whitespace().any(|s| s == good));
                    prop_assert!(tolerance >= 0 && now.abs_diff(ts) <= tolerance as u64);
                }
            }

            /// A signature made for one request verifies for it, and fails
            /// for the same request with any single byte of the body changed.
            #[test]
            fn a_signature_verifies_its_own_request_and_no_altered_body(
                id in "[a-zA-Z0-9_-]{1,40}",
                ts in -4_000_000_000i64..4_000_000_000,
                body in proptest::collection::vec(any::<u8>(), 1..256),
                flip in any::<proptest::sample::Index>(),
                bit in 0u8..8,
            ) {
                let header = sign(SECRET, &id, ts, &body).unwrap();
                prop_assert_eq!(verify(SECRET, &id, &ts.to_string(), &body, &header, ts, 0), Ok(()));
                let mut altered = body.clone();
                let i = flip.index(altered.len());
                altered[i] ^= 1 << bit;
                prop_assert_eq!(
                    verify(SECRET, &id, &ts.to_string(), &altered, &header, ts, 0),
                    Err(SignatureError::Mismatch)
                );
            }
        }
    }
}
