//! Kafka that only speaks TLS, for the tests of `security.protocol=SSL`:
//! librdkafka's mock cluster with one broker, behind Debian's `socat` as the
//! TLS terminator (a real TLS implementation, OpenSSL's, that nobody here
//! wrote). The broker advertises the TLS listener as `localhost:<port>`, so
//! every client, whatever address it bootstrapped from, reaches the broker
//! through TLS and verifies the certificate against the name `localhost`.
//! (SASL is a real broker's: [`crate::real_kafka`].)
//!
//! ```text
//! client ──TLS──▶ socat OPENSSL-LISTEN ──▶ mock broker
//! ```

use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use trustmsg_kafka_mock::{MockKafka, TopicReader};

use crate::certs::ServerCert;
use crate::process::free_port;

/// A TLS listener on 127.0.0.1 that forwards each connection, decrypted, to
/// an upstream: `socat OPENSSL-LISTEN`. Stopped (the whole process group,
/// with the children serving connections) when dropped.
pub struct TlsListener {
    port: u16,
    socat: Child,
}

impl TlsListener {
    /// Listens on a free port with `cert`, forwarding to `upstream`, and
    /// waits until it accepts connections.
    pub fn start(cert: &ServerCert, upstream: SocketAddr) -> Self {
        let port = free_port();
        let socat = Command::new("socat")
            .arg(format!(
                "OPENSSL-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,cert={},key={},verify=0",
                cert.cert.display(),
                cert.key.display()
            ))
            .arg(format!("TCP:{upstream}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // Failed handshakes (the tests' untrusted clients, the readiness
            // probe below) are socat's errors, not the test's: kept quiet.
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("socat is installed (Debian package socat; .ci/run installs it)");
        let listener = Self { port, socat };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "socat never listened on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        listener
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        // socat forks a child per connection, in its process group. (procps'
        // kill needs `--` before a negative id, or it signals nothing.)
        let _ = Command::new("kill")
            .args(["-s", "KILL", "--", &format!("-{}", self.socat.id())])
            .status();
        let _ = self.socat.wait();
    }
}

/// A one-broker mock cluster reachable only through TLS.
pub struct TlsKafka {
    /// The cluster: topics and fault injection.
    pub mock: MockKafka,
    tls: TlsListener,
}

impl TlsKafka {
    /// The broker behind a TLS listener presenting `cert`.
    pub fn start(cert: &ServerCert) -> Self {
        let mock = MockKafka::start(1);
        let broker: SocketAddr = mock
            .bootstrap()
            .parse()
            .expect("one mock broker at an IP address");
        let tls = TlsListener::start(cert, broker);
        mock.advertise(1, "localhost", tls.port());
        Self { mock, tls }
    }

    /// `localhost:<port>` of the TLS listener: the only way in.
    pub fn bootstrap(&self) -> String {
        format!("localhost:{}", self.tls.port())
    }

    /// A reader of `topic` from the beginning, connecting with `config`
    /// (`security.protocol`, the CA, credentials).
    pub fn reader(&self, topic: &str, config: &[(&str, &str)]) -> TopicReader {
        TopicReader::with_config(&self.bootstrap(), topic, config)
    }
}
