//! HTTP clients for the tests. reqwest is built without a TLS provider of its
//! own (the workspace's Cargo.toml says why: ring, not aws-lc-rs), so a
//! client needs ring installed first; the service does that itself, test code
//! that builds a client before (or without) a service does it here.

/// A client with reqwest's defaults, ring installed first.
pub fn http_client() -> reqwest::Client {
    http_client_builder()
        .build()
        .expect("an HTTP client with ring as its TLS provider")
}

/// A client builder, ring installed first.
pub fn http_client_builder() -> reqwest::ClientBuilder {
    trustmsg::net::client_tls::install_crypto_provider();
    reqwest::Client::builder()
}
