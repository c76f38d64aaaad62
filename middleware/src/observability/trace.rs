//! Trace propagation and trustmsg's own spans (issue 28, "traceable end to
//! end"; `docs/architecture.md`, "Trace propagation").
//!
//! A prepare request's W3C `traceparent` (and `tracestate`) is validated here
//! ([`TraceHeaders`]) and stored with the message; check-back and the forwarder
//! send it on. A malformed `traceparent` is ignored and counted
//! (`trustmsg_traceparent_invalid_total`), never refused.
//!
//! With `--otlp-endpoint` the service also makes spans of its own (prepare,
//! commit, rollback, check-back, send), parented on the message's trace, and
//! exports them over OTLP/HTTP protobuf through the SDK's batch processor:
//! its own thread, a bounded queue (a full queue drops spans, it never
//! blocks a request), reqwest's blocking client on the workspace's rustls.
//! [`shutdown`] flushes it. Without the flag nothing is installed: every
//! span helper is one atomic load that finds nothing, and the propagated
//! headers are the stored ones as they came.
//!
//! The exporter is process-wide (like the metrics recorder): the binary runs
//! one service; a second service in the same process shares the first's.

use std::cell::RefCell;
use std::future::Future;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::HeaderValue;
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId,
    TraceState, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use trustmsg_verify_api::trace_context::{self, TraceParent, TRACEPARENT, TRACESTATE};

/// The installed exporter, if `--otlp-endpoint` was given.
static EXPORT: OnceLock<Export> = OnceLock::new();

struct Export {
    provider: SdkTracerProvider,
    tracer: opentelemetry_sdk::trace::SdkTracer,
}

/// Spans the batch processor holds before it drops new ones.
const QUEUE_SPANS: usize = 8192;
/// Spans in one export request.
const BATCH_SPANS: usize = 512;
/// How long one export request may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the OTLP exporter is told: where, and the service's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpSettings {
    /// `--otlp-endpoint`: the collector's base URL; spans go to `<URL>/v1/traces`.
    pub endpoint: crate::net::secret::RedactedUrl,
    /// `--otlp-service-name`: the `service.name` resource attribute.
    pub service_name: String,
    /// How often the batch processor exports (the SDK's default is 5 s).
    pub interval: Duration,
}

impl OtlpSettings {
    /// `<endpoint>/v1/traces`, as the collectors' OTLP/HTTP receivers expect.
    pub fn traces_url(&self) -> String {
        format!(
            "{}/v1/traces",
            self.endpoint.expose().as_str().trim_end_matches('/')
        )
    }
}

/// Installs the exporter (once per process; a second call keeps the first).
pub(crate) fn install(settings: &OtlpSettings) -> anyhow::Result<()> {
    if EXPORT.get().is_some() {
        tracing::warn!("an OTLP exporter is installed already in this process; it is kept");
        return Ok(());
    }
    crate::net::client_tls::install_crypto_provider();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(settings.traces_url())
        .with_timeout(EXPORT_TIMEOUT)
        .build()?;
    let processor = BatchSpanProcessor::builder(exporter)
        .with_batch_config(
            BatchConfigBuilder::default()
                .with_max_queue_size(QUEUE_SPANS)
                .with_max_export_batch_size(BATCH_SPANS)
                .with_scheduled_delay(settings.interval)
                .build(),
        )
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(
            Resource::builder_empty()
                .with_attribute(KeyValue::new("service.name", settings.service_name.clone()))
                .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
                .build(),
        )
        .build();
    let tracer = provider.tracer("trustmsg");
    if EXPORT.set(Export { provider, tracer }).is_err() {
        tracing::warn!("an OTLP exporter was installed meanwhile; it is kept");
    }
    tracing::info!(endpoint = %settings.endpoint, service = %settings.service_name,
        "exporting spans over OTLP/HTTP");
    Ok(())
}

/// Exports what the batch processor still holds and stops it. Blocking (the
/// exporter's client is), so it runs off the async workers.
pub(crate) async fn shutdown() {
    let Some(export) = EXPORT.get() else {
        return;
    };
    let provider = export.provider.clone();
    let done = tokio::task::spawn_blocking(move || provider.shutdown()).await;
    if let Ok(Err(e)) = done {
        tracing::warn!(error = %e, "flushing the OTLP exporter failed");
    }
}

/// Whether spans are exported (`--otlp-endpoint`).
pub(crate) fn exporting() -> bool {
    EXPORT.get().is_some()
}

/// The W3C trace headers of a request, taken without copying the rest of
/// its headers (a `HeaderValue` clone is a reference count); parsed only
/// when asked.
#[derive(Debug, Default)]
pub(crate) struct TraceHeaders {
    traceparent: Option<HeaderValue>,
    several: bool,
    tracestate: Vec<HeaderValue>,
}

impl<S: Send + Sync> FromRequestParts<S> for TraceHeaders {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let mut values = parts.headers.get_all(TRACEPARENT).iter();
        let Some(first) = values.next() else {
            return Ok(Self::default());
        };
        Ok(Self {
            traceparent: Some(first.clone()),
            several: values.next().is_some(),
            tracestate: parts.headers.get_all(TRACESTATE).iter().cloned().collect(),
        })
    }
}

impl TraceHeaders {
    /// The trace context: the `traceparent` when valid (in version-00
    /// form) and the `tracestate` when valid too. A present but invalid
    /// `traceparent` (or several) is ignored, and with `count` counted in
    /// `trustmsg_traceparent_invalid_total`.
    pub(crate) fn parse(&self, count: bool) -> Option<(TraceParent, Option<String>)> {
        let first = self.traceparent.as_ref()?;
        let parsed = match (first.to_str(), self.several) {
            (Ok(v), false) => TraceParent::parse(v),
            _ => None,
        };
        let Some(tp) = parsed else {
            if count {
                metrics::counter!("trustmsg_traceparent_invalid_total").increment(1);
            }
            tracing::debug!(traceparent = ?first, "ignoring an invalid traceparent");
            return None;
        };
        let mut state = String::new();
        for v in &self.tracestate {
            let Ok(v) = v.to_str() else {
                return Some((tp, None));
            };
            if !state.is_empty() {
                state.push(',');
            }
            state.push_str(v);
        }
        let state = (!state.is_empty())
            .then(|| trace_context::tracestate(&state))
            .flatten();
        Some((tp, state))
    }
}

/// The trace context a prepare stores, from what a producer sent in a
/// Kafka record's headers or an outbox row's column: as over HTTP
/// ([`TraceHeaders::parse`]), an invalid `traceparent` is ignored (and counted in
/// `trustmsg_traceparent_invalid_total`), an invalid `tracestate`, or one
/// without a valid `traceparent`, dropped; neither refuses the message.
pub(crate) fn stored_context(
    traceparent: Option<String>,
    tracestate: Option<String>,
) -> (Option<String>, Option<String>) {
    let traceparent = traceparent.and_then(|v| {
        let parsed = TraceParent::parse(&v);
        if parsed.is_none() {
            metrics::counter!("trustmsg_traceparent_invalid_total").increment(1);
        }
        parsed.map(|tp| tp.to_string())
    });
    let tracestate = tracestate
        .filter(|_| traceparent.is_some())
        .and_then(|v| trace_context::tracestate(&v));
    (traceparent, tracestate)
}

/// Makes `trustmsg_traceparent_invalid_total` show (at 0) before the first
/// invalid `traceparent`, so an alert rule on it has a series.
pub(crate) fn describe_metrics() {
    metrics::counter!("trustmsg_traceparent_invalid_total").increment(0);
}

/// A point a request's write passes, shown as an event of its span (the
/// stage budget of `docs/performance.md`: how long the request waited for
/// its batch, and how long the batch took).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// The group commit began writing the batch the request's write is in.
    WriteBegan,
    /// The request got its write's answer.
    Written,
}

impl Stage {
    fn name(self) -> &'static str {
        match self {
            Stage::WriteBegan => "trustmsg.write.began",
            Stage::Written => "trustmsg.write.done",
        }
    }
}

/// The stages a request passed, noted by [`stage`] while [`stages`] runs it.
pub(crate) type Stages = Vec<(Stage, SystemTime)>;

tokio::task_local! {
    static STAGES: RefCell<Stages>;
}

/// Runs `request`, noting the [`Stage`]s it passes when spans are exported
/// (none otherwise, for nothing).
pub(crate) async fn stages<F: Future>(request: F) -> (F::Output, Stages) {
    if !exporting() {
        return (request.await, Stages::new());
    }
    STAGES
        .scope(RefCell::new(Stages::new()), async {
            let out = request.await;
            (out, STAGES.with(RefCell::take))
        })
        .await
}

/// Notes that the current request passed `stage` at the time `at` gives;
/// nothing outside [`stages`], where `at` is not even asked (no clock read
/// on a request whose spans are not exported).
pub(crate) fn stage(stage: Stage, at: impl FnOnce() -> SystemTime) {
    let _ = STAGES.try_with(|s| s.borrow_mut().push((stage, at())));
}

/// A span of ours; does nothing when spans are not exported.
#[must_use = "end the span"]
pub(crate) struct OwnSpan(Option<opentelemetry_sdk::trace::Span>);

impl OwnSpan {
    /// Starts `name` as a child of `parent` (a root without one), at `start`
    /// (now when None). Nothing happens unless spans are exported.
    pub(crate) fn start(
        name: &'static str,
        kind: SpanKind,
        parent: Option<(&TraceParent, Option<&str>)>,
        start: Option<SystemTime>,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Self {
        let Some(export) = EXPORT.get() else {
            return Self(None);
        };
        let cx = match parent {
            Some((tp, state)) => Context::new().with_remote_span_context(SpanContext::new(
                TraceId::from_bytes(tp.trace_id),
                SpanId::from_bytes(tp.parent_id),
                TraceFlags::new(tp.flags),
                true,
                state
                    .and_then(|s| s.parse::<TraceState>().ok())
                    .unwrap_or_default(),
            )),
            None => Context::new(),
        };
        let mut builder = export
            .tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attributes());
        if let Some(t) = start {
            builder = builder.with_start_time(t);
        }
        Self(Some(export.tracer.build_with_context(builder, &cx)))
    }

    /// Starts `name` as a child of a stored `traceparent`; nothing for a
    /// message without one.
    pub(crate) fn child_of_stored(
        name: &'static str,
        kind: SpanKind,
        traceparent: Option<&str>,
        tracestate: Option<&str>,
        start: Option<SystemTime>,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Self {
        if !exporting() {
            return Self(None);
        }
        match traceparent.and_then(TraceParent::parse) {
            Some(tp) => Self::start(name, kind, Some((&tp, tracestate)), start, attributes),
            None => Self(None),
        }
    }

    /// This span as the parent to propagate: its trace, its span id.
    pub(crate) fn traceparent(&self) -> Option<TraceParent> {
        let cx = self.0.as_ref()?.span_context();
        cx.is_valid().then(|| TraceParent {
            trace_id: cx.trace_id().to_bytes(),
            parent_id: cx.span_id().to_bytes(),
            flags: cx.trace_flags().to_u8(),
        })
    }

    /// The `traceparent` to send on for a message whose stored one is
    /// `stored`: this span's when there is one, else `stored` as it came.
    pub(crate) fn propagate(&self, stored: Option<&str>) -> Option<String> {
        stored?;
        self.traceparent()
            .map(|tp| tp.to_string())
            .or_else(|| stored.map(str::to_string))
    }

    /// Marks the span failed with `why`.
    pub(crate) fn fail(&mut self, why: impl std::fmt::Display) {
        if let Some(s) = &mut self.0 {
            s.set_status(Status::error(why.to_string()));
        }
    }

    /// Adds `stages` as events, at their times.
    pub(crate) fn events(&mut self, stages: Stages) {
        if let Some(s) = &mut self.0 {
            for (stage, at) in stages {
                s.add_event_with_timestamp(stage.name(), at, Vec::new());
            }
        }
    }

    /// Adds an attribute.
    pub(crate) fn set(&mut self, attribute: impl FnOnce() -> KeyValue) {
        if let Some(s) = &mut self.0 {
            s.set_attribute(attribute());
        }
    }

    /// Ends the span (it is exported with the next batch).
    pub(crate) fn end(self) {
        if let Some(mut s) = self.0 {
            s.end();
        }
    }
}
