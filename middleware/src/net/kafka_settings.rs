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

/// The settings the entries make, in order (a later one wins in librdkafka),
/// with each `@FILE` read in place; an entry that is neither `KEY=VALUE` nor
/// `@FILE` is refused, naming it (but never a value).
pub fn settings(entries: &[KafkaConfigArg]) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for KafkaConfigArg(entry) in entries {
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        if let Some(path) = entry.strip_prefix('@') {
            out.extend(file(Path::new(path))?);
        } else {
            out.push(pair(entry).ok_or_else(|| {
                anyhow::anyhow!("--kafka-config {entry:?} is not of the form key=value (or @file)")
            })?);
        }
    }
    Ok(out)
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
    fn malformed_entries_and_lines_are_refused_by_name() {
        let err = settings(&["sasl.mechanisms".into()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("\"sasl.mechanisms\" is not of the form"),
            "{err}"
        );
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
