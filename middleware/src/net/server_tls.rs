//! HTTPS served by the service itself (`--tls-cert` / `--tls-key`): rustls
//! with ring, TLS 1.2 and 1.3, HTTP/1.1.
//!
//! The certificate is swappable while the listener runs: every handshake asks
//! [`Certificates`] for the current one, and [`spawn_reloader`] replaces it on
//! SIGHUP and when either file's content changes (read every
//! `--tls-reload-interval`, so a renewal by certbot, cert-manager or a config
//! management run is picked up without a signal). A reload that fails (a file
//! missing, half written, or a key that does not match the certificate) keeps
//! the old certificate, logs an error and counts
//! `trustmsg_tls_cert_reloads_total{result="error"}`: a bad renewal never
//! takes the listener down. Connections already open keep the certificate
//! they were made with.
//!
//! Handshakes run in their own tasks, each under a deadline, and only
//! finished ones reach axum through [`TlsListener`]: a client that connects
//! and says nothing holds up no one else. A failed handshake (plain HTTP
//! sent to the HTTPS port, an untrusted certificate on the client's side)
//! closes that connection only.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::Context;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

/// Longest time a client may take to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The PEM files named by `--tls-cert` and `--tls-key`.
#[derive(Debug, Clone)]
pub(crate) struct TlsFiles {
    /// The certificate chain, leaf first.
    pub(crate) cert: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub(crate) key: PathBuf,
    /// How often to look for a change; None: only on SIGHUP.
    pub(crate) poll: Option<Duration>,
}

/// The certificate every new handshake presents; replaced by a reload.
#[derive(Debug)]
pub(crate) struct Certificates {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
}

impl Certificates {
    /// Loads the files; an unreadable file, a file with nothing usable in it,
    /// or a key that does not belong to the certificate is an error naming
    /// the flag and the file.
    pub(crate) fn load(files: TlsFiles) -> anyhow::Result<Arc<Self>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = read_pair(&files, &provider)?;
        // Present from the start, so an alert on an increase sees the first.
        for result in ["ok", "error"] {
            metrics::counter!("trustmsg_tls_cert_reloads_total", "result" => result).increment(0);
        }
        tracing::info!(cert = %files.cert.display(), key = %files.key.display(), "TLS certificate loaded");
        Ok(Arc::new(Self {
            files,
            provider,
            current: RwLock::new(Arc::new(key)),
        }))
    }

    /// Reads the files again; on success new handshakes present the new
    /// certificate, on failure the old one stays. `why` is for the log.
    pub(crate) fn reload(&self, why: &str) -> bool {
        match read_pair(&self.files, &self.provider) {
            Ok(key) => {
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(key);
                metrics::counter!("trustmsg_tls_cert_reloads_total", "result" => "ok").increment(1);
                tracing::info!(trigger = why, cert = %self.files.cert.display(), "TLS certificate reloaded");
                true
            }
            Err(e) => {
                metrics::counter!("trustmsg_tls_cert_reloads_total", "result" => "error")
                    .increment(1);
                tracing::error!(
                    trigger = why,
                    "TLS certificate reload failed; still serving the previous certificate: {e:#}"
                );
                false
            }
        }
    }

    /// The bytes of both files as they are now (`None` where unreadable), to
    /// tell whether they changed since the last look.
    fn fingerprint(&self) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
        (
            std::fs::read(&self.files.cert).ok(),
            std::fs::read(&self.files.key).ok(),
        )
    }

    /// A server configuration whose handshakes take the current certificate.
    pub(crate) fn server_config(self: &Arc<Self>) -> anyhow::Result<Arc<ServerConfig>> {
        let mut config = ServerConfig::builder_with_provider(self.provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .context("TLS 1.2 and 1.3 with ring")?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }
}

/// Reads and checks a certificate chain and its key.
fn read_pair(files: &TlsFiles, provider: &CryptoProvider) -> anyhow::Result<CertifiedKey> {
    let cert_pem = read("--tls-cert", &files.cert)?;
    let key_pem = read("--tls-key", &files.key)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("--tls-cert {}: not PEM", files.cert.display()))?;
    if chain.is_empty() {
        anyhow::bail!(
            "--tls-cert {}: no certificate in it (expected PEM `-----BEGIN CERTIFICATE-----` blocks, the server's first)",
            files.cert.display()
        );
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        anyhow::anyhow!(
            "--tls-key {}: no private key in it ({e}; expected a PEM `PRIVATE KEY`, \
             `RSA PRIVATE KEY` or `EC PRIVATE KEY` block)",
            files.key.display()
        )
    })?;
    CertifiedKey::from_der(chain, key, provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => anyhow::anyhow!(
            "--tls-key {} is not the key of the certificate in --tls-cert {}",
            files.key.display(),
            files.cert.display()
        ),
        other => anyhow::anyhow!(
            "--tls-cert {} / --tls-key {}: {other}",
            files.cert.display(),
            files.key.display()
        ),
    })
}

fn read(flag: &str, path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {flag} {}", path.display()))
}

/// Reloads `certs` on SIGHUP and when the files change, until `stop`.
pub(crate) fn spawn_reloader(
    certs: Arc<Certificates>,
    stop: CancellationToken,
) -> anyhow::Result<JoinHandle<()>> {
    #[cfg(unix)]
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("listening for SIGHUP")?;
    Ok(tokio::spawn(async move {
        let mut seen = certs.fingerprint();
        // Without polling the tick is never awaited (the guard below).
        let mut tick = tokio::time::interval(certs.files.poll.unwrap_or(Duration::from_secs(3600)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.reset();
        loop {
            #[cfg(unix)]
            let signal = hangup.recv();
            #[cfg(not(unix))]
            let signal = std::future::pending::<Option<()>>();
            tokio::select! {
                () = stop.cancelled() => return,
                _ = signal => {
                    seen = certs.fingerprint();
                    certs.reload("SIGHUP");
                }
                _ = tick.tick(), if certs.files.poll.is_some() => {
                    // One attempt per change: a bad file is reported once,
                    // not every poll, and retried when it changes again.
                    let now = certs.fingerprint();
                    if now != seen {
                        seen = now;
                        certs.reload("the files changed");
                    }
                }
            }
        }
    }))
}

/// Connections whose TLS handshake finished, for `axum::serve`.
pub(crate) struct TlsListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
}

impl TlsListener {
    /// Accepts on `tcp` and runs each handshake in a task of its own. The
    /// accepting stops (and `tcp` closes) when the listener is dropped, which
    /// `axum::serve` does when its graceful shutdown begins.
    pub(crate) fn new(tcp: TcpListener, config: Arc<ServerConfig>) -> std::io::Result<Self> {
        let local = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(64);
        tokio::spawn(accept_loop(tcp, TlsAcceptor::from(config), tx));
        Ok(Self { local, ready })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accept loop only ends when this listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

async fn accept_loop(
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let (stream, peer) = tokio::select! {
            () = ready.closed() => return,
            accepted = tcp.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors and the like: what axum's own
                    // TCP listener does too.
                    tracing::error!("accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let _ = ready.send((tls, peer)).await;
                }
                Ok(Err(e)) => {
                    metrics::counter!("trustmsg_tls_handshake_failures_total").increment(1);
                    tracing::debug!(%peer, "TLS handshake failed: {e}");
                }
                Err(_) => {
                    metrics::counter!("trustmsg_tls_handshake_failures_total").increment(1);
                    tracing::debug!(%peer, "TLS handshake timed out");
                }
            }
        });
    }
}
