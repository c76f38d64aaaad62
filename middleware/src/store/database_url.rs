//! `--database-url` and `--replica-url`, parsed once where they come in (the
//! flags) into a [`DatabaseUrl`]; nothing past the flags holds a database URL
//! as text (issue 42).
//!
//! Why a type: a URL's password reaches every error context, log line and
//! `/readyz` shard name that names the database. Passed around as a string,
//! each of those had to remember to redact it, and the ones that forgot (or
//! whose redaction could not parse the URL) printed it. A [`DatabaseUrl`]'s
//! `Display` and `Debug` show it with the password as `***`; only the code
//! that hands it to the driver (sqlx) reads the text, through
//! [`DatabaseUrl::expose_for_driver`].
//!
//! What is refused, and why:
//! - a scheme this build has no backend for, or none (`mysql//…`);
//! - a `mysql://` (or `postgres://`) URL that does not parse, or that parses into something
//!   other than what its writer meant: a `#`, `/` or `?` unescaped in a
//!   password ends the host there, so the password's head becomes a port
//!   (refused as invalid) or a host, and its tail a fragment, a path or a
//!   query. So a fragment, a database name of more than one path segment,
//!   and an `@` after the host are refused: each is what a password with an
//!   unescaped `#`, `/`, `?` leaves behind, and showing it would show part
//!   of the password. An `@` in a password is unambiguous (the host follows
//!   the last `@`, in URL parsers and sqlx alike) and is accepted.
//!
//! A refusal never repeats the URL: it says what is wrong and how to write
//! it, and shows at most the scheme and what follows the last `@`.

use std::fmt;

use percent_encoding::percent_decode_str;

use crate::net::secret::{hide_userinfo, redacted};

/// The database family a URL's scheme names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `mysql://` (MySQL or MariaDB).
    MySql,
    /// `sqlite:` (a file, or `sqlite::memory:`).
    Sqlite,
    /// `postgres://` or `postgresql://` (PostgreSQL ≥ 13).
    Postgres,
}

impl Backend {
    /// The backend `scheme` (any case) names, or why it is refused.
    fn of_scheme(scheme: &str) -> Result<Self, UrlRefused> {
        match scheme.to_ascii_lowercase().as_str() {
            "mysql" => Ok(Self::MySql),
            "sqlite" => Ok(Self::Sqlite),
            "postgres" | "postgresql" => Ok(Self::Postgres),
            _ => Err(no_scheme()),
        }
    }
}

/// Why a database URL was refused, in words an operator can act on. It
/// never holds the URL's password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UrlRefused(String);

/// How to write a password, said by every refusal that may come from one.
const ENCODE: &str = "characters such as # / ? @ % in the user name or password must be \
                      percent-encoded (# as %23, / as %2F, ? as %3F, @ as %40, % as %25)";

fn no_scheme() -> UrlRefused {
    UrlRefused(
        "does not start with a scheme this build knows: write \
         mysql://user:password@host:3306/database (MySQL, MariaDB), \
         postgres://user:password@host:5432/database (PostgreSQL) or sqlite://path.db \
         (the value is not shown: it may hold a password)"
            .into(),
    )
}

/// A database URL, checked; see the module docs. `Display` and `Debug` show
/// it with its password as `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl {
    backend: Backend,
    /// The URL as given: what the driver gets.
    raw: String,
    /// The URL with its password as `***`: what everything else shows.
    shown: String,
}

impl DatabaseUrl {
    /// Parses and checks `s` as trustmsg's own database (MySQL/MariaDB,
    /// PostgreSQL or SQLite); see the module docs for what is refused.
    pub fn parse(s: &str) -> Result<Self, UrlRefused> {
        Self::parse_any(s)
    }

    /// Parses and checks `s` as a producer's database holding an outbox
    /// table (`--outbox-source`): MySQL/MariaDB, PostgreSQL or SQLite.
    pub fn parse_outbox_source(s: &str) -> Result<Self, UrlRefused> {
        Self::parse_any(s)
    }

    fn parse_any(s: &str) -> Result<Self, UrlRefused> {
        let s = s.trim();
        if s.is_empty() {
            return Err(UrlRefused("is empty".into()));
        }
        let scheme = scheme_of(s).ok_or_else(no_scheme)?;
        match Backend::of_scheme(scheme)? {
            Backend::MySql => Self::server(s, scheme, Backend::MySql),
            Backend::Postgres => Self::server(s, scheme, Backend::Postgres),
            // A SQLite URL is a path: sqlx reads it itself, and it holds
            // no credentials to hide.
            Backend::Sqlite => Ok(Self {
                backend: Backend::Sqlite,
                raw: s.to_string(),
                shown: s.to_string(),
            }),
        }
    }

    /// A database server's URL (`mysql://`, `postgres://`): checked so that
    /// a password with an unescaped `# / ?` is refused, never shown.
    fn server(s: &str, scheme: &str, backend: Backend) -> Result<Self, UrlRefused> {
        let (kind, example) = match backend {
            Backend::Postgres => ("postgres://", "postgres://user:password@host:5432/database"),
            _ => ("mysql://", "mysql://user:password@host:3306/database"),
        };
        let refuse = |why: &str| {
            UrlRefused(format!(
                "is not a usable {kind} URL ({why}; {}): {ENCODE}",
                hide_userinfo(s, scheme)
            ))
        };
        if !s[scheme.len()..].starts_with("://") {
            return Err(UrlRefused(format!(
                "starts with {scheme:?} but not {scheme}://: write {example} (the value is not \
                 shown: it may hold a password)"
            )));
        }
        let url = url::Url::parse(s).map_err(|e| refuse(&e.to_string()))?;
        if url.fragment().is_some() {
            return Err(refuse("a `#` ends it early"));
        }
        let after_host = format!("{}{}", url.path(), url.query().unwrap_or(""));
        if after_host.contains('@') {
            return Err(refuse("an `@` after the host"));
        }
        if url.path().trim_start_matches('/').contains('/') {
            return Err(refuse("a database name with a `/`"));
        }
        for part in [url.username(), url.password().unwrap_or("")] {
            if percent_decode_str(part).decode_utf8().is_err() {
                return Err(refuse(
                    "the user name or password is not UTF-8 once decoded",
                ));
            }
        }
        Ok(Self {
            backend,
            raw: s.to_string(),
            shown: redacted(&url),
        })
    }

    /// The backend its scheme names.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The URL as given, password and all: only for the code that hands it
    /// to the database driver (or to a `trustmsg` child process, which
    /// parses it again). Never format it.
    pub fn expose_for_driver(&self) -> &str {
        &self.raw
    }

    /// The same database server (MySQL or PostgreSQL) with another
    /// database (None: none, to create or drop databases there; PostgreSQL
    /// then connects to the database named as its user); the user,
    /// password and parameters are kept. Refused for a SQLite URL.
    pub fn with_database(&self, name: Option<&str>) -> Result<Self, UrlRefused> {
        if self.backend == Backend::Sqlite {
            return Err(UrlRefused(format!(
                "{self} is not a mysql:// or postgres:// URL: a database server is needed here"
            )));
        }
        let mut url = url::Url::parse(&self.raw).expect("checked when it was parsed");
        url.set_path(name.map(|n| format!("/{n}")).as_deref().unwrap_or(""));
        let raw = url.to_string();
        Ok(Self {
            backend: self.backend,
            shown: redacted(&url),
            raw,
        })
    }
}

/// The scheme of `s`: what precedes its first `:`, when that is a scheme's
/// letters (so a URL with none yields nothing rather than its user name).
fn scheme_of(s: &str) -> Option<&str> {
    let (scheme, _) = s.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

impl std::str::FromStr for DatabaseUrl {
    type Err = UrlRefused;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("DatabaseUrl").field(&self.shown).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::mysql::MySqlConnectOptions;

    /// The password the tests hide, and its two halves (either one showing
    /// is a leak).
    const HALVES: [&str; 2] = ["hunter2", "swordfish"];

    fn leaks(text: &str) -> bool {
        HALVES.iter().any(|h| text.contains(h))
    }

    #[test]
    fn display_and_debug_never_show_the_password() {
        for given in [
            "mysql://root:hunter2swordfish@127.0.0.1:3306/db",
            "mysql://root:hunter2%23swordfish@db.internal/db?ssl-mode=REQUIRED",
            "mysql://root:hunter2%2F%3F%40%25swordfish@127.0.0.1:1/x",
            // An unescaped `@` is read as the password's (the host follows
            // the last one).
            "mysql://root:hunter2@swordfish@127.0.0.1:1/x",
            "MYSQL://root:hunter2swordfish@h/x",
        ] {
            let url = DatabaseUrl::parse(given).expect(given);
            let shown = format!("{url} {url:?} {:?}", Some(&url));
            assert!(!leaks(&shown), "{given} shows {shown}");
            assert!(shown.contains("root:***@"), "{shown}");
            assert_eq!(url.backend(), Backend::MySql);
        }
    }

    #[test]
    fn percent_escaped_passwords_reach_the_driver_unchanged() {
        let given = "mysql://us%40er:p%23w%2Fo%3Fr%40d%25%3A@127.0.0.1:3307/db";
        let url = DatabaseUrl::parse(given).unwrap();
        assert_eq!(url.expose_for_driver(), given);
        let opts: MySqlConnectOptions = url.expose_for_driver().parse().unwrap();
        assert_eq!(opts.get_username(), "us@er");
        assert_eq!(opts.get_port(), 3307);
        assert_eq!(opts.get_database(), Some("db"));
        // sqlx keeps the password to itself; its URL form re-encodes it.
        let back = sqlx::ConnectOptions::to_url_lossy(&opts);
        let password = percent_decode_str(back.password().unwrap())
            .decode_utf8()
            .unwrap();
        assert_eq!(password, "p#w/o?r@d%:");
    }

    #[test]
    fn a_password_with_unescaped_hash_slash_or_question_mark_is_refused_without_showing_it() {
        for given in [
            "mysql://root:hunter2#swordfish@127.0.0.1:1/x",
            "mysql://root:hunter2/swordfish@127.0.0.1:1/x",
            "mysql://root:hunter2?swordfish@127.0.0.1:1/x",
            // All digits before the character: the URL parses, the head
            // as a port and the tail as a fragment, a path or a query.
            "mysql://root:1234#hunter2swordfish@127.0.0.1:1/x",
            "mysql://root:1234/hunter2swordfish@127.0.0.1:1/x",
            "mysql://root:1234?hunter2swordfish@127.0.0.1:1/x",
            "mysql://root:1234/hunter2/swordfish",
        ] {
            let why = DatabaseUrl::parse(given).expect_err(given).to_string();
            assert!(!leaks(&why), "{given}: {why}");
            assert!(
                why.contains("percent-encoded") && why.contains("%23"),
                "{why}"
            );
        }
        let why = DatabaseUrl::parse("mysql://root:hunter2#swordfish@127.0.0.1:1/x")
            .unwrap_err()
            .to_string();
        assert!(why.contains("shown as mysql://***@127.0.0.1:1/x"), "{why}");
    }

    #[test]
    fn a_url_without_a_known_scheme_is_refused_without_showing_it() {
        for given in [
            "mysql//root:hunter2swordfish@127.0.0.1:3306/x",
            "mysql:/root:hunter2swordfish@127.0.0.1:3306/x",
            "mysql:root:hunter2swordfish@127.0.0.1:3306/x",
            "root:hunter2swordfish@127.0.0.1:3306/x",
            "hunter2swordfish",
            "mysqlx://root:hunter2swordfish@h/x",
            "://root:hunter2swordfish@h/x",
        ] {
            let why = DatabaseUrl::parse(given).expect_err(given).to_string();
            assert!(!leaks(&why), "{given}: {why}");
            assert!(why.contains("mysql://user:password@host"), "{given}: {why}");
        }
    }

    #[test]
    fn postgresql_is_trustmsgs_own_database_too_and_never_shows_its_password() {
        for given in [
            "postgres://u:hunter2swordfish@h/db",
            "postgresql://u:hunter2swordfish@h/db?sslmode=verify-full",
        ] {
            let url = DatabaseUrl::parse(given).expect(given);
            assert_eq!(url.backend(), Backend::Postgres);
            assert_eq!(url.expose_for_driver(), given);
            assert!(!leaks(&format!("{url} {url:?}")), "{url}");
        }
        let why = DatabaseUrl::parse("postgres://u:hunter2#swordfish@h/db")
            .unwrap_err()
            .to_string();
        assert!(!leaks(&why) && why.contains("%23"), "{why}");
    }

    #[test]
    fn an_outbox_source_may_be_postgresql_and_never_shows_its_password() {
        for given in [
            "postgres://u:hunter2swordfish@h/db",
            "postgresql://u:hunter2%23swordfish@h:5433/db?sslmode=verify-full",
        ] {
            let url = DatabaseUrl::parse_outbox_source(given).expect(given);
            assert_eq!(url.backend(), Backend::Postgres);
            assert_eq!(url.expose_for_driver(), given);
            let shown = format!("{url} {url:?}");
            assert!(!leaks(&shown) && shown.contains("u:***@h"), "{shown}");
        }
        let why = DatabaseUrl::parse_outbox_source("postgres://u:hunter2#swordfish@h/db")
            .unwrap_err()
            .to_string();
        assert!(
            !leaks(&why) && why.contains("postgres://") && why.contains("%23"),
            "{why}"
        );
        for given in ["mysql://u:p@h/db", "sqlite://x.db"] {
            assert!(DatabaseUrl::parse_outbox_source(given).is_ok(), "{given}");
        }
    }

    #[test]
    fn sqlite_urls_pass_as_given() {
        for given in ["sqlite::memory:", "sqlite://x.db?mode=rwc", "sqlite:x.db"] {
            let url = DatabaseUrl::parse(given).unwrap();
            assert_eq!(url.backend(), Backend::Sqlite);
            assert_eq!(url.expose_for_driver(), given);
            assert_eq!(url.to_string(), given);
        }
    }

    #[test]
    fn another_database_on_the_same_server_keeps_the_credentials_hidden() {
        let url =
            DatabaseUrl::parse("mysql://root:hunter2swordfish@h:3306/x?ssl-mode=DISABLED").unwrap();
        let server = url.with_database(None).unwrap();
        assert_eq!(
            server.to_string(),
            "mysql://root:***@h:3306?ssl-mode=DISABLED"
        );
        let other = url.with_database(Some("bench_1")).unwrap();
        assert_eq!(
            other.to_string(),
            "mysql://root:***@h:3306/bench_1?ssl-mode=DISABLED"
        );
        assert_eq!(
            other.expose_for_driver(),
            "mysql://root:hunter2swordfish@h:3306/bench_1?ssl-mode=DISABLED"
        );
        let pg = DatabaseUrl::parse("postgres://postgres:hunter2swordfish@h:5432/x").unwrap();
        let other = pg.with_database(Some("bench_1")).unwrap();
        assert_eq!(other.to_string(), "postgres://postgres:***@h:5432/bench_1");
        assert_eq!(other.backend(), Backend::Postgres);
        let sqlite = DatabaseUrl::parse("sqlite://x.db").unwrap();
        assert!(sqlite.with_database(None).is_err());
    }
}
