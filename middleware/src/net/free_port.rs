//! A loopback port for a server about to be started on it (the bench's
//! service, a test's service, database or broker).

use std::net::TcpListener;

use rand::RngExt;

/// A port of 127.0.0.1 free right now, chosen at random below the kernel's
/// ephemeral range.
///
/// Port 0 would give one from that range (`net.ipv4.ip_local_port_range`,
/// 32768 to 60999 by default), which every outgoing connection of the
/// machine draws its local port from: one took such a port between this
/// check and the server's bind, and the server failed to start ("Address
/// already in use"). Below that range only servers listen, and these are
/// drawn at random from over 20,000.
pub fn free_port() -> std::io::Result<u16> {
    let first_ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    let below = 10_000..first_ephemeral;
    if below.len() >= 1_000 {
        let mut rng = rand::rng();
        for _ in 0..100 {
            let port = rng.random_range(below.clone());
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_port_is_below_the_ephemeral_range_and_can_be_bound() {
        let port = free_port().unwrap();
        let first_ephemeral: u16 =
            std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").map_or(32_768, |r| {
                r.split_whitespace().next().unwrap().parse().unwrap()
            });
        assert!((10_000..first_ephemeral).contains(&port), "{port}");
        TcpListener::bind(("127.0.0.1", port)).unwrap();
    }
}
