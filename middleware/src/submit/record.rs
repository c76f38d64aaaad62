//! One submitted record read and checked against the contract
//! (`trustmsg_verify_api::submit`, docs/kafka-submit.md): which operation,
//! for which message, with which other headers; malformed records are
//! refused here, with the error the HTTP API would give, before any
//! signature or registration is looked at.

use std::collections::BTreeMap;

use trustmsg_verify_api::submit::{self, Op, Signed};
use trustmsg_verify_api::PrepareRequest;

use crate::intake::IntakeError;

/// A record as read from the submit topic, owned: what it asks for is
/// [`parse`]d from it, and a dead-lettered record is this, as it came.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub(crate) partition: i32,
    pub(crate) offset: i64,
    pub(crate) key: Option<Vec<u8>>,
    /// Every header in the order it came, values as bytes (None: a null).
    pub(crate) headers: Vec<(String, Option<Vec<u8>>)>,
    pub(crate) value: Vec<u8>,
}

/// A well-formed record: one operation on one message, not yet
/// authenticated.
#[derive(Debug, Clone)]
pub(crate) struct Submitted {
    pub(crate) op: Op,
    pub(crate) biz_id: String,
    pub(crate) message_key: String,
    /// A prepare's target topic; empty for a decision.
    pub(crate) topic: String,
    /// A prepare's target record key.
    pub(crate) key: Option<String>,
    /// Every header that is not one of the contract's, by name.
    pub(crate) headers: BTreeMap<String, String>,
    /// `trustmsg-signature`.
    pub(crate) signature: String,
}

impl Submitted {
    /// What its signature covers.
    pub(crate) fn signed<'a>(&'a self, value: &'a [u8]) -> Signed<'a> {
        Signed {
            op: self.op,
            biz_id: &self.biz_id,
            message_key: &self.message_key,
            topic: &self.topic,
            key: self.key.as_deref(),
            headers: &self.headers,
            value,
        }
    }

    /// The prepare it asks for, as the HTTP API's request, with its trace
    /// context (`traceparent`, `tracestate`); the payload is the record's
    /// value, not a field of the request. The delivery-time and trace
    /// headers are read, not carried to the delivered record.
    pub(crate) fn prepare_request(
        &self,
    ) -> Result<(PrepareRequest, Option<String>, Option<String>), IntakeError> {
        let mut headers = self.headers.clone();
        let deliver_at = headers.remove(submit::DELIVER_AT);
        let deliver_after_ms = match headers.remove(submit::DELIVER_AFTER_MS) {
            None => None,
            Some(ms) => Some(ms.parse::<u64>().map_err(|_| {
                IntakeError::invalid(
                    "invalid_deliver_after_ms",
                    format!(
                        "header {} is {ms:?}; it must be a whole number of milliseconds \
                         (0 to {})",
                        submit::DELIVER_AFTER_MS,
                        trustmsg_verify_api::MAX_DELIVERY_DELAY_MS
                    ),
                )
            })?),
        };
        let [traceparent, tracestate] = submit::TRACE_HEADERS.map(|h| headers.remove(h));
        let req = PrepareRequest {
            biz_id: self.biz_id.clone(),
            message_key: self.message_key.clone(),
            topic: self.topic.clone(),
            key: self.key.clone(),
            payload: String::new(),
            payload_encoding: None,
            headers: (!headers.is_empty()).then_some(headers),
            deliver_at,
            deliver_after_ms,
        };
        Ok((req, traceparent, tracestate))
    }
}

fn malformed(why: String) -> IntakeError {
    IntakeError::invalid("invalid_request", why)
}

/// What `r` asks for, or why it is malformed: a contract header missing,
/// repeated, not UTF-8 or out of place, an unknown `trustmsg-op`, a value
/// on a decision, an unsigned record (`unauthorized`).
pub(crate) fn parse(r: &Record) -> Result<Submitted, IntakeError> {
    let mut contract: BTreeMap<&str, String> = BTreeMap::new();
    let mut headers = BTreeMap::new();
    for (name, value) in &r.headers {
        let Some(value) = value else {
            return Err(malformed(format!(
                "header {name:?} has no value (null); every header of a submitted record must \
                 have one, since it is signed"
            )));
        };
        let Ok(value) = std::str::from_utf8(value) else {
            return Err(malformed(format!(
                "the value of header {name:?} is not UTF-8; submitted headers are text, since \
                 they are signed as lines"
            )));
        };
        let repeated = match submit::CONTRACT_HEADERS.iter().find(|h| **h == name) {
            Some(h) => contract.insert(h, value.to_string()).is_some(),
            None => headers.insert(name.clone(), value.to_string()).is_some(),
        };
        if repeated {
            return Err(malformed(format!(
                "header {name:?} appears more than once; each may appear once"
            )));
        }
    }
    let mut take = |name: &str| contract.remove(name);
    let required = |name: &str, v: Option<String>| {
        v.ok_or_else(|| {
            malformed(format!(
                "header {name} is missing; see docs/kafka-submit.md"
            ))
        })
    };
    let op_name = required(submit::OP, take(submit::OP))?;
    let op = Op::parse(&op_name).ok_or_else(|| {
        malformed(format!(
            "header {} is {op_name:?}; it must be prepare, commit or rollback",
            submit::OP
        ))
    })?;
    let biz_id = required(submit::BIZ_ID, take(submit::BIZ_ID))?;
    let message_key = required(submit::MESSAGE_KEY, take(submit::MESSAGE_KEY))?;
    let topic = take(submit::TOPIC);
    let key = take(submit::KEY);
    let signature = take(submit::SIGNATURE);
    let topic = match op {
        Op::Prepare => required(submit::TOPIC, topic)?,
        Op::Commit | Op::Rollback => {
            if let Some(h) = [(submit::TOPIC, &topic), (submit::KEY, &key)]
                .iter()
                .find_map(|(h, v)| v.is_some().then_some(h))
            {
                return Err(malformed(format!(
                    "header {h} belongs to a prepare; a {} names only its message",
                    op.as_str()
                )));
            }
            if !r.value.is_empty() {
                return Err(malformed(format!(
                    "a {} record has no value (got {} bytes); the payload belongs to the prepare",
                    op.as_str(),
                    r.value.len()
                )));
            }
            String::new()
        }
    };
    let signature = signature.ok_or_else(|| {
        IntakeError::Unauthorized(format!(
            "the record is not signed: header {} is missing (v1,<base64 HMAC-SHA256> with the \
             producer's signing secret; see docs/kafka-submit.md)",
            submit::SIGNATURE
        ))
    })?;
    Ok(Submitted {
        op,
        biz_id,
        message_key,
        topic,
        key,
        headers,
        signature,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(headers: &[(&str, Option<&[u8]>)], value: &[u8]) -> Record {
        Record {
            partition: 0,
            offset: 7,
            key: Some(b"k".to_vec()),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.map(<[u8]>::to_vec)))
                .collect(),
            value: value.to_vec(),
        }
    }

    fn refusal(r: &Record) -> (&'static str, String) {
        let e = parse(r).expect_err("refused");
        (e.code(), e.to_string())
    }

    const PREPARE: [(&str, Option<&[u8]>); 5] = [
        ("trustmsg-op", Some(b"prepare")),
        ("trustmsg-biz-id", Some(b"shop")),
        ("trustmsg-message-key", Some(b"order-1")),
        ("trustmsg-topic", Some(b"orders")),
        ("trustmsg-signature", Some(b"v1,x")),
    ];

    #[test]
    fn a_prepare_names_its_message_topic_and_other_headers() {
        let mut h = PREPARE.to_vec();
        h.push(("content-type", Some(b"application/json")));
        h.push(("trustmsg-deliver-after-ms", Some(b"5000")));
        h.push((
            "traceparent",
            Some(b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        ));
        let s = parse(&record(&h, b"{}")).unwrap();
        assert_eq!(
            (s.op, s.biz_id.as_str(), s.message_key.as_str()),
            (Op::Prepare, "shop", "order-1")
        );
        assert_eq!((s.topic.as_str(), s.key.as_deref()), ("orders", None));
        assert_eq!(s.headers.len(), 3, "every other header is signed");
        let (req, tp, ts) = s.prepare_request().unwrap();
        assert_eq!(req.deliver_after_ms, Some(5000));
        assert_eq!(
            req.headers,
            Some(BTreeMap::from([(
                "content-type".into(),
                "application/json".into()
            )])),
            "delivery time and trace context are read, not carried"
        );
        assert!(tp.is_some() && ts.is_none());
    }

    #[test]
    fn malformed_records_are_refused_naming_what_is_wrong() {
        let without = |name: &str| -> Vec<(&str, Option<&[u8]>)> {
            PREPARE
                .iter()
                .copied()
                .filter(|(n, _)| *n != name)
                .collect()
        };
        let (code, why) = refusal(&record(&without("trustmsg-topic"), b""));
        assert_eq!(code, "invalid_request");
        assert!(why.contains("trustmsg-topic is missing"), "{why}");
        let (code, why) = refusal(&record(&without("trustmsg-signature"), b""));
        assert_eq!(code, "unauthorized");
        assert!(why.contains("not signed"), "{why}");
        let mut h = without("trustmsg-op");
        h.push(("trustmsg-op", Some(b"Commit")));
        assert!(refusal(&record(&h, b""))
            .1
            .contains("prepare, commit or rollback"));
        let mut h = PREPARE.to_vec();
        h.push(("x", Some(b"1")));
        h.push(("x", Some(b"2")));
        assert!(refusal(&record(&h, b"")).1.contains("more than once"));
        let mut h = PREPARE.to_vec();
        h.push(("x", None));
        assert!(refusal(&record(&h, b"")).1.contains("null"));
        let mut h = PREPARE.to_vec();
        h.push(("x", Some(&[0xff])));
        assert!(refusal(&record(&h, b"")).1.contains("not UTF-8"));
    }

    #[test]
    fn a_decision_carries_no_topic_key_or_value() {
        let commit: Vec<(&str, Option<&[u8]>)> = vec![
            ("trustmsg-op", Some(b"commit")),
            ("trustmsg-biz-id", Some(b"shop")),
            ("trustmsg-message-key", Some(b"order-1")),
            ("trustmsg-signature", Some(b"v1,x")),
        ];
        let s = parse(&record(&commit, b"")).unwrap();
        assert_eq!((s.op, s.topic.as_str()), (Op::Commit, ""));
        assert!(refusal(&record(&commit, b"x")).1.contains("has no value"));
        let mut h = commit.clone();
        h.push(("trustmsg-key", Some(b"k")));
        assert!(refusal(&record(&h, b"")).1.contains("belongs to a prepare"));
    }
}
