//! The real `trustmsg` binary as a child process: what an operator runs, so
//! a test can kill it with SIGKILL (no shutdown hook runs, nothing is
//! flushed) and start it again on the same port and database.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::app::ADMIN_TOKEN;
use crate::certs::ServerCert;
use crate::db::TestDb;
use crate::metrics::Metrics;

/// The `trustmsg` binary of this workspace's debug build (under
/// `CARGO_TARGET_DIR` if set). Build it first with
/// `cargo build -p trustmsg --bin trustmsg`, as `./scripts/test` does.
pub fn binary() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")));
    let path = target.join("debug").join("trustmsg");
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build -p trustmsg --bin trustmsg` (./scripts/test does)",
        path.display()
    );
    path
}

/// A port of 127.0.0.1 free right now, for a server a test starts (or
/// starts again) on it: [`trustmsg::net::free_port::free_port`], below the
/// ephemeral range that outgoing connections draw from.
pub fn free_port() -> u16 {
    trustmsg::net::free_port::free_port().expect("a free port of 127.0.0.1")
}

/// Waits until the service at `base_url` answers `/readyz` with 200 (30 s at most).
pub async fn wait_ready(base_url: &str) {
    wait_ready_with(&crate::http::http_client(), base_url).await
}

/// [`wait_ready`] through `http` (one that trusts the service's CA, for HTTPS).
pub async fn wait_ready_with(http: &reqwest::Client, base_url: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = http.get(format!("{base_url}/readyz")).send().await {
            if r.status().is_success() {
                return;
            }
        }
        assert!(Instant::now() < deadline, "trustmsg did not become ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `trustmsg serve` as a child process; killed when dropped.
pub struct ServiceProcess {
    /// Where it listens (the same across restarts).
    pub addr: SocketAddr,
    args: Vec<String>,
    child: Option<Child>,
    /// Where its output goes (appended to across restarts), if anywhere.
    log: Option<PathBuf>,
    /// With HTTPS: the CA file its certificate is signed by.
    tls_ca: Option<PathBuf>,
    /// Variables added to its environment at its next start.
    env: Vec<(String, String)>,
}

impl ServiceProcess {
    /// Starts `trustmsg serve` over `db`, forwarding to `brokers`, on a free
    /// port with the given extra flags, and waits until it answers `/readyz`.
    /// Its log level is `TRUSTMSG_E2E_LOG` (default `warn`).
    pub async fn start(db: &TestDb, brokers: &str, extra: &[&str]) -> Self {
        Self::start_logged(&db.url, brokers, extra, None).await
    }

    /// [`ServiceProcess::start`] over the database at `database_url`, with
    /// its output (the log) appended to `log` when given (for tests that read what it
    /// logged, across restarts).
    pub async fn start_logged(
        database_url: &str,
        brokers: &str,
        extra: &[&str],
        log: Option<PathBuf>,
    ) -> Self {
        Self::launch(database_url, brokers, extra, log, None).await
    }

    /// [`ServiceProcess::start_logged`] with `env` set for it and its
    /// restarts (until [`ServiceProcess::set_env`] replaces it).
    pub async fn start_logged_with_env(
        database_url: &str,
        brokers: &str,
        extra: &[&str],
        log: PathBuf,
        env: &[(&str, &str)],
    ) -> Self {
        let mut s = Self::on_a_free_port(database_url, brokers, extra, Some(log), None);
        s.set_env(env);
        s.spawn().await;
        s
    }

    /// [`ServiceProcess::start`] serving HTTPS with `cert` (`--tls-cert`,
    /// `--tls-key`), which `ca` signed; [`ServiceProcess::url`] is then
    /// `https://localhost:<port>` (the certificate must name `localhost`).
    pub async fn start_https(
        db: &TestDb,
        brokers: &str,
        extra: &[&str],
        cert: &ServerCert,
        ca: &Path,
    ) -> Self {
        Self::start_https_logged(&db.url, brokers, extra, cert, ca, None).await
    }

    /// [`ServiceProcess::start_https`] over the database at `database_url`,
    /// its output appended to `log` when given.
    pub async fn start_https_logged(
        database_url: &str,
        brokers: &str,
        extra: &[&str],
        cert: &ServerCert,
        ca: &Path,
        log: Option<PathBuf>,
    ) -> Self {
        let cert_file = cert.cert.display().to_string();
        let key_file = cert.key.display().to_string();
        let mut flags = vec![
            "--tls-cert",
            cert_file.as_str(),
            "--tls-key",
            key_file.as_str(),
        ];
        flags.extend_from_slice(extra);
        Self::launch(database_url, brokers, &flags, log, Some(ca.to_path_buf())).await
    }

    /// Runs `trustmsg serve` on a free port (HTTPS when `tls_ca` is given)
    /// and waits until it is ready.
    async fn launch(
        database_url: &str,
        brokers: &str,
        extra: &[&str],
        log: Option<PathBuf>,
        tls_ca: Option<PathBuf>,
    ) -> Self {
        let mut s = Self::on_a_free_port(database_url, brokers, extra, log, tls_ca);
        s.spawn().await;
        s
    }

    /// Its command on a free port, not started yet.
    fn on_a_free_port(
        database_url: &str,
        brokers: &str,
        extra: &[&str],
        log: Option<PathBuf>,
        tls_ca: Option<PathBuf>,
    ) -> Self {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        Self {
            addr,
            args: serve_args(database_url, addr, brokers, extra),
            child: None,
            log,
            tls_ca,
            env: Vec::new(),
        }
    }

    /// A client for [`ServiceProcess::url`]: with HTTPS, one that trusts only
    /// the test CA.
    pub fn http_client(&self) -> reqwest::Client {
        match &self.tls_ca {
            None => crate::http::http_client(),
            // `localhost` is dialled on the service's own 127.0.0.1 address,
            // never on what a resolver says.
            Some(ca) => client_builder_trusting(ca)
                .resolve("localhost", self.addr)
                .build()
                .expect("an HTTPS client"),
        }
    }

    async fn spawn(&mut self) {
        self.spawn_unready();
        wait_ready_with(&self.http_client(), &self.url()).await;
    }

    /// Starts `trustmsg serve` over the database at `database_url`,
    /// forwarding to `brokers`, with `extra` flags, and returns at once:
    /// for the tests of what it answers before it is ready.
    pub fn start_unready(database_url: &str, brokers: &str, extra: &[&str]) -> Self {
        let mut s = Self::on_a_free_port(database_url, brokers, extra, None, None);
        s.spawn_unready();
        s
    }

    fn spawn_unready(&mut self) {
        let log = std::env::var("TRUSTMSG_E2E_LOG").unwrap_or_else(|_| "warn".into());
        let (stdout, stderr) = match &self.log {
            Some(path) => {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .expect("open the service log");
                let copy = file.try_clone().expect("clone the log handle");
                (Stdio::from(file), Stdio::from(copy))
            }
            None => (Stdio::inherit(), Stdio::inherit()),
        };
        let child = Command::new(binary())
            .args(&self.args)
            .env("TRUSTMSG_LOG", log)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .expect("spawn trustmsg");
        self.child = Some(child);
    }

    /// `http://<addr>` (`https://localhost:<port>` with HTTPS), what an SDK
    /// client takes.
    pub fn url(&self) -> String {
        match self.tls_ca {
            None => format!("http://{}", self.addr),
            Some(_) => format!("https://localhost:{}", self.addr.port()),
        }
    }

    /// The process id while it runs (`None` after [`ServiceProcess::kill_9`]).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// These variables in its environment from its next start on (none:
    /// none).
    pub fn set_env(&mut self, env: &[(&str, &str)]) {
        self.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }

    /// Waits up to `within` for it to exit by itself; how it exited.
    pub async fn exited_within(&mut self, within: std::time::Duration) -> ExitStatus {
        let deadline = std::time::Instant::now() + within;
        let child = self.child.as_mut().expect("the service runs");
        loop {
            if let Some(status) = child.try_wait().expect("the service's status") {
                self.child = None;
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the service did not exit within {within:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Starts it again after it exited by itself (same command, port and
    /// database), waiting until it is ready.
    pub async fn start_again(&mut self) {
        assert!(self.child.is_none(), "the service still runs");
        self.spawn().await;
    }

    /// SIGKILL: no shutdown hook runs, nothing is flushed.
    pub fn kill_9(&mut self) {
        crate::signal::kill_9(&mut self.child, "the service");
    }

    /// SIGTERM, then waits for it to exit: a graceful shutdown. Returns
    /// how it exited, for the test to judge (see
    /// [`ServiceProcess::terminate_cleanly`]).
    pub fn terminate(&mut self) -> ExitStatus {
        self.signal("-TERM");
        let mut c = self.child.take().expect("the service runs");
        c.wait().expect("wait for the service to exit")
    }

    /// [`ServiceProcess::terminate`], failing the test unless it exited
    /// with status 0 (its shutdown finished within its deadline).
    pub fn terminate_cleanly(&mut self) {
        let status = self.terminate();
        assert!(
            status.success(),
            "trustmsg did not shut down cleanly on SIGTERM: {status}"
        );
    }

    /// SIGHUP: with HTTPS, reloads the certificate files.
    pub fn hangup(&self) {
        self.signal("-HUP");
    }

    /// SIGSTOP: the process is frozen mid-whatever (a GC pause, a VM
    /// migration, a laptop lid): its leases run out while it holds them.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT after [`ServiceProcess::pause`]: it carries on where it was,
    /// with claims that other instances may have taken over meanwhile.
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, which: &str) {
        crate::signal::to(self.child.as_ref(), "the service", which);
    }

    /// Kills it and starts the same command again (same port, same
    /// database), waiting until it is ready.
    pub async fn restart(&mut self) {
        self.kill_9();
        self.spawn().await;
    }

    /// `method` on `path` (e.g. `/v1/admin/summary`) with `token` and a JSON
    /// `body`: the status and the answer as JSON (a string when it is not).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http_client()
            .request(method, format!("{}{path}", self.url()))
            .bearer_auth(token);
        if let Some(b) = body {
            req = req.json(b);
        }
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        let text = res.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// `method` on `path` with the admin token and a JSON `body`: the
    /// status and the answer.
    pub async fn admin(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        self.call(method, path, ADMIN_TOKEN, body).await
    }

    /// [`ServiceProcess::admin`] whose answer must be a 200: the answer.
    pub async fn admin_ok(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Value {
        let (status, answer) = self.admin(method.clone(), path, body).await;
        assert_eq!(status, 200, "{method} {path}: {answer}");
        answer
    }

    /// `GET path` with the admin token: the answer, which must be a 200.
    pub async fn admin_get(&self, path: &str) -> Value {
        self.admin_ok(reqwest::Method::GET, path, None).await
    }

    /// What `/metrics` says now.
    pub async fn metrics(&self) -> Metrics {
        self.metrics_via(&self.http_client()).await
    }

    /// What `/metrics` says now, asked through `http` (one trusting
    /// another CA, say).
    pub async fn metrics_via(&self, http: &reqwest::Client) -> Metrics {
        Metrics::fetch(http, &format!("{}/metrics", self.url())).await
    }

    /// The value of the sample of `name` with these labels now (see
    /// [`Metrics::value`]); `None` when it has none.
    pub async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.metrics().await.value(name, labels)
    }

    /// Registers a producer with these settings; returns (token, signing secret).
    pub async fn register(&self, biz_id: &str, settings: Value) -> (String, String) {
        register_at(
            &self.http_client(),
            &self.url(),
            ADMIN_TOKEN,
            biz_id,
            &settings,
        )
        .await
    }
}

/// Registers a producer with these settings at the service at `base_url`
/// whose admin token is `admin_token`; returns (token, signing secret).
pub async fn register_at(
    http: &reqwest::Client,
    base_url: &str,
    admin_token: &str,
    biz_id: &str,
    settings: &Value,
) -> (String, String) {
    let res = http
        .put(format!("{base_url}/v1/producers/{biz_id}"))
        .bearer_auth(admin_token)
        .json(settings)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let body: Value = res.json().await.unwrap();
    (
        body["token"].as_str().unwrap().to_string(),
        body["signing_secret"].as_str().unwrap().to_string(),
    )
}

/// The flags [`ServiceProcess`] runs `trustmsg serve` with, then `extra`.
fn serve_args(database_url: &str, addr: SocketAddr, brokers: &str, extra: &[&str]) -> Vec<String> {
    let addr = addr.to_string();
    let mut args: Vec<String> = [
        "serve",
        "--database-url",
        database_url,
        "--listen",
        &addr,
        "--admin-token",
        ADMIN_TOKEN,
        "--auto-migrate",
        "--kafka-brokers",
        brokers,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// A fresh HTTP client (no pooled connections) that trusts only the CA in
/// `ca_file` (PEM).
pub fn client_trusting(ca_file: &Path) -> reqwest::Client {
    client_builder_trusting(ca_file)
        .build()
        .expect("an HTTPS client")
}

/// A client builder (no pooled connections) that trusts only the CA in
/// `ca_file` (PEM).
fn client_builder_trusting(ca_file: &Path) -> reqwest::ClientBuilder {
    let pem = std::fs::read(ca_file).expect("read the CA file");
    let ca = reqwest::Certificate::from_pem(&pem).expect("a PEM CA certificate");
    crate::http::http_client_builder().tls_certs_only([ca])
}

impl Drop for ServiceProcess {
    fn drop(&mut self) {
        self.kill_9();
    }
}
