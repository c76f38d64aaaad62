//! A TCP proxy per mock broker, each on a loopback port that never changes, so
//! a cluster that is thrown away and replaced by a fresh one is reached at the
//! same address, as a real broker that restarts is.
//!
//! librdkafka's mock brokers listen on ports of their own choosing; the
//! cluster advertises the proxies' addresses instead (see
//! `Cluster::advertise`), so clients only ever connect here. Cutting a proxy
//! closes every connection through it and closes its listening socket, so a
//! client's next connect is refused, as by a stopped broker; putting it back
//! listens on the same port again and forwards to the new upstream.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// What one proxy is told to do.
enum Order {
    /// Listen (again) and forward every connection to this broker.
    Forward(SocketAddr),
    /// Close every connection and stop listening.
    Cut,
}

/// An order and where to report that it took effect.
type Command = (Order, std_mpsc::SyncSender<io::Result<()>>);

/// The proxies of one cluster, served by a thread of their own (a
/// current-thread Tokio runtime). Dropping it closes everything.
pub(crate) struct Proxies {
    addrs: Vec<SocketAddr>,
    orders: Vec<mpsc::UnboundedSender<Command>>,
    thread: Option<JoinHandle<()>>,
}

impl Proxies {
    /// One proxy per upstream, each on a fresh loopback port, forwarding at once.
    pub(crate) fn start(upstreams: &[SocketAddr], upload: Arc<AtomicU64>) -> io::Result<Self> {
        let (ready_tx, ready_rx) = std_mpsc::sync_channel(1);
        let upstreams = upstreams.to_vec();
        let thread = std::thread::Builder::new()
            .name("mock-kafka-proxy".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                rt.block_on(async move {
                    let mut proxies = JoinSet::new();
                    let mut started = Vec::new();
                    for upstream in upstreams {
                        let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await {
                            Ok(l) => l,
                            Err(e) => {
                                let _ = ready_tx.send(Err(e));
                                return;
                            }
                        };
                        let addr = listener
                            .local_addr()
                            .expect("bound listener has an address");
                        let (tx, rx) = mpsc::unbounded_channel();
                        proxies.spawn(serve(addr, listener, upstream, rx, upload.clone()));
                        started.push((addr, tx));
                    }
                    let _ = ready_tx.send(Ok(started));
                    while proxies.join_next().await.is_some() {}
                });
            })?;
        let started = ready_rx
            .recv()
            .map_err(|_| io::Error::other("proxy thread died"))??;
        let (addrs, orders) = started.into_iter().unzip();
        Ok(Self {
            addrs,
            orders,
            thread: Some(thread),
        })
    }

    /// The fixed address of each proxy, in upstream order.
    pub(crate) fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Closes every connection and refuses new ones until [`Proxies::forward`].
    pub(crate) fn cut(&self) -> io::Result<()> {
        self.orders.iter().try_for_each(|o| order(o, Order::Cut))
    }

    /// Listens again on the same ports and forwards to `upstreams` (one per proxy).
    pub(crate) fn forward(&self, upstreams: &[SocketAddr]) -> io::Result<()> {
        assert_eq!(upstreams.len(), self.orders.len(), "one upstream per proxy");
        self.orders
            .iter()
            .zip(upstreams)
            .try_for_each(|(o, up)| order(o, Order::Forward(*up)))
    }
}

fn order(to: &mpsc::UnboundedSender<Command>, what: Order) -> io::Result<()> {
    let (ack_tx, ack_rx) = std_mpsc::sync_channel(1);
    to.send((what, ack_tx))
        .map_err(|_| io::Error::other("proxy stopped"))?;
    ack_rx
        .recv()
        .map_err(|_| io::Error::other("proxy stopped"))?
}

impl Drop for Proxies {
    fn drop(&mut self) {
        self.orders.clear();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One proxy: accepts on `addr` while forwarding, pipes each connection to
/// the upstream, and obeys orders until their sender is dropped.
async fn serve(
    addr: SocketAddr,
    listener: TcpListener,
    upstream: SocketAddr,
    mut orders: mpsc::UnboundedReceiver<Command>,
    upload: Arc<AtomicU64>,
) {
    let mut route = Some((listener, upstream));
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            order = orders.recv() => {
                let Some((order, ack)) = order else { return };
                let done = match order {
                    Order::Cut => {
                        route = None;
                        // Dropping each pipe closes both of its sockets.
                        conns.abort_all();
                        while conns.join_next().await.is_some() {}
                        Ok(())
                    }
                    Order::Forward(up) => match route.take() {
                        Some((listener, _)) => {
                            route = Some((listener, up));
                            Ok(())
                        }
                        // The port was ours a moment ago; Tokio sets
                        // SO_REUSEADDR, so lingering closed connections do not
                        // keep it from being bound again.
                        None => TcpListener::bind(addr).await.map(|l| route = Some((l, up))),
                    },
                };
                let _ = ack.send(done);
            }
            accepted = accept(&route) => {
                if let (Ok((client, _)), Some((_, up))) = (accepted, &route) {
                    conns.spawn(pipe(client, *up, upload.clone()));
                }
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn accept(route: &Option<(TcpListener, SocketAddr)>) -> io::Result<(TcpStream, SocketAddr)> {
    match route {
        Some((l, _)) => l.accept().await,
        None => std::future::pending().await,
    }
}

/// The Kafka API key of ApiVersions.
const API_VERSIONS: i16 = 18;
/// The highest ApiVersions version librdkafka 2.12's mock broker implements.
const MOCK_API_VERSIONS_MAX: i16 = 2;
/// Error code UNSUPPORTED_VERSION.
const UNSUPPORTED_VERSION: i16 = 35;
/// The largest first request a client sends (an ApiVersions request is tens of bytes).
const FIRST_REQUEST_MAX: usize = 64 * 1024;

/// The first request of a connection, as it came (size prefix included).
/// An ApiVersions request of a version the mock broker does not implement
/// is answered here instead, in version 0's shape as KIP-511 says a broker
/// must (error UNSUPPORTED_VERSION, and the versions of ApiVersions it
/// implements), and the client's next request is read: the mock answers
/// such a request with a body no client but librdkafka can read (a
/// flexible-version count and no tagged fields; Java's kafka-clients reads
/// a throttle of 20 minutes in it, franz-go and KafkaJS-like clients fail
/// to parse it), so every other client would give up on the broker.
async fn first_request(
    client_r: &mut (impl AsyncReadExt + Unpin),
    client_w: &mut (impl AsyncWriteExt + Unpin),
) -> io::Result<Vec<u8>> {
    loop {
        let mut size = [0u8; 4];
        client_r.read_exact(&mut size).await?;
        let len = usize::try_from(i32::from_be_bytes(size)).unwrap_or(usize::MAX);
        if !(8..=FIRST_REQUEST_MAX).contains(&len) {
            // Not a Kafka request we know how to read: pass it on as it is.
            return Ok(size.to_vec());
        }
        let mut frame = vec![0u8; 4 + len];
        frame[..4].copy_from_slice(&size);
        client_r.read_exact(&mut frame[4..]).await?;
        let key = i16::from_be_bytes([frame[4], frame[5]]);
        let version = i16::from_be_bytes([frame[6], frame[7]]);
        if key != API_VERSIONS || version <= MOCK_API_VERSIONS_MAX {
            return Ok(frame);
        }
        let correlation = &frame[8..12];
        let mut answer = Vec::with_capacity(20);
        answer.extend_from_slice(&16i32.to_be_bytes());
        answer.extend_from_slice(correlation);
        answer.extend_from_slice(&UNSUPPORTED_VERSION.to_be_bytes());
        answer.extend_from_slice(&1i32.to_be_bytes());
        answer.extend_from_slice(&API_VERSIONS.to_be_bytes());
        answer.extend_from_slice(&0i16.to_be_bytes());
        answer.extend_from_slice(&MOCK_API_VERSIONS_MAX.to_be_bytes());
        client_w.write_all(&answer).await?;
    }
}

/// Copies both ways until either side closes; what clients send goes at
/// most at `upload` bytes a second when that is not 0. The connection's
/// first request goes through [`first_request`].
async fn pipe(client: TcpStream, upstream: SocketAddr, upload: Arc<AtomicU64>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_r, mut client_w) = client.into_split();
    let (mut server_r, mut server_w) = server.into_split();
    let Ok(first) = first_request(&mut client_r, &mut client_w).await else {
        return;
    };
    if server_w.write_all(&first).await.is_err() {
        return;
    }
    let up = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match client_r.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if server_w.write_all(&buf[..n]).await.is_err() {
                return;
            }
            let limit = upload.load(Ordering::Relaxed);
            if limit > 0 {
                tokio::time::sleep(Duration::from_secs_f64(n as f64 / limit as f64)).await;
            }
        }
    };
    let down = tokio::io::copy(&mut server_r, &mut client_w);
    tokio::select! {
        () = up => {}
        _ = down => {}
    }
}
