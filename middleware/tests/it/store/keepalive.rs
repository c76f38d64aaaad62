//! The database connections have TCP keepalive (the vendored sqlx-core sets
//! it, see vendor/README.md), so a connection to a server that vanished is
//! found dead within about a minute, not after the system's two hours.

use std::collections::HashSet;

use trustmsg_tests::db::TestDb;
use url::Url;

/// The inodes of this process's sockets.
fn own_socket_inodes() -> HashSet<String> {
    std::fs::read_dir("/proc/self/fd")
        .expect("read /proc/self/fd")
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            let t = target.to_string_lossy();
            Some(t.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect()
}

/// For each of this process's established TCP connections to `port`, its
/// kernel timer kind (`/proc/net/tcp`'s `tr`: 2 is the keepalive timer).
fn timers_of_connections_to(port: u16) -> Vec<String> {
    let own = own_socket_inodes();
    let port = format!(":{port:04X}");
    ["/proc/self/net/tcp", "/proc/self/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local, remote, state (01 established), tr:when, …, inode
            let (remote, state, timer, inode) = (f[2], f[3], f[5], f[9]);
            (remote.ends_with(&port) && state == "01" && own.contains(inode))
                .then(|| timer.split(':').next().unwrap_or_default().to_string())
        })
        .collect()
}

#[tokio::test]
async fn every_connection_to_the_database_has_tcp_keepalive() {
    let db = TestDb::create().await;
    let store = trustmsg::store::connect(&db.database_url()).await.unwrap();
    store.ping().await.unwrap();
    let port = Url::parse(&db.url).unwrap().port().unwrap_or(3306);

    // The kernel shows one timer per connection: while a connection has
    // unacknowledged data in flight it shows the retransmit timer (01) instead
    // of the keepalive one, which a loaded machine can leave visible for a
    // moment after the ping. Read again until every connection is idle.
    let mut timers = timers_of_connections_to(port);
    for _ in 0..100 {
        if !timers.iter().any(|t| t == "01") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        timers = timers_of_connections_to(port);
    }
    assert!(!timers.is_empty(), "no connection to port {port} found");
    assert!(
        timers.iter().all(|t| t == "02"),
        "every connection's timer is keepalive (02): {timers:?}"
    );
    drop(store);
    db.drop_db().await;
}
