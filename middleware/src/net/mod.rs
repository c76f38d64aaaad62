//! What crosses the network's edge, in and out.
//!
//! - [`address_policy`]: which addresses check-back and alerts may dial (the SSRF guard);
//! - [`client_tls`]: the crypto provider of outgoing HTTPS (check-back, alerts, the CLI);
//! - `server_tls`: HTTPS served by trustmsg itself (`--tls-cert`), reloaded while it runs;
//! - [`free_port`]: a loopback port for a server about to start on it;
//! - [`kafka_settings`]: `--kafka-config`, librdkafka settings with their secrets redacted;
//! - `secret`: values that never reach a log.

pub mod address_policy;
pub mod client_tls;
pub mod free_port;
pub mod kafka_settings;
pub(crate) mod secret;
pub(crate) mod server_tls;
