//! A PostgreSQL server of the test's own, the twin of
//! [`PrivateMariaDb`](crate::PrivateMariaDb): `initdb` into a temporary
//! directory and `postgres` on a free port of 127.0.0.1 with PostgreSQL's
//! default durability (`fsync` and `synchronous_commit` on), so a test can
//! kill it with SIGKILL and start it again on the same data (the WAL
//! replays every committed transaction) without touching the shared server
//! every other test uses.
//!
//! PostgreSQL refuses to run as root: when the tests do (CI's container),
//! `initdb` and `postgres` run as the `postgres` OS user (Debian's package
//! creates it), in a directory it owns.
//!
//! PostgreSQL is one postmaster and the processes it forks (a backend per
//! connection, the checkpointer, the WAL writer…). A backend outlives a
//! postmaster killed under it until it next looks, and while one is still
//! attached to the old shared memory a new postmaster refuses to start. So
//! [`PrivatePostgres::kill_9`] kills the whole server: it stops the
//! postmaster (no new child can be forked), then kills it and each of its
//! children by pid, and waits until they are gone; [`PrivatePostgres::pause`]
//! stops them all the same way. Nothing but the postmaster this kit started
//! and its own children is ever signalled.

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::Postgres;

use crate::private_server::PrivateServer;

/// The newest PostgreSQL's `bin/<name>`: from the PATH (a source build, a
/// distribution that puts it there) or Debian's
/// `/usr/lib/postgresql/<version>/bin`.
fn program(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if let Some(found) = std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.exists())
    {
        return found;
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let e = e.ok()?;
            let version = e.file_name().to_str()?.parse().ok()?;
            Some((version, e.path().join("bin").join(name)))
        })
        .filter(|(_, p)| p.exists())
        .collect();
    versions.sort();
    versions.pop().map(|(_, p)| p).unwrap_or_else(|| {
        panic!("{name} is not installed: a private PostgreSQL needs the postgresql package (.ci/run and scripts/services install it)")
    })
}

/// The OS user PostgreSQL runs as when the tests run as root: its uid and
/// gid (from `id`, as any account source may hold it).
fn postgres_user() -> Option<(u32, u32)> {
    let is_root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    if !is_root {
        return None;
    }
    let id = |flag: &str| -> u32 {
        let out = Command::new("id")
            .args([flag, "postgres"])
            .output()
            .expect("run id");
        assert!(
            out.status.success(),
            "the tests run as root and PostgreSQL refuses to: they run it as the OS user `postgres`, which does not exist (install the postgresql package)"
        );
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("a numeric id")
    };
    Some((id("-u"), id("-g")))
}

/// A private `postgres`; killed (and its data deleted) when dropped.
pub struct PrivatePostgres {
    server: PrivateServer,
    user: Option<(u32, u32)>,
}

impl PrivatePostgres {
    /// Creates a cluster (`initdb`) and starts the server on a free port;
    /// returns once it accepts connections.
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let user = postgres_user();
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .expect("give the temporary directory to the postgres user");
        }
        let data = dir.path().join("data");
        let out = as_user(Command::new(program("initdb")), user)
            .arg("-D")
            .arg(&data)
            .args([
                "--username=postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                // The cluster's files are written; only a crash of the
                // machine, which no test makes, could want them synced.
                "--no-sync",
            ])
            .stdin(Stdio::null())
            .output()
            .expect("run initdb");
        assert!(
            out.status.success(),
            "initdb failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let mut db = Self {
            server: PrivateServer::new(dir, "postgres", "postgres.log"),
            user,
        };
        db.spawn().await;
        db
    }

    /// `postgres://postgres@127.0.0.1:<port>/<database>` (no password:
    /// the cluster trusts local connections).
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/{database}",
            self.server.port
        )
    }

    /// The port it listens on (of 127.0.0.1).
    pub fn port(&self) -> u16 {
        self.server.port
    }

    /// The server's log (what it said about crashes and recovery).
    pub fn log(&self) -> PathBuf {
        self.server.log()
    }

    async fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log())
            .expect("open the server's log");
        let mut command = as_user(Command::new(program("postgres")), self.user);
        command
            .arg("-D")
            .arg(self.server.path("data"))
            .arg("-p")
            .arg(self.server.port.to_string())
            .arg("-k")
            .arg(self.server.dir.path())
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                // Three services' pools and the test's own.
                "-c",
                "max_connections=300",
                // Durability is PostgreSQL's default, said out loud: a
                // commit returns once its WAL is on disk.
                "-c",
                "fsync=on",
                "-c",
                "synchronous_commit=on",
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log again"))
            .stderr(log);
        let url = self.url("postgres");
        self.server.run::<Postgres>(&mut command, &url).await;
    }

    /// SIGKILL of the postmaster and of every process it forked: nothing is
    /// flushed beyond what the WAL already holds, as in a crash of the
    /// whole server. Returns once none of them runs.
    pub fn kill_9(&mut self) {
        let Some(mut postmaster) = self.server.child.take() else {
            return;
        };
        // Stopped, it forks no child between the look and the kill.
        crate::signal::to_pid(postmaster.id(), "-STOP");
        let children = children_of(postmaster.id());
        postmaster.kill().expect("SIGKILL postgres");
        postmaster.wait().expect("reap postgres");
        for pid in &children {
            crate::signal::to_pid(*pid, "-KILL");
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while children.iter().any(|pid| alive(*pid)) {
            assert!(
                Instant::now() < deadline,
                "postgres's processes {children:?} outlived SIGKILL for 30 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGSTOP of the postmaster, then of each of its processes: the server
    /// is frozen; its connections stay open and the kernel still takes
    /// their bytes, but nothing is answered.
    pub fn pause(&self) {
        let postmaster = self.pid();
        crate::signal::to_pid(postmaster, "-STOP");
        for pid in children_of(postmaster) {
            crate::signal::to_pid(pid, "-STOP");
        }
    }

    /// SIGCONT after [`PrivatePostgres::pause`], to its processes and then
    /// to the postmaster: it answers what piled up.
    pub fn resume(&self) {
        let postmaster = self.pid();
        for pid in children_of(postmaster) {
            crate::signal::to_pid(pid, "-CONT");
        }
        crate::signal::to_pid(postmaster, "-CONT");
    }

    /// The postmaster's pid and those of the processes it forked (its
    /// backends, checkpointer, WAL writer…), while it runs.
    pub fn processes(&self) -> Vec<u32> {
        let postmaster = self.pid();
        let mut all = vec![postmaster];
        all.extend(children_of(postmaster));
        all
    }

    /// The postmaster's pid.
    fn pid(&self) -> u32 {
        self.server.child.as_ref().expect("postgres runs").id()
    }

    /// Starts the server again on the same data and port (after
    /// [`PrivatePostgres::kill_9`], or killing it first); returns once it
    /// accepts connections, its crash recovery done.
    pub async fn restart(&mut self) {
        self.kill_9();
        self.spawn().await;
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        self.kill_9();
    }
}

/// `command` run as `user` (uid, gid) when given.
fn as_user(mut command: Command, user: Option<(u32, u32)>) -> Command {
    if let Some((uid, gid)) = user {
        command.uid(uid).gid(gid);
    }
    command
}

/// The pids whose parent is `parent`, read from `/proc`.
fn children_of(parent: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| stat(*pid).is_some_and(|(_, ppid)| ppid == parent))
        .collect()
}

/// Whether `pid` still runs (a zombie does not: it holds no memory and no
/// file any more, only its exit status for a parent to collect).
pub fn alive(pid: u32) -> bool {
    stat(pid).is_some_and(|(state, _)| state != 'Z' && state != 'X')
}

/// A process's state and parent pid from `/proc/<pid>/stat`.
fn stat(pid: u32) -> Option<(char, u32)> {
    let stat =
        std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat")).ok()?;
    // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split(' ');
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}
