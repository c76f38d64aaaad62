//! `--otlp-endpoint` and its settings: trustmsg's own spans.

use std::time::Duration;

use clap::Args;

use super::parse::positive_duration;
use super::{ConfigError, ServeArgs};
use crate::net::secret::{quiet, RedactedUrl};

/// Spans of trustmsg's own (prepare, commit, rollback, check-back, send),
/// exported over OTLP/HTTP protobuf. Trace propagation (a prepare's
/// `traceparent` to check-back and the Kafka record) works without them.
#[derive(Debug, Clone, Args)]
pub struct TracingArgs {
    /// Export spans to this OpenTelemetry collector: its OTLP/HTTP base URL
    /// (e.g. `http://127.0.0.1:4318`; spans are POSTed to `<URL>/v1/traces`
    /// as protobuf). Off when not given: no spans are made at all.
    #[arg(long, env = "TRUSTMSG_OTLP_ENDPOINT", hide_env_values = true, value_parser = quiet::<RedactedUrl>())]
    pub otlp_endpoint: Option<RedactedUrl>,

    /// The `service.name` the exported spans carry.
    #[arg(long, env = "TRUSTMSG_OTLP_SERVICE_NAME", default_value = "trustmsg")]
    pub otlp_service_name: String,

    /// How often the batched spans are exported (and at shutdown).
    #[arg(long, env = "TRUSTMSG_OTLP_EXPORT_INTERVAL", default_value = "5s", value_parser = positive_duration)]
    pub otlp_export_interval: Duration,
}

impl ServeArgs {
    /// `--otlp-endpoint`: an http or https URL without query or fragment.
    pub(super) fn otlp(
        &self,
    ) -> Result<Option<crate::observability::trace::OtlpSettings>, ConfigError> {
        let t = &self.tracing;
        let Some(endpoint) = t.otlp_endpoint.clone() else {
            return Ok(None);
        };
        let url = endpoint.expose();
        if !matches!(url.scheme(), "http" | "https")
            || url.query().is_some()
            || url.fragment().is_some()
        {
            return Err(ConfigError(format!(
                "--otlp-endpoint {endpoint} must be the collector's OTLP/HTTP base URL, \
                 http or https without query or fragment (e.g. http://127.0.0.1:4318)"
            )));
        }
        if t.otlp_service_name.trim().is_empty() {
            return Err(ConfigError("--otlp-service-name must not be empty".into()));
        }
        Ok(Some(crate::observability::trace::OtlpSettings {
            endpoint,
            service_name: t.otlp_service_name.clone(),
            interval: t.otlp_export_interval,
        }))
    }
}
