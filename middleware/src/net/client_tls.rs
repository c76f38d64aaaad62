//! TLS for outgoing HTTPS (check-back, alerts, the admin CLI): rustls with
//! ring as its crypto provider. reqwest's default provider, aws-lc-rs, is a C
//! build that took 76 s of a cold release build on 2 cores; ring takes a few.

/// Makes ring the process's rustls provider, unless one is installed already
/// (by an earlier call, or by an application embedding trustmsg). Call it
/// before building a `reqwest::Client`; it is cheap to call again.
pub fn install_crypto_provider() {
    // Err only means a provider is installed already: that one stays.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
