/**
 * OpenTelemetry context on prepare, when the application has
 * `@opentelemetry/api` (an optional peer dependency): the active span becomes
 * the prepare's `traceparent` (and its trace state `tracestate`), so
 * trustmsg's check-back call and the delivered record continue the trace.
 */

interface OtelApi {
  trace: {
    getActiveSpan(): { spanContext(): { traceId: string; spanId: string; traceFlags: number; traceState?: { serialize(): string } } } | undefined;
  };
  isSpanContextValid(sc: { traceId: string; spanId: string }): boolean;
}

let otel: Promise<OtelApi | null> | undefined;

function load(): Promise<OtelApi | null> {
  otel ??= import('@opentelemetry/api').then(
    (m) => m as unknown as OtelApi,
    () => null,
  );
  return otel;
}

/** The trace headers of the active OpenTelemetry span; empty without one (or without the package). */
export async function activeTraceHeaders(): Promise<Record<string, string>> {
  const api = await load();
  const span = api?.trace.getActiveSpan();
  if (!api || !span) return {};
  const sc = span.spanContext();
  if (!api.isSpanContextValid(sc)) return {};
  const headers: Record<string, string> = {
    traceparent: `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, '0')}`,
  };
  const state = sc.traceState?.serialize();
  if (state) headers['tracestate'] = state;
  return headers;
}

/** The message's explicit trace context, else the active span's. */
export async function traceHeaders(m: { traceparent?: string | undefined; tracestate?: string | undefined }): Promise<Record<string, string>> {
  if (m.traceparent !== undefined) {
    const h: Record<string, string> = { traceparent: m.traceparent };
    if (m.tracestate !== undefined) h['tracestate'] = m.tracestate;
    return h;
  }
  return activeTraceHeaders();
}
