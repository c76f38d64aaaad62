//! A TCP proxy between one service and the test MariaDB server, so a test can
//! take the database away from that service without touching the server the
//! other tests share: [`DbProxy::refuse`] is a killed server (open connections
//! close, new ones are dropped at once), [`DbProxy::hang`] a partition or a
//! frozen server (nothing answers, nothing closes), [`DbProxy::restore`]
//! brings it back. While hanging, bytes are held, not lost: connections that
//! survive a hang carry on where they stopped. [`DbProxy::freeze_open`] is a
//! server gone without a word while a new one took its address: the
//! connections open until then never carry another byte and never close,
//! new ones work.

use std::net::SocketAddr;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

use tokio::sync::watch;

use crate::db::{mysql_server_url, TestDb};

/// What the proxy does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Pass,
    Refuse,
    Hang,
}

/// A proxy to the test MariaDB server on a free port of 127.0.0.1; it runs
/// until the test's runtime ends.
pub struct DbProxy {
    addr: SocketAddr,
    mode: watch::Sender<Mode>,
    /// Connections numbered below this are frozen for good.
    frozen_below: watch::Sender<u64>,
    /// Set by [`DbProxy::close_frozen`]: the frozen connections close.
    closed: watch::Sender<bool>,
    accepted: Arc<AtomicU64>,
}

impl DbProxy {
    /// Starts passing traffic through to the server at `TRUSTMSG_TEST_MYSQL_URL`.
    pub async fn start() -> Self {
        let server: reqwest::Url = mysql_server_url().parse().expect("a MySQL URL");
        let upstream = format!(
            "{}:{}",
            server.host_str().expect("the MySQL URL names a host"),
            server.port().unwrap_or(3306)
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (mode, _) = watch::channel(Mode::Pass);
        let (frozen_below, _) = watch::channel(0);
        let (closed, _) = watch::channel(false);
        let accepted = Arc::new(AtomicU64::new(0));
        let (modes, frozen, count) = (mode.clone(), frozen_below.clone(), accepted.clone());
        let ends = closed.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let n = count.fetch_add(1, Ordering::SeqCst);
                let frozen = frozen.subscribe();
                let mut closed = ends.subscribe();
                let relay = relay(client, upstream.clone(), modes.subscribe());
                tokio::spawn(async move {
                    let mut relay = std::pin::pin!(relay);
                    // The freeze is set before traffic is restored, and
                    // checked first: a frozen relay never moves another byte.
                    tokio::select! {
                        biased;
                        _ = frozen_for_good(frozen, n) => {}
                        _ = &mut relay => return,
                    }
                    // Frozen: the pinned relay (and so its sockets) lives on
                    // in this task, open and silent, until the test closes
                    // the frozen connections or its runtime ends.
                    let _ = closed.wait_for(|c| *c).await;
                });
            }
        });
        Self {
            addr,
            mode,
            frozen_below,
            closed,
            accepted,
        }
    }

    /// `db`'s URL with the server's address replaced by the proxy's.
    pub fn url_of(&self, db: &TestDb) -> String {
        let mut url: reqwest::Url = db.url.parse().expect("a MySQL database URL");
        url.set_ip_host(self.addr.ip()).unwrap();
        url.set_port(Some(self.addr.port())).unwrap();
        url.to_string()
    }

    /// Like a killed server: open connections close, new ones are closed as
    /// soon as they are accepted.
    pub fn refuse(&self) {
        self.mode.send_replace(Mode::Refuse);
    }

    /// Like a partition: open connections stop carrying bytes, new ones are
    /// accepted and never answered; nothing is closed.
    pub fn hang(&self) {
        self.mode.send_replace(Mode::Hang);
    }

    /// Passes traffic again; connections held by a hang carry on.
    pub fn restore(&self) {
        self.mode.send_replace(Mode::Pass);
    }

    /// Closes the connections [`DbProxy::freeze_open`] froze, so the server
    /// ends their sessions: call it before dropping the test's database,
    /// which waits for the locks a frozen session's open transaction holds
    /// (a DROP DATABASE behind one never returns).
    pub fn close_frozen(&self) {
        self.closed.send_replace(true);
    }

    /// Freezes every connection open now for good (what it holds is never
    /// delivered, it never closes) and passes traffic: new connections work.
    pub fn freeze_open(&self) {
        self.frozen_below
            .send_replace(self.accepted.load(Ordering::SeqCst));
        self.restore();
    }
}

/// Returns once connection `n` is frozen.
async fn frozen_for_good(mut frozen_below: watch::Receiver<u64>, n: u64) {
    let _ = frozen_below.wait_for(|below| n < *below).await;
}

/// Waits until traffic may pass: true, or false once refused.
async fn passable(mode: &mut watch::Receiver<Mode>) -> bool {
    match mode.wait_for(|m| *m != Mode::Hang).await {
        Ok(m) => *m == Mode::Pass,
        Err(_) => false,
    }
}

async fn relay(client: TcpStream, upstream: String, mut mode: watch::Receiver<Mode>) {
    if !passable(&mut mode).await {
        return;
    }
    let Ok(server) = TcpStream::connect(&upstream).await else {
        return;
    };
    let (client_r, client_w) = client.into_split();
    let (server_r, server_w) = server.into_split();
    // When either direction ends, both sockets close with this task.
    tokio::select! {
        _ = pump(client_r, server_w, mode.clone()) => {}
        _ = pump(server_r, client_w, mode) => {}
    }
}

/// Copies one direction, holding what it read while the proxy hangs and
/// stopping when it refuses.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut mode: watch::Receiver<Mode>) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut refused = mode.clone();
    loop {
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            _ = refused.wait_for(|m| *m == Mode::Refuse) => return,
        };
        if !passable(&mut mode).await || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
