//! The `opentelemetry` feature: prepare carries the current OpenTelemetry
//! context's span as its `traceparent` (and its trace state as `tracestate`)
//! when the message has no explicit trace context. A `tracing` span bridged
//! by `tracing-opentelemetry` is the current context inside
//! `Span::current().context().attach()`, or use [`crate::Message::trace_context`].

use opentelemetry::trace::TraceContextExt;
use trustmsg_verify_api::trace_context::{TRACEPARENT, TRACESTATE};

/// The current span's `traceparent` and `tracestate`; none without a valid span.
pub(crate) fn current_trace_headers() -> Vec<(&'static str, String)> {
    let cx = opentelemetry::Context::current();
    let span = cx.span();
    let sc = span.span_context();
    if !sc.is_valid() {
        return Vec::new();
    }
    let mut h = vec![(
        TRACEPARENT,
        format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        ),
    )];
    let state = sc.trace_state().header();
    if !state.is_empty() {
        h.push((TRACESTATE, state));
    }
    h
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use opentelemetry::Context;

    use super::*;

    #[test]
    fn the_current_span_becomes_the_traceparent() {
        assert!(current_trace_headers().is_empty(), "no span, no header");
        let sc = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            true,
            "shop=1".parse::<TraceState>().unwrap(),
        );
        let _guard = Context::new().with_remote_span_context(sc).attach();
        assert_eq!(
            current_trace_headers(),
            vec![
                (
                    TRACEPARENT,
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_string()
                ),
                (TRACESTATE, "shop=1".to_string()),
            ]
        );
    }
}
