//! Prepare, commit and rollback submitted as Kafka records (issue 29, the
//! Kafka way in): the header names of the contract and the record signature,
//! shared by the service that checks records and by producers that sign them.
//!
//! A record's signature is `v1,` + base64(HMAC-SHA256(key, S)), where the key
//! is the base64 part of the producer's `whsec_…` signing secret (the one its
//! registration returned, as for check-back calls) and S is the UTF-8 lines
//! `op`, `biz_id`, `message_key`, `topic`, `key` (empty when absent), then
//! each other header as `name=value` in byte order of the names, each line
//! ending in `\n`, followed by the record value's bytes.
//!
//! Because S is made of lines, a field or header that contains a line break,
//! or a header name that contains `=`, could make two different records sign
//! alike: such a record is refused before any MAC is computed
//! ([`SubmitSignatureError::Ambiguous`]).
//!
//! ```
//! use std::collections::BTreeMap;
//! use trustmsg_verify_api::submit::{self, Op, Signed};
//!
//! let secret = "whsec_dHJ1c3Rtc2ctc3VibWl0LXRlc3Qta2V5LTMyYnl0ZXM=";
//! let headers = BTreeMap::from([("content-type".to_string(), "application/json".to_string())]);
//! let record = Signed {
//!     op: Op::Prepare,
//!     biz_id: "shop",
//!     message_key: "order-42",
//!     topic: "orders",
//!     key: Some("customer-7"),
//!     headers: &headers,
//!     value: br#"{"total":42}"#,
//! };
//! let signature = submit::sign(secret, &record).unwrap();
//! assert!(submit::verify(secret, &record, &signature).is_ok());
//! ```

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::signature::{matches_one, secret_key, SignatureError};

/// `prepare`, `commit` or `rollback`.
pub const OP: &str = "trustmsg-op";
/// The producer's id.
pub const BIZ_ID: &str = "trustmsg-biz-id";
/// The producer's message key.
pub const MESSAGE_KEY: &str = "trustmsg-message-key";
/// A prepare's target topic.
pub const TOPIC: &str = "trustmsg-topic";
/// A prepare's target record key (absent: a record without a key).
pub const KEY: &str = "trustmsg-key";
/// `v1,<base64 HMAC-SHA256>` of the record (see the module docs).
pub const SIGNATURE: &str = "trustmsg-signature";
/// On a dead-lettered record: the error code, as the HTTP API's.
pub const ERROR_CODE: &str = "trustmsg-error-code";
/// On a dead-lettered record: what went wrong, for a person.
pub const ERROR: &str = "trustmsg-error";
/// The dead-letter topic is the submit topic's name with this suffix.
pub const DLQ_SUFFIX: &str = ".dlq";
/// A prepare's delivery time, as the HTTP API's `deliver_at` (RFC 3339).
/// Not one of [`CONTRACT_HEADERS`]: it is signed as `name=value` among the
/// other headers, and read by trustmsg instead of carried to the record.
pub const DELIVER_AT: &str = "trustmsg-deliver-at";
/// A prepare's delay in milliseconds, as the HTTP API's `deliver_after_ms`
/// (signed and read as [`DELIVER_AT`] is).
pub const DELIVER_AFTER_MS: &str = "trustmsg-deliver-after-ms";
/// The W3C trace context headers of a record (`traceparent`, `tracestate`)
/// are its trace context, as the HTTP API's request headers are: signed as
/// other headers, stored with the message and sent on with its check-back
/// calls and its Kafka record.
pub const TRACE_HEADERS: [&str; 2] = ["traceparent", "tracestate"];

/// The headers of the contract: every other header of a prepare is the
/// delivered record's, and is signed as `name=value`.
pub const CONTRACT_HEADERS: [&str; 6] = [OP, BIZ_ID, MESSAGE_KEY, TOPIC, KEY, SIGNATURE];

/// What a submitted record asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Store the message, PREPARED.
    Prepare,
    /// Commit it.
    Commit,
    /// Roll it back.
    Rollback,
}

impl Op {
    /// The header value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prepare => "prepare",
            Self::Commit => "commit",
            Self::Rollback => "rollback",
        }
    }

    /// The operation a `trustmsg-op` value names, exactly (lower case).
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "prepare" => Some(Self::Prepare),
            "commit" => Some(Self::Commit),
            "rollback" => Some(Self::Rollback),
            _ => None,
        }
    }
}

/// What a record's signature covers.
#[derive(Debug, Clone, Copy)]
pub struct Signed<'a> {
    /// `trustmsg-op`.
    pub op: Op,
    /// `trustmsg-biz-id`.
    pub biz_id: &'a str,
    /// `trustmsg-message-key`.
    pub message_key: &'a str,
    /// `trustmsg-topic` (empty for a commit or rollback).
    pub topic: &'a str,
    /// `trustmsg-key`, if any.
    pub key: Option<&'a str>,
    /// Every header that is not one of [`CONTRACT_HEADERS`].
    pub headers: &'a BTreeMap<String, String>,
    /// The record's value (empty for a commit or rollback).
    pub value: &'a [u8],
}

/// Why a record's signature was not made or not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubmitSignatureError {
    /// The secret is not `whsec_<base64>`, or no `v1,` signature matched.
    Signature(SignatureError),
    /// A field or header holds a line break, or a header name holds `=`:
    /// the signed lines would not say which record was signed.
    Ambiguous(String),
}

impl std::fmt::Display for SubmitSignatureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Signature(e) => e.fmt(f),
            Self::Ambiguous(what) => write!(
                f,
                "{what}: a signed field may not hold a line break, nor a header name an `=`"
            ),
        }
    }
}

impl std::error::Error for SubmitSignatureError {}

impl From<SignatureError> for SubmitSignatureError {
    fn from(e: SignatureError) -> Self {
        Self::Signature(e)
    }
}

/// S, the bytes the signature is computed over (see the module docs).
pub fn signing_input(r: &Signed<'_>) -> Result<Vec<u8>, SubmitSignatureError> {
    let fields = [
        (BIZ_ID, r.biz_id),
        (MESSAGE_KEY, r.message_key),
        (TOPIC, r.topic),
        (KEY, r.key.unwrap_or_default()),
    ];
    let mut s = Vec::with_capacity(r.value.len() + 256);
    s.extend_from_slice(r.op.as_str().as_bytes());
    s.push(b'\n');
    for (name, value) in fields {
        line_safe(name, value)?;
        s.extend_from_slice(value.as_bytes());
        s.push(b'\n');
    }
    for (name, value) in r.headers {
        if name.contains('=') {
            return Err(SubmitSignatureError::Ambiguous(format!(
                "header name {name:?}"
            )));
        }
        line_safe(&format!("header {name:?}"), name)?;
        line_safe(&format!("header {name:?}"), value)?;
        s.extend_from_slice(name.as_bytes());
        s.push(b'=');
        s.extend_from_slice(value.as_bytes());
        s.push(b'\n');
    }
    s.extend_from_slice(r.value);
    Ok(s)
}

fn line_safe(what: &str, value: &str) -> Result<(), SubmitSignatureError> {
    if value.contains(['\n', '\r']) {
        return Err(SubmitSignatureError::Ambiguous(what.to_string()));
    }
    Ok(())
}

fn mac(key: &[u8], input: &[u8]) -> Vec<u8> {
    let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(input);
    m.finalize().into_bytes().to_vec()
}

/// The `trustmsg-signature` header value for this record.
pub fn sign(secret: &str, r: &Signed<'_>) -> Result<String, SubmitSignatureError> {
    let key = secret_key(secret)?;
    Ok(format!(
        "v1,{}",
        STANDARD.encode(mac(&key, &signing_input(r)?))
    ))
}

/// Checks a record: one of the `v1,` signatures in `header` (several may be
/// space-separated, which is how a secret is rotated) must match.
pub fn verify(secret: &str, r: &Signed<'_>, header: &str) -> Result<(), SubmitSignatureError> {
    let expected = mac(&secret_key(secret)?, &signing_input(r)?);
    Ok(matches_one(header, &expected)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `whsec_` + base64 of the 32 bytes `trustmsg-submit-test-key-32bytes`.
    const SECRET: &str = "whsec_dHJ1c3Rtc2ctc3VibWl0LXRlc3Qta2V5LTMyYnl0ZXM=";

    fn headers() -> BTreeMap<String, String> {
        // Inserted out of order: the signature takes them in byte order.
        BTreeMap::from([
            ("x-trace".to_string(), "abc".to_string()),
            ("content-type".to_string(), "application/json".to_string()),
        ])
    }

    fn prepare(headers: &BTreeMap<String, String>) -> Signed<'_> {
        Signed {
            op: Op::Prepare,
            biz_id: "shop",
            message_key: "order-42",
            topic: "orders",
            key: Some("customer-7"),
            headers,
            value: br#"{"total":42}"#,
        }
    }

    #[test]
    fn the_signature_is_the_documented_hmac_of_the_documented_lines() {
        let h = headers();
        let input = signing_input(&prepare(&h)).unwrap();
        assert_eq!(
            input,
            b"prepare\nshop\norder-42\norders\ncustomer-7\ncontent-type=application/json\nx-trace=abc\n{\"total\":42}"
        );
        // Computed apart, with Python's hmac and base64 modules.
        assert_eq!(
            sign(SECRET, &prepare(&h)).unwrap(),
            "v1,nWddERxMkmGOlt/7VEKEj+rBzR5WQOTHZXQmCAN+WbU="
        );
        let empty = BTreeMap::new();
        let commit = Signed {
            op: Op::Commit,
            biz_id: "shop",
            message_key: "order-42",
            topic: "",
            key: None,
            headers: &empty,
            value: b"",
        };
        assert_eq!(
            sign(SECRET, &commit).unwrap(),
            "v1,ob5cjANGtqk8mNHnWtEbXUE2ovZlrPcFYgVWQRLNDVs="
        );
    }

    #[test]
    fn a_record_changed_in_any_signed_part_no_longer_verifies() {
        let h = headers();
        let good = sign(SECRET, &prepare(&h)).unwrap();
        assert!(verify(SECRET, &prepare(&h), &good).is_ok());
        assert!(verify(SECRET, &prepare(&h), &format!("v1,AAAA {good}")).is_ok());

        let mut other_headers = h.clone();
        other_headers.insert("x-trace".into(), "abd".into());
        let changed = [
            Signed {
                op: Op::Rollback,
                ..prepare(&h)
            },
            Signed {
                biz_id: "shop2",
                ..prepare(&h)
            },
            Signed {
                message_key: "order-43",
                ..prepare(&h)
            },
            Signed {
                topic: "orders2",
                ..prepare(&h)
            },
            Signed {
                key: None,
                ..prepare(&h)
            },
            Signed {
                value: br#"{"total":43}"#,
                ..prepare(&h)
            },
            prepare(&other_headers),
        ];
        for r in changed {
            assert_eq!(
                verify(SECRET, &r, &good),
                Err(SubmitSignatureError::Signature(SignatureError::Mismatch)),
                "{r:?}"
            );
        }
        let other_secret = "whsec_b3RoZXIta2V5";
        assert!(verify(other_secret, &prepare(&h), &good).is_err());
        assert_eq!(
            verify("whsec_%%%", &prepare(&h), &good),
            Err(SubmitSignatureError::Signature(SignatureError::BadSecret))
        );
    }

    #[test]
    fn line_breaks_and_equals_signs_that_would_make_two_records_sign_alike_are_refused() {
        // `a=1\nb=2` as one header would sign like two headers a=1 and b=2.
        let smuggled = BTreeMap::from([("a".to_string(), "1\nb=2".to_string())]);
        let e = sign(SECRET, &prepare(&smuggled)).unwrap_err();
        assert!(matches!(e, SubmitSignatureError::Ambiguous(_)), "{e}");
        let named = BTreeMap::from([("a=1".to_string(), "x".to_string())]);
        assert!(sign(SECRET, &prepare(&named)).is_err());
        let h = headers();
        let key = Signed {
            message_key: "k\r",
            ..prepare(&h)
        };
        assert!(sign(SECRET, &key).is_err());
        // The value is last and may hold anything.
        let value = Signed {
            value: b"line 1\nline 2\n",
            ..prepare(&h)
        };
        assert!(sign(SECRET, &value).is_ok());
    }

    #[test]
    fn operations_are_named_exactly() {
        for op in [Op::Prepare, Op::Commit, Op::Rollback] {
            assert_eq!(Op::parse(op.as_str()), Some(op));
        }
        assert_eq!(Op::parse("Commit"), None);
        assert_eq!(Op::parse(""), None);
    }
}
