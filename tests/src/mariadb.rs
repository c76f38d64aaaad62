//! A MariaDB server of the test's own: `mariadb-install-db` into a temporary
//! directory and `mariadbd` on a free port of 127.0.0.1, so a test can kill
//! it with SIGKILL and start it again on the same data (InnoDB recovers what
//! was committed) without touching the shared server every other test uses.
//! [`PrivateMariaDb::start_with_tls`] starts one that speaks only TLS.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sqlx::MySql;

use crate::certs::ServerCert;
use crate::private_server::PrivateServer;

/// `name` from the PATH or the usual Debian places.
fn program(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/bin".into()])
        .map(|dir| dir.join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!("{name} is not installed: a private MariaDB needs mariadb-server (.ci/run installs it)")
        })
}

/// A private `mariadbd`; killed (and its data deleted) when dropped.
pub struct PrivateMariaDb {
    server: PrivateServer,
    /// With TLS: its certificate and the CA file that signed it.
    tls: Option<(ServerCert, PathBuf)>,
}

impl PrivateMariaDb {
    /// Creates a data directory and starts the server on a free port;
    /// returns once it accepts connections.
    pub async fn start() -> Self {
        Self::start_as(None).await
    }

    /// [`PrivateMariaDb::start`] with `cert` (`--ssl-cert`, `--ssl-key`,
    /// `--ssl-ca` = `ca`) and `--require-secure-transport=ON`: a client that
    /// does not speak TLS is refused.
    pub async fn start_with_tls(cert: &ServerCert, ca: &Path) -> Self {
        Self::start_as(Some((cert.clone(), ca.to_path_buf()))).await
    }

    async fn start_as(tls: Option<(ServerCert, PathBuf)>) -> Self {
        // The bootstrap server can fail for a moment on a loaded machine (a
        // kernel AIO context not there yet, say): a fresh directory is tried
        // again, and a last failure shows what the tool said.
        let mut attempt = 0;
        let dir = loop {
            attempt += 1;
            let dir = tempfile::tempdir().expect("a temporary directory");
            let out = Command::new(program("mariadb-install-db"))
                .arg("--no-defaults")
                .arg(format!("--datadir={}", dir.path().join("data").display()))
                .args([
                    "--auth-root-authentication-method=normal",
                    "--user=root",
                    "--skip-test-db",
                ])
                .stdin(Stdio::null())
                .output()
                .expect("run mariadb-install-db");
            if out.status.success() {
                break dir;
            }
            let said = String::from_utf8_lossy(&out.stderr);
            let lines: Vec<&str> = said.lines().collect();
            let said = lines[lines.len().saturating_sub(20)..].join("\n");
            assert!(
                attempt < 3,
                "mariadb-install-db failed {attempt} times, last: {}: {said}",
                out.status
            );
            eprintln!(
                "mariadb-install-db failed ({}), trying again: {said}",
                out.status
            );
            std::thread::sleep(std::time::Duration::from_secs(1));
        };
        let mut db = Self {
            server: PrivateServer::new(dir, "mariadbd", "error.log"),
            tls,
        };
        db.spawn().await;
        db
    }

    /// `mysql://root@127.0.0.1:<port>/<database>`.
    pub fn url(&self, database: &str) -> String {
        format!("mysql://root@127.0.0.1:{}/{database}", self.server.port)
    }

    /// The port it listens on (of 127.0.0.1).
    pub fn port(&self) -> u16 {
        self.server.port
    }

    /// The server's error log (what it said about crashes and recovery).
    pub fn error_log(&self) -> PathBuf {
        self.server.log()
    }

    fn path(&self, name: &str) -> String {
        self.server.path(name).display().to_string()
    }

    async fn spawn(&mut self) {
        let tls: Vec<String> = match &self.tls {
            None => Vec::new(),
            Some((cert, ca)) => vec![
                format!("--ssl-cert={}", cert.cert.display()),
                format!("--ssl-key={}", cert.key.display()),
                format!("--ssl-ca={}", ca.display()),
                "--require-secure-transport=ON".into(),
            ],
        };
        let mut command = Command::new(program("mariadbd"));
        command
            .arg("--no-defaults")
            .arg(format!("--datadir={}", self.path("data")))
            .arg(format!("--port={}", self.server.port))
            .arg(format!("--socket={}", self.path("mysqld.sock")))
            .arg(format!("--pid-file={}", self.path("mysqld.pid")))
            .arg(format!("--log-error={}", self.path("error.log")))
            .args([
                "--bind-address=127.0.0.1",
                "--user=root",
                "--skip-name-resolve",
                "--max-connections=1000",
                "--innodb-buffer-pool-size=128M",
            ])
            .args(tls)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let url = match self.tls {
            None => self.url(""),
            Some(_) => format!("{}?ssl-mode=REQUIRED", self.url("")),
        };
        self.server.run::<MySql>(&mut command, &url).await;
    }

    /// SIGKILL: nothing is flushed beyond what InnoDB already made durable.
    pub fn kill_9(&mut self) {
        crate::signal::kill_9(&mut self.server.child, "mariadbd");
    }

    /// SIGSTOP: the server is frozen; its connections stay open and the
    /// kernel still takes their bytes, but nothing is answered.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT after [`PrivateMariaDb::pause`]: it answers what piled up.
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, which: &str) {
        crate::signal::to(self.server.child.as_ref(), "mariadbd", which);
    }

    /// Starts the server again on the same data and port (after
    /// [`PrivateMariaDb::kill_9`]); returns once it accepts connections.
    pub async fn restart(&mut self) {
        self.kill_9();
        self.spawn().await;
    }
}

impl Drop for PrivateMariaDb {
    fn drop(&mut self) {
        self.kill_9();
    }
}
