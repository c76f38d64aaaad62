//! A [`Message`] as an outbox row, checked as trustmsg checks a prepare
//! wherever the SDK can tell: the same limits and the same error codes as
//! the service's `api/validate.rs`. A row that passes here can still be
//! refused by what only the service knows (`--max-payload-bytes`, the
//! producer's topic allow-list, the Kafka record limit).

use chrono::{DateTime, Utc};
use trustmsg_verify_api::rules::{self, Refusal};
use trustmsg_verify_api::trace_context::{TraceParent, TRACEPARENT};

use super::EnqueueError;
use crate::client::Deliver;
use crate::Message;

/// When the row's message may be sent at the earliest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Due {
    /// At this time (milliseconds).
    At(DateTime<Utc>),
    /// This many milliseconds after the INSERT, by the database's clock.
    AfterMs(u64),
}

/// The columns [`enqueue`](super::enqueue) writes; the others keep their
/// defaults (`content_type` too: a `content-type` header stays a header).
#[derive(Debug, Clone, PartialEq)]
#[allow(unreachable_pub)] // named by the sealed `Target`, reachable by nobody
pub struct Row {
    pub(super) message_key: String,
    pub(super) topic: String,
    pub(super) record_key: Option<String>,
    pub(super) payload: Vec<u8>,
    /// A JSON object of strings; None without headers.
    pub(super) headers: Option<String>,
    pub(super) traceparent: Option<String>,
    pub(super) due: Option<Due>,
}

fn invalid(code: &str, message: String) -> EnqueueError {
    EnqueueError::Invalid {
        code: code.to_string(),
        message,
    }
}

impl From<Refusal> for EnqueueError {
    fn from(r: Refusal) -> Self {
        invalid(r.code, r.message)
    }
}

impl Row {
    /// The row of `message`, or the refusal trustmsg would give it (`now`
    /// bounds `deliver_at`).
    pub(super) fn of(message: &Message, now: DateTime<Utc>) -> Result<Self, EnqueueError> {
        let message_key = message.message_key();
        rules::message_key(message_key)?;
        rules::topic(&message.topic)?;
        rules::record_key(message.key.as_deref())?;
        rules::headers(&message.headers)?;
        let headers = (!message.headers.is_empty())
            .then(|| serde_json::to_string(&message.headers).expect("a map of strings is JSON"));
        // As the service does with a prepare's header: an invalid one is
        // ignored, never refused. Written as the service stores it.
        let traceparent = message
            .trace_headers()
            .into_iter()
            .find(|(name, _)| *name == TRACEPARENT)
            .and_then(|(_, value)| TraceParent::parse(&value))
            .map(|tp| tp.to_string());
        Ok(Self {
            message_key: message_key.to_string(),
            topic: message.topic.clone(),
            record_key: message.key.clone(),
            payload: message.payload_bytes(),
            headers,
            traceparent,
            due: due(message.deliver, now)?,
        })
    }
}

/// The delivery time: at most 7 days ahead of `now` (a delay at most 7
/// days), milliseconds kept, not before 1970.
fn due(deliver: Option<Deliver>, now: DateTime<Utc>) -> Result<Option<Due>, EnqueueError> {
    match deliver {
        None => Ok(None),
        Some(Deliver::After(delay)) => {
            let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
            rules::delivery_delay_ms(ms)?;
            Ok(Some(Due::AfterMs(ms)))
        }
        // The column keeps milliseconds: what is written is what is sent.
        Some(Deliver::At(at)) => Ok(Some(Due::At(rules::delivery_time(at, now)?))),
    }
}

/// A table name the relay can put in its statements unquoted (the
/// service's rule).
pub(super) fn check_table(name: &str) -> Result<(), EnqueueError> {
    Ok(rules::outbox_table(name)?)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chrono::{TimeDelta, TimeZone};
    use trustmsg_verify_api::MAX_DELIVERY_DELAY_MS;

    use super::*;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap()
    }

    fn code(m: &Message) -> String {
        match Row::of(m, now()) {
            Err(EnqueueError::Invalid { code, .. }) => code,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn a_message_becomes_the_row_it_describes() {
        let m = Message::from_bytes("order-1", "orders", &[0, 159, 146, 150])
            .key("customer-7")
            .header("content-type", "application/json")
            .header("source", "shop")
            .trace_context(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                Some("shop=1"),
            );
        let row = Row::of(&m, now()).unwrap();
        assert_eq!(
            row,
            Row {
                message_key: "order-1".into(),
                topic: "orders".into(),
                record_key: Some("customer-7".into()),
                payload: vec![0, 159, 146, 150],
                headers: Some(r#"{"content-type":"application/json","source":"shop"}"#.into()),
                traceparent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()),
                due: None,
            }
        );
        let plain = Row::of(&Message::new("k", "t", "hi"), now()).unwrap();
        assert_eq!((plain.payload, plain.headers), (b"hi".to_vec(), None));
    }

    #[test]
    fn an_invalid_traceparent_is_left_out_not_refused() {
        let m = Message::new("k", "t", "").trace_context("not-a-traceparent", None::<String>);
        assert_eq!(Row::of(&m, now()).unwrap().traceparent, None);
    }

    #[test]
    fn what_trustmsg_would_refuse_is_refused_with_the_apis_code() {
        let m = |key: &str, topic: &str| Message::new(key, topic, "x");
        assert_eq!(code(&m("", "orders")), "invalid_message_key");
        assert_eq!(code(&m(&"k".repeat(129), "orders")), "invalid_message_key");
        assert_eq!(code(&m("a\nb", "orders")), "invalid_message_key");
        assert_eq!(code(&m("k", "")), "invalid_topic");
        assert_eq!(code(&m("k", "..")), "invalid_topic");
        assert_eq!(code(&m("k", "orders/eu")), "invalid_topic");
        assert_eq!(code(&m("k", "t").key("x".repeat(1025))), "invalid_key");
        assert_eq!(
            code(&m("k", "t").header("trustmsg-id", "1")),
            "invalid_headers"
        );
        assert_eq!(
            code(&m("k", "t").header("Trustmsg-X", "1")),
            "invalid_headers"
        );
        assert_eq!(code(&m("k", "t").header("", "1")), "invalid_headers");
        assert_eq!(code(&m("k", "t").header("a", "b\r\n")), "invalid_headers");
        assert_eq!(
            code(&m("k", "t").header("a", "x".repeat(16 * 1024))),
            "invalid_headers"
        );
        let many = (0..65).fold(m("k", "t"), |m, i| m.header(format!("h{i}"), "v"));
        assert_eq!(code(&many), "invalid_headers");
        // At the limits: accepted.
        assert!(Row::of(
            &m(&"k".repeat(128), &"t".repeat(249)).key("x".repeat(1024)),
            now()
        )
        .is_ok());
    }

    #[test]
    fn delivery_is_at_most_seven_days_ahead_in_milliseconds() {
        let week = Duration::from_millis(MAX_DELIVERY_DELAY_MS);
        let m = |d: Duration| Message::new("k", "t", "").deliver_after(d);
        assert_eq!(
            Row::of(&m(week), now()).unwrap().due,
            Some(Due::AfterMs(MAX_DELIVERY_DELAY_MS))
        );
        assert_eq!(
            code(&m(week + Duration::from_millis(1))),
            "invalid_deliver_after_ms"
        );

        let at = |t: DateTime<Utc>| Message::new("k", "t", "").deliver_at(t);
        let latest = now() + TimeDelta::milliseconds(MAX_DELIVERY_DELAY_MS as i64);
        assert_eq!(
            Row::of(&at(latest), now()).unwrap().due,
            Some(Due::At(latest))
        );
        assert_eq!(
            code(&at(latest + TimeDelta::milliseconds(1))),
            "invalid_deliver_at"
        );
        assert_eq!(
            code(&at(Utc.with_ymd_and_hms(1969, 12, 31, 23, 0, 0).unwrap())),
            "invalid_deliver_at"
        );
        let past = Utc.with_ymd_and_hms(2029, 6, 1, 0, 0, 0).unwrap();
        assert_eq!(
            Row::of(&at(past), now()).unwrap().due,
            Some(Due::At(past)),
            "at once"
        );
        let fine = now() + TimeDelta::microseconds(1_234_567);
        assert_eq!(
            Row::of(&at(fine), now()).unwrap().due,
            Some(Due::At(now() + TimeDelta::milliseconds(1_234))),
            "sub-millisecond parts dropped"
        );
    }

    #[test]
    fn table_names_that_would_need_quoting_are_refused() {
        for bad in ["", "1x", "a-b", "a b", "t;drop", &"x".repeat(65)] {
            assert!(check_table(bad).is_err(), "{bad:?}");
        }
        for good in ["trustmsg_outbox", "T1", "_x", &"x".repeat(64)] {
            assert!(check_table(good).is_ok(), "{good:?}");
        }
    }
}
