//! Logs for tests: written to the test's captured output, so they show only
//! when a test fails. `TRUSTMSG_LOG` overrides the filter.

/// Installs the subscriber once per test binary; later calls do nothing.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TRUSTMSG_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,trustmsg=info")),
        )
        .with_test_writer()
        .try_init();
}
