"""W3C Trace Context: the ``traceparent`` and ``tracestate`` a prepare
carries, explicit or from the current OpenTelemetry span."""

from __future__ import annotations

import re
from typing import Optional

_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?", re.DOTALL)


def parse_traceparent(value: str) -> Optional[str]:
    """The traceparent as trustmsg stores it (version 00), or None when it is
    invalid (trustmsg ignores an invalid one, it never refuses it)."""
    m = _TRACEPARENT.fullmatch(value)
    if m is None:
        return None
    version, trace_id, parent_id, flags, rest = m.groups()
    if version == "ff" or trace_id == "0" * 32 or parent_id == "0" * 16:
        return None
    if version == "00":
        if rest is not None:
            return None
        return value
    # A later version: its first 55 characters, re-emitted as 00 with the sampled flag alone.
    return f"00-{trace_id}-{parent_id}-{int(flags, 16) & 1:02x}"


def current_trace_headers() -> dict[str, str]:
    """The current OpenTelemetry span's ``traceparent``/``tracestate`` when
    opentelemetry-api is installed and a valid span is current, else {}."""
    try:
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:
        return {}
    if not trace.get_current_span().get_span_context().is_valid:
        return {}
    carrier: dict[str, str] = {}
    # W3C Trace Context whatever the application's global propagator is:
    # trustmsg reads traceparent/tracestate.
    TraceContextTextMapPropagator().inject(carrier)
    return {k: v for k, v in carrier.items() if k in ("traceparent", "tracestate")}
