//! The process-wide Prometheus recorder behind `/metrics`.
//!
//! `metrics` has one global recorder per process; tests boot several services
//! in one process, so it is installed once and shared.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the recorder if no other recorder was installed first.
pub(crate) fn install() {
    HANDLE.get_or_init(|| PrometheusBuilder::new().install_recorder().ok());
}

/// The current metrics in Prometheus text format.
pub(crate) fn render() -> String {
    install();
    HANDLE
        .get()
        .and_then(|h| h.as_ref())
        .map(PrometheusHandle::render)
        .unwrap_or_default()
}
