//! `--tls-cert`, `--tls-key` and their reload: HTTPS served by trustmsg.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::parse::duration;

/// `--tls-cert` and `--tls-key`: both or neither.
#[derive(Debug, Clone, Args)]
pub struct TlsArgs {
    /// Serve HTTPS (API, console, /metrics) with this certificate chain: a
    /// PEM file, the server's certificate first, then intermediates. Needs
    /// --tls-key. Reloaded on SIGHUP and when the file changes.
    #[arg(
        long,
        env = "TRUSTMSG_TLS_CERT",
        value_name = "FILE",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,

    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1). Needs
    /// --tls-cert. Reloaded with it.
    #[arg(
        long,
        env = "TRUSTMSG_TLS_KEY",
        value_name = "FILE",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,

    /// How often --tls-cert and --tls-key are read to see whether they
    /// changed (a renewal is then served without a restart); 0s: only on
    /// SIGHUP.
    #[arg(long, env = "TRUSTMSG_TLS_RELOAD_INTERVAL", default_value = "5s", value_parser = duration)]
    pub tls_reload_interval: Duration,
}
