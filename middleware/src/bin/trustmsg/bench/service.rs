//! The service the bench measures, run as a process of its own (`trustmsg
//! serve`, this binary or `--service-binary`), so its CPU and memory are
//! read apart from the load generator's, the mock broker's and the
//! consumer's, which stay in the bench process.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;

/// A running `trustmsg serve` child.
pub(crate) struct ServiceProcess {
    child: tokio::process::Child,
    pid: String,
    pub(crate) base: String,
    log: PathBuf,
}

impl ServiceProcess {
    /// Starts `binary serve <flags>` (which listen on `listen`) and waits
    /// (at most 60 s) until `/readyz` answers 200. Its log goes to a file,
    /// whose end is shown if it does not come up.
    pub(crate) async fn start(
        binary: &Path,
        flags: &[String],
        listen: &str,
    ) -> anyhow::Result<Self> {
        let log =
            std::env::temp_dir().join(format!("trustmsg-bench-service-{}.log", std::process::id()));
        let file =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = tokio::process::Command::new(binary)
            .arg("serve")
            .args(flags)
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let pid = child
            .id()
            .context("the service exited at once")?
            .to_string();
        let mut service = Self {
            child,
            pid,
            base: format!("http://{listen}"),
            log,
        };
        service.ready().await?;
        Ok(service)
    }

    async fn ready(&mut self) -> anyhow::Result<()> {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        let url = format!("{}/readyz", self.base);
        loop {
            if let Some(status) = self.child.try_wait()? {
                anyhow::bail!("the service exited ({status}):\n{}", self.log_tail());
            }
            if let Ok(r) = http.get(&url).send().await {
                if r.status().is_success() {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                anyhow::bail!("the service was not ready in 60 s:\n{}", self.log_tail());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Its pid, for `/proc/<pid>`.
    pub(crate) fn pid(&self) -> &str {
        &self.pid
    }

    /// The last lines of its log.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// Stops it as an operator would (SIGTERM, so it drains and flushes its
    /// spans), killing it after 30 s.
    pub(crate) async fn stop(mut self) -> anyhow::Result<()> {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.pid])
            .status();
        match tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await {
            Ok(status) => {
                status?;
            }
            Err(_) => {
                self.child.kill().await?;
                anyhow::bail!("the service did not stop in 30 s:\n{}", self.log_tail());
            }
        }
        let _ = std::fs::remove_file(&self.log);
        Ok(())
    }
}

/// A loopback address no one listens on now, for the service to bind.
pub(crate) fn free_address() -> anyhow::Result<String> {
    Ok(format!(
        "127.0.0.1:{}",
        trustmsg::net::free_port::free_port()?
    ))
}

/// The binary to run as the service: `--service-binary`, else this one.
pub(crate) fn binary(given: Option<&PathBuf>) -> anyhow::Result<PathBuf> {
    match given {
        Some(path) => Ok(path.clone()),
        None => std::env::current_exe().context("finding this binary"),
    }
}
