//! Which addresses check-back calls may dial (the SSRF guard).
//!
//! A producer's `verify_url` is data an outside party controls, and trustmsg
//! POSTs to it from inside the operator's network, so the URL must not be a way
//! to reach cloud metadata services or other internal addresses the operator
//! has ruled out. The rules:
//!
//! - only `http` and `https`, and no credentials in the URL;
//! - IPv6 spellings of an IPv4 address — mapped (`::ffff:a.b.c.d`),
//!   compatible (`::a.b.c.d`), 6to4 (`2002:aabb:ccdd::/16`) and NAT64
//!   (`64:ff9b::a.b.c.d`) — are judged as the IPv4 address they carry, so an
//!   IPv4 deny list and the built-in denials cover them;
//! - always denied, whatever the operator lists: link-local (169.254.0.0/16,
//!   fe80::/10, where cloud metadata services live), known metadata addresses,
//!   unspecified (0.0.0.0/8, ::), multicast and broadcast;
//! - then `--verify-deny-cidr` denies, and a non-empty `--verify-allow-cidr`
//!   admits only what it lists.
//!
//! The policy is applied to the address actually dialled: IP-literal URLs are
//! checked before the call (they never reach a resolver) and hostnames are
//! resolved by [`AddressPolicy::resolve_allowed`], which the verifier's HTTP
//! client uses as its DNS resolver, so a name that resolves to an allowed
//! address at registration and to a denied one later (DNS rebinding) is still
//! refused. Registration checks the same rules early so a bad URL is a 400.
//!
//! Used by the producer registry (`api/producers`), by the verifier's
//! check-back client and by the alert webhook's client (`alert`), which is
//! why it sits beside them rather than in any: both clients are built by
//! [`client_builder`] and check each URL with [`AddressPolicy::check_literal`].

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use async_trait::async_trait;
use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Why an address or a check-back URL is refused. The text is what an operator
/// (at registration: the producer's owner) reads, so it names the rule and the flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Denied whatever the configuration (link-local, metadata, unspecified, multicast, broadcast).
    #[error("address {shown} is {why}; trustmsg never dials it")]
    Builtin {
        /// The address as given, and what it stands for when normalised.
        shown: String,
        /// Which built-in rule.
        why: &'static str,
    },
    /// In `--verify-deny-cidr`.
    #[error("address {0} is denied by --verify-deny-cidr")]
    Denied(String),
    /// Not in a non-empty `--verify-allow-cidr`.
    #[error("address {0} is not in --verify-allow-cidr")]
    NotAllowed(String),
    /// Not `http` or `https`.
    #[error("verify_url must be http or https, not {0:?}")]
    Scheme(String),
    /// `user:password@` in the URL.
    #[error("verify_url must not carry credentials (user:password@)")]
    Credentials,
    /// A URL without a host.
    #[error("verify_url has no host")]
    NoHost,
    /// The name did not resolve.
    #[error("cannot resolve {host}: {error}")]
    Unresolvable {
        /// The hostname.
        host: String,
        /// The resolver's error.
        error: String,
    },
    /// The name resolved to nothing.
    #[error("{0} resolves to no address")]
    NoAddress(String),
    /// At registration: one of the name's addresses is refused.
    #[error("{host} resolves to a refused address: {refusal}")]
    ResolvesToRefused {
        /// The hostname.
        host: String,
        /// Why that address is refused.
        refusal: Box<Refusal>,
    },
    /// When dialling: every address of the name is refused.
    #[error("{host} resolves only to refused addresses: {}", join(refusals))]
    OnlyRefused {
        /// The hostname.
        host: String,
        /// Why each address is refused.
        refusals: Vec<Refusal>,
    },
}

fn join(refusals: &[Refusal]) -> String {
    refusals
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Turns a hostname into addresses. The system resolver in production; a
/// table in tests (and for `--verify-resolve`).
#[async_trait]
pub trait HostResolver: Send + Sync + 'static {
    /// All addresses `host` resolves to.
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>>;
}

/// The operating system's resolver (`getaddrinfo` through tokio).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

#[async_trait]
impl HostResolver for SystemResolver {
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        Ok(tokio::net::lookup_host((host, 0))
            .await?
            .map(|sa| sa.ip())
            .collect())
    }
}

/// Fixed answers for some names; every other name goes to `fallback`.
/// The answers are still filtered by the policy like any other.
pub struct StaticResolver {
    table: HashMap<String, Vec<IpAddr>>,
    fallback: Option<Arc<dyn HostResolver>>,
}

impl StaticResolver {
    /// A table of `host → addresses`; other names go to `fallback` (or fail without one).
    pub fn new(
        entries: impl IntoIterator<Item = (String, IpAddr)>,
        fallback: Option<Arc<dyn HostResolver>>,
    ) -> Self {
        let mut table: HashMap<String, Vec<IpAddr>> = HashMap::new();
        for (host, ip) in entries {
            table
                .entry(host.trim_end_matches('.').to_ascii_lowercase())
                .or_default()
                .push(ip);
        }
        Self { table, fallback }
    }
}

#[async_trait]
impl HostResolver for StaticResolver {
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        let key = host.trim_end_matches('.').to_ascii_lowercase();
        if let Some(ips) = self.table.get(&key) {
            return Ok(ips.clone());
        }
        match &self.fallback {
            Some(f) => f.lookup(host).await,
            None => Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no address configured for {host}"),
            )),
        }
    }
}

/// The operator's allow/deny lists plus the built-in denials, and the resolver
/// hostnames go through.
#[derive(Clone)]
pub struct AddressPolicy {
    allow: Vec<IpNet>,
    deny: Vec<IpNet>,
    resolver: Arc<dyn HostResolver>,
}

impl std::fmt::Debug for AddressPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AddressPolicy")
            .field("allow", &self.allow)
            .field("deny", &self.deny)
            .finish_non_exhaustive()
    }
}

impl Default for AddressPolicy {
    fn default() -> Self {
        Self::new(Vec::new(), Vec::new())
    }
}

/// The IPv4 address an IPv6 address stands for, if it carries one:
/// IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), 6to4
/// (`2002:aabb:ccdd::/16`, the address in bits 16..48) or the NAT64 well-known
/// prefix (`64:ff9b::/96`); otherwise the address itself. Each of these can
/// reach the IPv4 host through a translator or tunnel, so an IPv4 rule must
/// see it. `::` and `::1` keep their IPv6 meaning (unspecified, loopback).
pub fn normalise(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else {
        return ip;
    };
    let s = v6.segments();
    let v4 = |hi: u16, lo: u16| {
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        IpAddr::V4(Ipv4Addr::new(a, b, c, d))
    };
    if let Some(mapped) = v6.to_ipv4_mapped() {
        IpAddr::V4(mapped)
    } else if s[..6] == [0; 6] && !(v6.is_unspecified() || v6.is_loopback()) {
        v4(s[6], s[7])
    } else if s[0] == 0x2002 {
        v4(s[1], s[2])
    } else if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        v4(s[6], s[7])
    } else {
        ip
    }
}

/// Why `ip` is denied whatever the configuration, or None. Normalise first.
pub fn builtin_denial(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            if o[0] == 0 {
                Some("unspecified (0.0.0.0/8)")
            } else if v4 == Ipv4Addr::new(169, 254, 169, 254) {
                Some("the cloud metadata service")
            } else if v4.is_link_local() {
                Some("link-local (169.254.0.0/16, cloud metadata)")
            } else if v4 == Ipv4Addr::new(100, 100, 100, 200) {
                Some("a cloud metadata service (100.100.100.200)")
            } else if v4.is_multicast() {
                Some("multicast")
            } else if v4.is_broadcast() {
                Some("broadcast")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            if v6.is_unspecified() {
                Some("unspecified (::)")
            } else if (v6.segments()[0] & 0xffc0) == 0xfe80 {
                Some("link-local (fe80::/10)")
            } else if v6 == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
                Some("the cloud metadata service (fd00:ec2::254)")
            } else if v6.is_multicast() {
                Some("multicast")
            } else {
                None
            }
        }
    }
}

impl AddressPolicy {
    /// A policy with the operator's lists, resolving names with the system resolver.
    pub fn new(allow: Vec<IpNet>, deny: Vec<IpNet>) -> Self {
        Self {
            allow,
            deny,
            resolver: Arc::new(SystemResolver),
        }
    }

    /// The same policy resolving hostnames with `resolver`.
    pub fn with_resolver(mut self, resolver: Arc<dyn HostResolver>) -> Self {
        self.resolver = resolver;
        self
    }

    /// Whether `ip` may be dialled, and if not, why.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), Refusal> {
        let norm = normalise(ip);
        let shown = if norm == ip {
            ip.to_string()
        } else {
            format!("{ip} (= {norm})")
        };
        if let Some(why) = builtin_denial(norm) {
            return Err(Refusal::Builtin { shown, why });
        }
        let in_list = |list: &[IpNet]| list.iter().any(|n| n.contains(&norm) || n.contains(&ip));
        if in_list(&self.deny) {
            return Err(Refusal::Denied(shown));
        }
        if !self.allow.is_empty() && !in_list(&self.allow) {
            return Err(Refusal::NotAllowed(shown));
        }
        Ok(())
    }

    /// The URL-shape rules (scheme, no credentials, a host); returns the host.
    pub fn check_url_shape<'u>(&self, url: &'u url::Url) -> Result<url::Host<&'u str>, Refusal> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Refusal::Scheme(url.scheme().to_string()));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Refusal::Credentials);
        }
        url.host().ok_or(Refusal::NoHost)
    }

    /// Whether a check-back URL is acceptable: its shape, and every address its
    /// host stands for (resolved now, for a hostname).
    pub async fn check_url(&self, url: &url::Url) -> Result<(), Refusal> {
        match self.check_url_shape(url)? {
            url::Host::Ipv4(v4) => self.check_ip(IpAddr::V4(v4)),
            url::Host::Ipv6(v6) => self.check_ip(IpAddr::V6(v6)),
            url::Host::Domain(host) => {
                for ip in self.lookup(host).await? {
                    self.check_ip(ip)
                        .map_err(|refusal| Refusal::ResolvesToRefused {
                            host: host.to_string(),
                            refusal: Box::new(refusal),
                        })?;
                }
                Ok(())
            }
        }
    }

    /// Every address `host` stands for; an error when there is none.
    async fn lookup(&self, host: &str) -> Result<Vec<IpAddr>, Refusal> {
        let ips = self
            .resolver
            .lookup(host)
            .await
            .map_err(|e| Refusal::Unresolvable {
                host: host.to_string(),
                error: e.to_string(),
            })?;
        if ips.is_empty() {
            return Err(Refusal::NoAddress(host.to_string()));
        }
        Ok(ips)
    }

    /// The checks a call makes before dialling `url`: its shape, and its
    /// address when the host is an IP literal (literals never reach the
    /// resolver of a [`client_builder`] client, which checks hostnames).
    pub fn check_literal(&self, url: &url::Url) -> Result<(), Refusal> {
        match self.check_url_shape(url)? {
            url::Host::Ipv4(v4) => self.check_ip(IpAddr::V4(v4)),
            url::Host::Ipv6(v6) => self.check_ip(IpAddr::V6(v6)),
            url::Host::Domain(_) => Ok(()),
        }
    }

    /// Resolves `host` and keeps only the addresses the policy allows; an error
    /// (saying why) when none is left. This is what the check-back client dials.
    pub async fn resolve_allowed(&self, host: &str) -> Result<Vec<IpAddr>, Refusal> {
        let ips = self.lookup(host).await?;
        let mut allowed = Vec::with_capacity(ips.len());
        let mut refusals = Vec::new();
        for ip in ips {
            match self.check_ip(ip) {
                Ok(()) => allowed.push(ip),
                Err(why) => refusals.push(why),
            }
        }
        if allowed.is_empty() {
            return Err(Refusal::OnlyRefused {
                host: host.to_string(),
                refusals,
            });
        }
        Ok(allowed)
    }
}

/// The policy as reqwest's DNS resolver: hostnames resolve only to allowed addresses.
struct PolicyResolver(Arc<AddressPolicy>);

impl Resolve for PolicyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.0.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let ips = policy.resolve_allowed(&host).await?;
            let addrs: Addrs = Box::new(ips.into_iter().map(|ip| std::net::SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

/// An HTTP client builder that dials only what `policy` allows: hostnames
/// resolve through the policy (so the check is on the address actually
/// dialled, DNS rebinding included), no proxy dials on its behalf, and no
/// redirect is followed. Check each URL with [`AddressPolicy::check_literal`]
/// before the call.
pub(crate) fn client_builder(policy: Arc<AddressPolicy>) -> reqwest::ClientBuilder {
    crate::net::client_tls::install_crypto_provider();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        // A proxy would dial on our behalf, past the resolver's check.
        .no_proxy()
        .dns_resolver(Arc::new(PolicyResolver(policy)))
}

/// `text` followed by each cause of `e` it does not already end with: a
/// connection the policy refused says so only in a cause of the client's
/// error ("error sending request" alone tells an operator nothing).
pub(crate) fn with_causes(mut text: String, e: &(dyn std::error::Error + 'static)) -> String {
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.ends_with(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> AddressPolicy {
        AddressPolicy::new(Vec::new(), Vec::new())
    }

    async fn url_verdict(p: &AddressPolicy, s: &str) -> Result<(), String> {
        let url = url::Url::parse(s).map_err(|e| format!("parse: {e}"))?;
        p.check_url(&url).await.map_err(|r| r.to_string())
    }

    #[tokio::test]
    async fn metadata_address_is_refused_in_every_spelling() {
        let p = policy();
        for spelling in [
            "http://169.254.169.254/latest/meta-data",
            "http://[::ffff:169.254.169.254]/",
            "http://[::ffff:a9fe:a9fe]/",
            "http://2852039166/",
            "http://0251.0376.0251.0376/",
            "http://0xa9fea9fe/",
            "http://0xa9.0xfe.0xa9.0xfe/",
            "http://169.254.43518/",
            "http://[64:ff9b::169.254.169.254]/",
            "http://169.254.169.254./",
        ] {
            let verdict = url_verdict(&p, spelling).await;
            let why = verdict.expect_err(spelling);
            assert!(
                why.contains("169.254.169.254") && why.contains("metadata"),
                "{spelling}: {why}"
            );
        }
    }

    #[tokio::test]
    async fn link_local_unspecified_and_multicast_are_refused() {
        let p = policy();
        for (s, needle) in [
            ("http://[fe80::1]/", "link-local"),
            ("http://169.254.10.1/", "link-local"),
            ("http://0.0.0.0/", "unspecified"),
            ("http://0/", "unspecified"),
            ("http://[::]/", "unspecified"),
            ("http://[::ffff:0.0.0.0]/", "unspecified"),
            ("http://224.0.0.1/", "multicast"),
            ("http://[ff02::1]/", "multicast"),
            ("http://255.255.255.255/", "broadcast"),
            ("http://[fd00:ec2::254]/", "metadata"),
        ] {
            match url_verdict(&p, s).await {
                Err(why) => assert!(why.contains(needle), "{s}: {why}"),
                Ok(()) => panic!("{s} was accepted"),
            }
        }
    }

    #[tokio::test]
    async fn ordinary_addresses_pass_by_default() {
        let p = policy();
        for s in [
            "http://127.0.0.1:9/check",
            "https://10.1.2.3/check",
            "http://[::1]:8080/check",
            "http://192.168.1.5/check",
        ] {
            assert_eq!(url_verdict(&p, s).await, Ok(()), "{s}");
        }
    }

    #[tokio::test]
    async fn scheme_and_credentials_are_checked() {
        let p = policy();
        for s in [
            "ftp://127.0.0.1/x",
            "file:///etc/passwd",
            "gopher://127.0.0.1/",
            "http://user:pw@127.0.0.1/",
            "http://user@127.0.0.1/",
        ] {
            assert!(url_verdict(&p, s).await.is_err(), "{s} accepted");
        }
    }

    #[test]
    fn operator_lists_apply_to_the_normalised_address() {
        let p = AddressPolicy::new(Vec::new(), vec!["127.0.0.2/32".parse().unwrap()]);
        assert!(p.check_ip("127.0.0.2".parse().unwrap()).is_err());
        let mapped: IpAddr = "::ffff:127.0.0.2".parse().unwrap();
        let why = p.check_ip(mapped).unwrap_err().to_string();
        assert!(why.contains("--verify-deny-cidr"), "{why}");
        assert!(p.check_ip("127.0.0.1".parse().unwrap()).is_ok());

        let only_ten = AddressPolicy::new(vec!["10.0.0.0/8".parse().unwrap()], Vec::new());
        assert!(only_ten.check_ip("10.9.9.9".parse().unwrap()).is_ok());
        assert!(only_ten
            .check_ip("::ffff:10.9.9.9".parse().unwrap())
            .is_ok());
        let why = only_ten
            .check_ip("127.0.0.1".parse().unwrap())
            .unwrap_err()
            .to_string();
        assert!(why.contains("--verify-allow-cidr"), "{why}");
    }

    #[test]
    fn an_allowlist_cannot_readmit_the_builtin_denials() {
        let p = AddressPolicy::new(vec!["0.0.0.0/0".parse().unwrap()], Vec::new());
        assert!(p.check_ip("169.254.169.254".parse().unwrap()).is_err());
    }

    #[test]
    fn loopback_ipv6_is_not_mistaken_for_an_ipv4_compatible_address() {
        // `::1` read as IPv4-compatible would be 0.0.0.1 (unspecified range).
        assert_eq!(
            normalise("::1".parse().unwrap()),
            "::1".parse::<IpAddr>().unwrap()
        );
        assert!(policy().check_ip("::1".parse().unwrap()).is_ok());
    }

    /// Every IPv6 spelling of an IPv4 address that a deny list of 10.0.0.0/8
    /// and the built-in metadata denial must see through.
    const IPV4_AS_IPV6: [(&str, &str, &str); 4] = [
        ("mapped", "::ffff:10.1.2.3", "::ffff:169.254.169.254"),
        ("IPv4-compatible", "::10.1.2.3", "::169.254.169.254"),
        ("6to4", "2002:a01:203::1", "2002:a9fe:a9fe::"),
        ("NAT64", "64:ff9b::10.1.2.3", "64:ff9b::169.254.169.254"),
    ];

    #[test]
    fn every_ipv6_spelling_of_an_ipv4_address_is_normalised_to_it() {
        for (form, ten, metadata) in IPV4_AS_IPV6 {
            assert_eq!(
                normalise(ten.parse().unwrap()),
                "10.1.2.3".parse::<IpAddr>().unwrap(),
                "{form}: {ten}"
            );
            assert_eq!(
                normalise(metadata.parse().unwrap()),
                "169.254.169.254".parse::<IpAddr>().unwrap(),
                "{form}: {metadata}"
            );
        }
        // 6to4 carries the IPv4 address in bits 16..48 whatever follows it.
        assert_eq!(
            normalise("2002:c0a8:105:7:1:2:3:4".parse().unwrap()),
            "192.168.1.5".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn an_ipv4_deny_list_covers_every_ipv6_spelling_of_the_address() {
        let p = AddressPolicy::new(Vec::new(), vec!["10.0.0.0/8".parse().unwrap()]);
        for (form, ten, _) in IPV4_AS_IPV6 {
            let why = p
                .check_ip(ten.parse().unwrap())
                .expect_err(&format!("{form} {ten} was allowed"))
                .to_string();
            assert!(
                why.contains("--verify-deny-cidr") && why.contains("10.1.2.3"),
                "{form}: {why}"
            );
        }
    }

    #[test]
    fn the_builtin_metadata_denial_covers_every_ipv6_spelling() {
        for (form, _, metadata) in IPV4_AS_IPV6 {
            let why = policy()
                .check_ip(metadata.parse().unwrap())
                .expect_err(&format!("{form} {metadata} was allowed"))
                .to_string();
            assert!(why.contains("metadata"), "{form}: {why}");
        }
    }

    #[test]
    fn an_ipv4_allow_list_admits_its_addresses_in_every_ipv6_spelling() {
        let p = AddressPolicy::new(vec!["10.0.0.0/8".parse().unwrap()], Vec::new());
        for (form, ten, _) in IPV4_AS_IPV6 {
            assert_eq!(p.check_ip(ten.parse().unwrap()), Ok(()), "{form}: {ten}");
        }
    }

    #[test]
    fn ipv6_loopback_and_unspecified_keep_their_ipv6_meaning() {
        for ip in ["::1", "::"] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(normalise(ip), ip);
        }
        let why = policy()
            .check_ip("::".parse().unwrap())
            .unwrap_err()
            .to_string();
        assert!(why.contains("unspecified (::)"), "{why}");
    }

    #[tokio::test]
    async fn hostnames_are_judged_by_what_they_resolve_to() {
        let resolver = Arc::new(StaticResolver::new(
            [
                ("meta.test".to_string(), "169.254.169.254".parse().unwrap()),
                ("mixed.test".to_string(), "127.0.0.1".parse().unwrap()),
                ("mixed.test".to_string(), "127.0.0.2".parse().unwrap()),
                ("ok.test".to_string(), "127.0.0.1".parse().unwrap()),
            ],
            None,
        ));
        let p = AddressPolicy::new(Vec::new(), vec!["127.0.0.2/32".parse().unwrap()])
            .with_resolver(resolver);
        assert!(url_verdict(&p, "http://meta.test/").await.is_err());
        // Registration refuses a name with any refused address...
        assert!(url_verdict(&p, "http://mixed.test/").await.is_err());
        assert_eq!(url_verdict(&p, "http://OK.test./").await, Ok(()));
        assert!(url_verdict(&p, "http://nowhere.test/").await.is_err());
        // ...while a call dials only the allowed ones.
        assert_eq!(
            p.resolve_allowed("mixed.test").await,
            Ok(vec!["127.0.0.1".parse::<IpAddr>().unwrap()])
        );
        let why = p
            .resolve_allowed("meta.test")
            .await
            .unwrap_err()
            .to_string();
        assert!(why.contains("metadata"), "{why}");
    }
}
