//! Which process made a call: the check endpoint sees only the peer address
//! of each connection, and the campaign must kill the instance whose
//! check-back calls are in flight, not any instance. Linux names the owner
//! of a loopback connection in `/proc`: the connection's socket inode is in
//! `/proc/net/tcp` by its ports, and the process holding that socket has a
//! file descriptor linking to `socket:[inode]`.

use std::net::SocketAddr;

/// Among `pids`, the process that owns the client end of the TCP
/// connection from `peer` to `server` (both on this machine), if any.
pub(crate) fn caller(peer: SocketAddr, server: SocketAddr, pids: &[u32]) -> Option<u32> {
    let tcp = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let inode = tcp.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let port = |f: &str| u16::from_str_radix(f.rsplit(':').next()?, 16).ok();
        (port(fields.get(1)?)? == peer.port() && port(fields.get(2)?)? == server.port())
            .then(|| fields.get(9).map(|s| s.to_string()))?
    })?;
    let link = format!("socket:[{inode}]");
    pids.iter().copied().find(|pid| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy() == link))
    })
}
