//! A source row read as a prepare: checked as the HTTP API checks one (the
//! same validation, limits and topic allow-list), so that a row trustmsg
//! would refuse is failed with the API's own reason.

use std::collections::BTreeMap;
use std::time::Duration;

use trustmsg_verify_api::{PayloadEncoding, PrepareRequest};

use super::source::SourceRow;
use crate::intake::Intake;
use crate::store::{NewMessage, Producer};

/// A relayed message's first check-back is put this far off. The relay
/// prepares and commits it back to back; if it stops in between, the row
/// is still pending in the source and whoever relays it next commits it.
/// Only a source that stays away this long leaves the verifier to ask.
pub(crate) const RELAYED_FIRST_VERIFY_AFTER: Duration = Duration::from_secs(3600);

/// The record header a row's `content_type` becomes.
pub(crate) const CONTENT_TYPE_HEADER: &str = "content-type";

fn utf8(column: &str, bytes: Vec<u8>) -> Result<String, String> {
    String::from_utf8(bytes).map_err(|_| format!("{column} is not valid UTF-8"))
}

/// The row's fields as a prepare request, or why it can never be one.
fn request(biz_id: &str, row: &SourceRow) -> Result<(PrepareRequest, Option<String>), String> {
    let message_key = utf8("message_key", row.message_key.clone())?;
    let topic = utf8("topic", row.topic.clone())?;
    let key = row
        .record_key
        .clone()
        .map(|k| utf8("record_key", k))
        .transpose()?;
    let mut headers: BTreeMap<String, String> = match &row.headers {
        None => BTreeMap::new(),
        Some(raw) => {
            let value: serde_json::Value = serde_json::from_slice(raw).map_err(|e| {
                format!("headers is not JSON ({e}): write a JSON object of strings")
            })?;
            match value {
                serde_json::Value::Null => BTreeMap::new(),
                serde_json::Value::Object(map) => map
                    .into_iter()
                    .map(|(k, v)| match v {
                        serde_json::Value::String(s) => Ok((k, s)),
                        other => Err(format!(
                            "headers.{k} is {other}, not a string: headers is a JSON object of \
                             strings"
                        )),
                    })
                    .collect::<Result<_, _>>()?,
                other => return Err(format!("headers is {other}, not a JSON object of strings")),
            }
        }
    };
    if let Some(ct) = &row.content_type {
        let ct = utf8("content_type", ct.clone())?;
        let clash = headers
            .iter()
            .find(|(k, v)| k.eq_ignore_ascii_case(CONTENT_TYPE_HEADER) && **v != ct);
        if let Some((k, v)) = clash {
            return Err(format!(
                "content_type {ct:?} and the header {k:?} = {v:?} disagree: set one of them"
            ));
        }
        headers.retain(|k, _| !k.eq_ignore_ascii_case(CONTENT_TYPE_HEADER));
        headers.insert(CONTENT_TYPE_HEADER.to_string(), ct);
    }
    let traceparent = row
        .traceparent
        .clone()
        .and_then(|t| String::from_utf8(t).ok());
    let req = PrepareRequest {
        biz_id: biz_id.to_string(),
        message_key,
        topic,
        key,
        // The bytes are passed apart (`new_message`'s payload); this field is not read.
        payload: String::new(),
        payload_encoding: Some(PayloadEncoding::Base64),
        headers: (!headers.is_empty()).then_some(headers),
        deliver_at: row.deliver_at.map(|t| t.to_rfc3339()),
        deliver_after_ms: None,
    };
    Ok((req, traceparent))
}

/// The row as a message of `producer`, checked as the HTTP API checks a
/// prepare: Err is the refusal (the row's `fail_reason`).
pub(crate) fn message(
    intake: &Intake,
    producer: &Producer,
    row: &SourceRow,
) -> Result<NewMessage, String> {
    let (req, traceparent) = request(&producer.biz_id, row)?;
    let (traceparent, tracestate) = crate::observability::trace::stored_context(traceparent, None);
    let mut new = intake
        .new_message(
            Some(producer),
            req,
            Some(row.payload.clone()),
            traceparent,
            tracestate,
        )
        .map_err(|e| format!("{}: {e}", e.code()))?;
    new.first_verify_after = new.first_verify_after.max(RELAYED_FIRST_VERIFY_AFTER);
    Ok(new)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> SourceRow {
        SourceRow {
            id: 7,
            message_key: b"order-1".to_vec(),
            topic: b"orders".to_vec(),
            record_key: Some(b"customer-9".to_vec()),
            payload: vec![0, 159, 146, 150],
            headers: Some(br#"{"source":"shop"}"#.to_vec()),
            content_type: Some(b"application/octet-stream".to_vec()),
            deliver_at: None,
            traceparent: None,
            retry_count: 0,
        }
    }

    #[test]
    fn a_row_becomes_the_prepare_it_describes_with_its_content_type_as_a_header() {
        let (req, _) = request("shop", &row()).unwrap();
        assert_eq!(req.message_key, "order-1");
        assert_eq!(req.topic, "orders");
        assert_eq!(req.key.as_deref(), Some("customer-9"));
        let h = req.headers.unwrap();
        assert_eq!(h["source"], "shop");
        assert_eq!(h["content-type"], "application/octet-stream");
    }

    #[test]
    fn headers_that_are_not_an_object_of_strings_are_refused_by_name() {
        for (raw, says) in [
            (&b"[1]"[..], "not a JSON object"),
            (b"{\"a\":1}", "headers.a is 1"),
            (b"{not json", "not JSON"),
        ] {
            let mut r = row();
            r.headers = Some(raw.to_vec());
            let e = request("shop", &r).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn text_columns_that_are_not_utf8_are_refused_by_name() {
        let mut r = row();
        r.topic = vec![0xff, 0xfe];
        assert_eq!(request("shop", &r).unwrap_err(), "topic is not valid UTF-8");
    }

    #[test]
    fn a_content_type_that_disagrees_with_a_header_is_refused() {
        let mut r = row();
        r.headers = Some(br#"{"Content-Type":"text/plain"}"#.to_vec());
        assert!(request("shop", &r).unwrap_err().contains("disagree"));
    }
}
