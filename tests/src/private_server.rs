//! What a database server of the test's own is, whichever it is
//! ([`PrivateMariaDb`](crate::PrivateMariaDb),
//! [`PrivatePostgres`](crate::PrivatePostgres)): a temporary directory for
//! its data and log, a free port of 127.0.0.1, and its process, started
//! and waited for until it accepts connections.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use sqlx::pool::PoolOptions;

use crate::process::free_port;

/// A private server's directory, port and process.
pub(crate) struct PrivateServer {
    /// Its data, socket and log.
    pub(crate) dir: tempfile::TempDir,
    /// The port it listens on (of 127.0.0.1).
    pub(crate) port: u16,
    /// Its process while it runs.
    pub(crate) child: Option<Child>,
    /// The program's name, for what a failure says.
    name: &'static str,
    /// The file in `dir` it logs to.
    log: &'static str,
}

impl PrivateServer {
    /// A server `name` in `dir`, logging to the file `log` there, on a
    /// free port; not started.
    pub(crate) fn new(dir: tempfile::TempDir, name: &'static str, log: &'static str) -> Self {
        Self {
            dir,
            port: free_port(),
            child: None,
            name,
            log,
        }
    }

    /// `name` in its directory.
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Its log (what it said about crashes and recovery).
    pub(crate) fn log(&self) -> PathBuf {
        self.path(self.log)
    }

    /// Starts `command` as the server and returns once a client of `DB`
    /// connects to `url`; fails with the server's log if it exits first
    /// or does not accept connections within 60 s.
    pub(crate) async fn run<DB: sqlx::Database>(&mut self, command: &mut Command, url: &str) {
        let name = self.name;
        self.child = Some(
            command
                .spawn()
                .unwrap_or_else(|e| panic!("start {name}: {e}")),
        );
        let log = self.log();
        let said = || std::fs::read_to_string(&log).unwrap_or_default();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(pool) = PoolOptions::<DB>::new()
                .max_connections(1)
                .acquire_timeout(Duration::from_secs(1))
                .connect(url)
                .await
            {
                pool.close().await;
                return;
            }
            if let Some(Ok(Some(exit))) = self.child.as_mut().map(Child::try_wait) {
                panic!("{name} exited with {exit}:\n{}", said());
            }
            assert!(
                Instant::now() < deadline,
                "{name} did not accept connections within 60 s:\n{}",
                said()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
