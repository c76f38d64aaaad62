//! The verifier: check-back of PREPARED messages nobody decided.

pub mod ssrf;
