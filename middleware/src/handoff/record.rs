//! The size of the Kafka record a message becomes, counted the way
//! librdkafka counts it against `message.max.bytes`. Prepare refuses a
//! message whose record would be over the limit (the forwarder could never
//! send it), and start-up refuses a `--max-payload-bytes` whose largest
//! message would not fit `--kafka-message-max-bytes`.

use std::collections::BTreeMap;

use trustmsg_verify_api::kafka_headers;
use trustmsg_verify_api::trace_context::{TRACEPARENT_LEN, TRACESTATE_MAX_LEN};

/// The framing librdkafka counts on top of key, value and headers when it
/// checks a record against `message.max.bytes` (`RD_KAFKAP_MESSAGE_V2_MAX_OVERHEAD`:
/// length, attributes, timestamp and offset deltas, key and value lengths and
/// header count, each at its widest).
const RECORD_OVERHEAD: usize = 36;

/// The most digits a message id (a `u64`) has: at prepare the id is not known
/// yet, so its header is counted at its longest.
const MAX_MESSAGE_ID_DIGITS: usize = 20;

/// Bytes of a zigzag varint of `n`, as Kafka encodes header lengths.
fn varint_len(n: usize) -> usize {
    let mut v = (n as u64) << 1;
    let mut len = 1;
    while v >= 0x80 {
        v >>= 7;
        len += 1;
    }
    len
}

/// What one header adds to a record.
fn header_len(name: usize, value: usize) -> usize {
    varint_len(name) + name + varint_len(value) + value
}

/// The size librdkafka checks against `message.max.bytes` for the record
/// the forwarder's sink builds from this message: the same arithmetic as
/// librdkafka's `rd_kafka_msg_max_wire_size`, so a message whose size is at
/// most the limit is never refused as too large. `message_id_len` is the
/// length of the id header's value; `None` counts it at its longest.
/// `traced`: the message carries a trace context, whose `traceparent` and
/// `tracestate` headers are counted at their longest (55 and 512 bytes; the
/// forwarder may send its own span as the parent, always 55). They replace
/// user headers of the same names, which are counted too: never under.
pub(crate) fn record_size(
    key: Option<&str>,
    payload_len: usize,
    headers: &BTreeMap<String, String>,
    biz_id: &str,
    message_key: &str,
    message_id_len: Option<usize>,
    traced: bool,
) -> usize {
    let user: usize = headers
        .iter()
        .map(|(k, v)| header_len(k.len(), v.len()))
        .sum();
    let own = header_len(
        kafka_headers::MESSAGE_ID.len(),
        message_id_len.unwrap_or(MAX_MESSAGE_ID_DIGITS),
    ) + header_len(kafka_headers::BIZ_ID.len(), biz_id.len())
        + header_len(kafka_headers::MESSAGE_KEY.len(), message_key.len());
    let trace = if traced {
        header_len(kafka_headers::TRACEPARENT.len(), TRACEPARENT_LEN)
            + header_len(kafka_headers::TRACESTATE.len(), TRACESTATE_MAX_LEN)
    } else {
        0
    };
    RECORD_OVERHEAD + trace + key.map_or(0, str::len) + payload_len + user + own
}
