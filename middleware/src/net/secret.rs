//! Values that must never reach a log line or a `Debug` dump.

/// A value that must not be logged: `Debug` prints `Secret(***)`, and there
/// is no `Display`, so it cannot end up in a formatted message by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }
    /// The secret itself; call only where it is used, never to log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_string()))
    }
}

/// A URL that may carry a password (an alert webhook, a collector, the
/// service an operator tool calls): `Display` and `Debug` show it with the
/// password as `***`. Parsed with [`quiet`], a URL that does not parse, or
/// parses into something other than what was meant (a `#`, `/` or `?`
/// unescaped in a password ends the host early and leaves the password's
/// tail behind it; so is any `@` after the host), is refused without being
/// repeated.
#[derive(Clone, PartialEq, Eq)]
pub struct RedactedUrl(url::Url);

impl RedactedUrl {
    /// The URL itself, password and all: for the client that calls it,
    /// never to format it.
    pub fn expose(&self) -> &url::Url {
        &self.0
    }
}

impl std::str::FromStr for RedactedUrl {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let refuse = |why: &str| {
            let shown = match s.split_once("://") {
                Some((scheme, _)) if !scheme.contains(['@', ':', '/']) => hide_userinfo(s, scheme),
                _ => "(not shown: it may hold a password)".to_string(),
            };
            format!(
                "is not a usable URL ({why}; {shown}): characters such as # / ? @ % in a user \
                 name or password must be percent-encoded (# as %23, / as %2F, ? as %3F, \
                 @ as %40, % as %25)"
            )
        };
        let url = url::Url::parse(s).map_err(|e| refuse(&e.to_string()))?;
        if !url.has_host() {
            return Err(refuse("no host"));
        }
        let after_host = format!(
            "{}{}{}",
            url.path(),
            url.query().unwrap_or(""),
            url.fragment().unwrap_or("")
        );
        if after_host.contains('@') {
            return Err(refuse("an `@` after the host"));
        }
        Ok(Self(url))
    }
}

impl std::fmt::Display for RedactedUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&redacted(&self.0))
    }
}

impl std::fmt::Debug for RedactedUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RedactedUrl")
            .field(&redacted(&self.0))
            .finish()
    }
}

/// `url` with its password as `***`.
pub(crate) fn redacted(url: &url::Url) -> String {
    let mut url = url.clone();
    if url.password().is_some() {
        let _ = url.set_password(Some("***"));
    }
    url.to_string()
}

/// What a refusal may show of a URL that did not parse: its scheme, and
/// what follows the last `@` (the host, port and path, when that `@` is the
/// one that ends the password), never what comes between.
pub(crate) fn hide_userinfo(s: &str, scheme: &str) -> String {
    match s.rsplit_once('@') {
        Some((_, host)) => format!("shown as {scheme}://***@{host}"),
        None => format!("shown as {scheme}://…"),
    }
}

/// A clap value parser whose refusal names the flag (and its environment
/// variable) but never repeats the value: clap's own refusals quote the
/// value they refuse, and a URL's may be its password. See [`quiet`].
#[derive(Clone)]
pub struct Quiet<T>(fn(&str) -> Result<T, String>);

/// Parses a flag's value with `T`'s `FromStr`, quietly ([`Quiet`]).
pub fn quiet<T>() -> Quiet<T>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    Quiet(|s| s.parse().map_err(|e: T::Err| e.to_string()))
}

/// Parses a flag's value with `parse`, quietly ([`Quiet`]).
pub fn quiet_with<T>(parse: fn(&str) -> Result<T, String>) -> Quiet<T> {
    Quiet(parse)
}

impl<T: Clone + Send + Sync + 'static> clap::builder::TypedValueParser for Quiet<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        let flag = arg.map_or_else(
            || "a value".to_string(),
            |a| {
                let long = a
                    .get_long()
                    .map_or_else(|| a.get_id().to_string(), |l| format!("--{l}"));
                match a.get_env() {
                    Some(env) => format!("{long} (or {})", env.to_string_lossy()),
                    None => long,
                }
            },
        );
        let refuse = |kind: clap::error::ErrorKind, why: String| {
            clap::Error::raw(kind, format!("{flag} {why}\n")).with_cmd(cmd)
        };
        let text = value
            .to_str()
            .ok_or_else(|| refuse(clap::error::ErrorKind::InvalidUtf8, "is not UTF-8".into()))?;
        (self.0)(text).map_err(|why| refuse(clap::error::ErrorKind::ValueValidation, why))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_shows_its_password_nowhere() {
        for given in [
            "https://alerts:hunter2swordfish@hooks.example/alerts?x=1",
            "https://alerts:hunter2%23swordfish@hooks.example/",
            "https://alerts:hunter2@swordfish@hooks.example/",
        ] {
            let url: RedactedUrl = given.parse().unwrap();
            let shown = format!("{url} {url:?}");
            assert!(
                !shown.contains("hunter2") && !shown.contains("swordfish"),
                "{shown}"
            );
            assert!(shown.contains("alerts:***@hooks.example"), "{shown}");
            assert!(url.expose().password().unwrap().starts_with("hunter2"));
        }
    }

    #[test]
    fn a_url_whose_password_ends_its_host_early_is_refused_without_showing_it() {
        for given in [
            "https://alerts:hunter2#swordfish@hooks.example/",
            "https://alerts:hunter2/swordfish@hooks.example/",
            "https://alerts:hunter2?swordfish@hooks.example/",
            "https://alerts:1234#hunter2swordfish@hooks.example/",
            "alerts:hunter2swordfish@hooks.example/",
            "hooks//alerts:hunter2swordfish@hooks.example/",
        ] {
            let why = given.parse::<RedactedUrl>().expect_err(given);
            assert!(
                !why.contains("hunter2") && !why.contains("swordfish"),
                "{given}: {why}"
            );
            assert!(why.contains("percent-encoded"), "{why}");
        }
    }

    #[test]
    fn clap_refuses_a_flag_quietly_naming_it() {
        use clap::Parser;
        #[derive(Debug, Parser)]
        struct Flags {
            #[arg(long, env = "TRUSTMSG_TEST_QUIET_URL", value_parser = quiet::<RedactedUrl>())]
            url: RedactedUrl,
        }
        let err = Flags::try_parse_from(["t", "--url", "https://u:hunter2#swordfish@h/"])
            .unwrap_err()
            .to_string();
        assert!(
            !err.contains("hunter2") && !err.contains("swordfish"),
            "{err}"
        );
        assert!(
            err.contains("--url (or TRUSTMSG_TEST_QUIET_URL) is not a usable URL"),
            "{err}"
        );
    }
}
