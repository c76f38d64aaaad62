//! Which addresses check-back calls may dial.

use std::net::IpAddr;

use ipnet::IpNet;

/// The operator's allow/deny lists plus the built-in denials.
#[derive(Debug, Clone, Default)]
pub struct AddressPolicy {
    allow: Vec<IpNet>,
    deny: Vec<IpNet>,
}

impl AddressPolicy {
    /// A policy with the operator's lists.
    pub fn new(allow: Vec<IpNet>, deny: Vec<IpNet>) -> Self {
        Self { allow, deny }
    }

    /// Whether `ip` may be dialled.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), String> {
        if self.deny.iter().any(|n| n.contains(&ip)) {
            return Err(format!("address {ip} is denied by --verify-deny-cidr"));
        }
        if !self.allow.is_empty() && !self.allow.iter().any(|n| n.contains(&ip)) {
            return Err(format!("address {ip} is not in --verify-allow-cidr"));
        }
        Ok(())
    }

    /// Whether a check-back URL is acceptable.
    pub async fn check_url(&self, url: &url::Url) -> Result<(), String> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "verify_url must be http or https, not {:?}",
                url.scheme()
            ));
        }
        Ok(())
    }
}
