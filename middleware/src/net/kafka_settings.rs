//! `--kafka-config`: librdkafka settings as `KEY=VALUE`, or `@FILE` naming a
//! file of such lines (blank lines and `#` comments skipped, as in a Java
//! client's properties file), for `trustmsg serve` and `trustmsg tail`.
//!
//! A file keeps secrets (`sasl.password`, `ssl.key.password`, an OAuth client
//! secret) out of the command line, which every user of the machine can read
//! with `ps`. Secret values never reach a log: [`KafkaConfigArg`] and
//! [`Redacted`] print them as `***`.

use std::fmt;
use std::path::Path;

use anyhow::Context;

use super::address_policy::{AddressPolicy, Refusal};

/// One `--kafka-config` value as given: `KEY=VALUE` or `@FILE`, checked by
/// [`settings`]. Its `Debug` hides a secret's value.
#[derive(Clone, PartialEq, Eq)]
pub struct KafkaConfigArg(String);

impl std::str::FromStr for KafkaConfigArg {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_string()))
    }
}

impl From<&str> for KafkaConfigArg {
    fn from(s: &str) -> Self {
        Self(s.to_string())
    }
}

impl fmt::Debug for KafkaConfigArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.split_once('=') {
            Some((k, _)) if is_secret(k) => write!(f, "{:?}", format!("{}=***", k.trim())),
            _ => write!(f, "{:?}", self.0),
        }
    }
}

/// Whether the value of librdkafka setting `key` is a secret: passwords, the
/// OAuth client secret, a private key or a SASL/OAuth configuration string
/// (which may carry a token).
pub fn is_secret(key: &str) -> bool {
    let key = key.trim();
    key.ends_with(".password")
        || key.ends_with(".secret")
        || key.ends_with("key.pem")
        || key == "sasl.oauthbearer.config"
        || key == "sasl.jaas.config"
}

/// `(key, value)` pairs printed with secret values as `***`.
pub struct Redacted<'a>(pub &'a [(String, String)]);

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(k, v)| {
                let v = if is_secret(k) { "***" } else { v.as_str() };
                (k, v)
            }))
            .finish()
    }
}

/// `--kafka-brokers` (`--brokers` of `tail`): `host:port` or
/// `PROTOCOL://host:port`, comma-separated, as librdkafka reads them. One
/// with an `@` is refused without being repeated: a broker address has no
/// user or password (librdkafka would take them for a host name, and
/// repeat them in every connection error); they go in `--kafka-config`.
pub fn brokers(list: &str) -> Result<String, String> {
    if list.contains('@') {
        return Err(
            "has an `@`: a broker list is host:port,host:port and holds no \
                    credentials; give them with --kafka-config sasl.username=… and \
                    sasl.password=… (or @FILE) instead (the list is not shown: it may hold a \
                    password)"
                .into(),
        );
    }
    Ok(list.to_string())
}

/// The settings the entries make, in order (a later one wins in librdkafka),
/// with each `@FILE` read in place; an entry that is neither `KEY=VALUE` nor
/// `@FILE` is refused by its place in the list, never by what it says (a
/// password holding a comma is split by the flag's delimiter, and its tail
/// is such an entry).
pub fn settings(entries: &[KafkaConfigArg]) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (n, KafkaConfigArg(entry)) in entries.iter().enumerate() {
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        if let Some(path) = entry.strip_prefix('@') {
            out.extend(file(Path::new(path))?);
        } else {
            out.push(pair(entry).ok_or_else(|| {
                // Not shown: a mistyped `sasl.password hunter2` is a secret.
                anyhow::anyhow!(
                    "--kafka-config number {} is not of the form key=value (or @file); it is not \
                     shown, as it may hold a secret",
                    n + 1
                )
            })?);
        }
    }
    for (k, v) in &out {
        never_dialled(k, v)?;
    }
    Ok(out)
}

/// librdkafka's OAuth setting whose `azure_imds` makes it ask the cloud
/// metadata service (169.254.169.254) for a token.
const METADATA_AUTHENTICATION: &str = "sasl.oauthbearer.metadata.authentication.type";

/// librdkafka's OAuth token endpoint, which it calls over HTTP.
const TOKEN_ENDPOINT: &str = "sasl.oauthbearer.token.endpoint.url";

/// Refuses a setting that would make librdkafka dial an address trustmsg
/// never dials (the address policy's built-in denials: link-local, cloud
/// metadata, unspecified, multicast, broadcast), before any client is made.
fn never_dialled(key: &str, value: &str) -> anyhow::Result<()> {
    if key == METADATA_AUTHENTICATION && !value.eq_ignore_ascii_case("none") {
        anyhow::bail!(
            "--kafka-config {key}={value} asks the cloud metadata service \
             (169.254.169.254, link-local) for a token; trustmsg never dials it: \
             give sasl.oauthbearer.token.endpoint.url (or a SASL password) instead"
        );
    }
    if key == TOKEN_ENDPOINT {
        let url = url::Url::parse(value)
            .map_err(|e| anyhow::anyhow!("--kafka-config {key} is not a URL: {e}"))?;
        // A policy without the operator's lists: its built-in denials only
        // (the lists are for check-back URLs; the rest of a URL's shape is
        // librdkafka's to judge).
        if let Err(refused @ Refusal::Builtin { .. }) =
            AddressPolicy::new(Vec::new(), Vec::new()).check_literal(&url)
        {
            anyhow::bail!("--kafka-config {key}: {refused}");
        }
    }
    Ok(())
}

fn pair(line: &str) -> Option<(String, String)> {
    let (k, v) = line.split_once('=')?;
    let k = k.trim();
    (!k.is_empty()).then(|| (k.to_string(), v.trim().to_string()))
}

/// A properties file: `key=value` lines, blank lines and `#` comments.
fn file(path: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--kafka-config @{}", path.display()))?;
    text.lines()
        .enumerate()
        .map(|(n, l)| (n + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        .map(|(n, l)| {
            pair(l).ok_or_else(|| {
                anyhow::anyhow!(
                    "--kafka-config @{} line {n} is not of the form key=value",
                    path.display()
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_adds_its_settings_in_place_and_secrets_never_print() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kafka.properties");
        std::fs::write(
            &path,
            "# managed Kafka\nsecurity.protocol=SASL_SSL\n\n  sasl.password = hunter2 \n",
        )
        .unwrap();
        let args: Vec<KafkaConfigArg> = [
            "linger.ms=5".into(),
            format!("@{}", path.display()).as_str().into(),
            "sasl.username=me".into(),
        ]
        .to_vec();
        let s = settings(&args).unwrap();
        let pairs: Vec<(&str, &str)> = s.iter().map(|(k, v)| (&**k, &**v)).collect();
        assert_eq!(
            pairs,
            [
                ("linger.ms", "5"),
                ("security.protocol", "SASL_SSL"),
                ("sasl.password", "hunter2"),
                ("sasl.username", "me"),
            ]
        );
        let shown = format!("{:?}", Redacted(&s));
        assert!(
            !shown.contains("hunter2") && shown.contains("sasl.username"),
            "{shown}"
        );
        let arg: KafkaConfigArg = "ssl.key.password=hunter2".into();
        assert_eq!(format!("{arg:?}"), "\"ssl.key.password=***\"");
        for key in [
            "sasl.password",
            "ssl.key.password",
            "ssl.keystore.password",
            "sasl.oauthbearer.client.secret",
            "ssl.key.pem",
        ] {
            assert!(is_secret(key), "{key}");
        }
        assert!(!is_secret("sasl.username"));
    }

    #[test]
    fn settings_that_would_dial_link_local_or_metadata_addresses_are_refused() {
        let refused = |entry: &str| settings(&[entry.into()]).unwrap_err().to_string();
        let why = refused("sasl.oauthbearer.metadata.authentication.type=azure_imds");
        assert!(
            why.contains("169.254.169.254") && why.contains("never dials"),
            "{why}"
        );
        for url in [
            "http://169.254.169.254/metadata/identity/oauth2/token",
            "https://[fe80::1]/token",
            "http://[::ffff:169.254.169.254]/token",
            "http://0.0.0.0:8080/token",
        ] {
            let why = refused(&format!("sasl.oauthbearer.token.endpoint.url={url}"));
            assert!(why.contains("never dials"), "{url}: {why}");
        }
        assert!(refused("sasl.oauthbearer.token.endpoint.url=not a url").contains("not a URL"));
        for ok in [
            "sasl.oauthbearer.metadata.authentication.type=none",
            "sasl.oauthbearer.token.endpoint.url=https://127.0.0.1:8443/token",
            "sasl.oauthbearer.token.endpoint.url=https://login.example.com/token",
        ] {
            assert!(settings(&[ok.into()]).is_ok(), "{ok}");
        }
    }

    #[test]
    fn a_broker_list_with_credentials_is_refused_without_repeating_it() {
        assert_eq!(
            brokers("k1:9092,SSL://k2:9093").unwrap(),
            "k1:9092,SSL://k2:9093"
        );
        for list in [
            "ops:hunter2@k:9092",
            "SASL_SSL://ops:hunter2@k:9092,k2:9092",
        ] {
            let why = brokers(list).unwrap_err();
            assert!(!why.contains("hunter2"), "{why}");
            assert!(why.contains("sasl.password"), "{why}");
        }
    }

    #[test]
    fn malformed_entries_and_lines_are_refused_by_place_never_by_content() {
        // A password with a comma, split by the flag's delimiter: its tail
        // is an entry of its own.
        let err = settings(&["sasl.password=hunter2".into(), "swordfish".into()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--kafka-config number 2 is not of the form"),
            "{err}"
        );
        assert!(!err.contains("swordfish"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad");
        std::fs::write(&path, "a=1\nnot a setting\n").unwrap();
        let err = settings(&[format!("@{}", path.display()).as_str().into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2"), "{err}");
        let err = settings(&["@/nonexistent/kafka.properties".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("@/nonexistent/kafka.properties"), "{err}");
    }
}
