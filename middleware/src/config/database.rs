//! `--database-url` and `--replica-url`: where the store lives.

use clap::Args;

use crate::net::secret::quiet;
use crate::store::DatabaseUrl;

/// Where the store lives. The URLs are parsed here, once, into
/// [`DatabaseUrl`]s, which never show their passwords; one that cannot be
/// used is refused without being repeated.
#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// Database URL: `mysql://user:pass@host:3306/db` (MySQL ≥ 8.0, MariaDB
    /// ≥ 10.6), `postgres://user:pass@host:5432/db` (PostgreSQL ≥ 13; TLS
    /// with sqlx's `?sslmode=verify-full&sslrootcert=…`) or
    /// `sqlite://path.db?mode=rwc`; characters such as `# / ? @ %` in the
    /// user name or password percent-encoded (`%23 %2F %3F %40 %25`). Repeat
    /// it to spread messages over several MySQL/MariaDB databases (shards,
    /// docs/scaling.md; not PostgreSQL, which is refused there for now): the
    /// first also holds the producers, the consumer groups and the slot map,
    /// and the list keeps the order it was first given in.
    #[arg(long = "database-url", env = "TRUSTMSG_DATABASE_URL", hide_env_values = true, required = true, value_parser = quiet::<DatabaseUrl>())]
    pub database_urls: Vec<DatabaseUrl>,

    /// A read replica of a `--database-url` (MySQL/MariaDB), repeatable: the
    /// first `--replica-url` is the first database's, and so on. Operator
    /// views that read much (message and alert lists, the summary, the
    /// backlog gauges) read it, as stale as its lag; claims, decisions and
    /// single-message reads never do. Falls back to the database itself
    /// while the replica does not answer.
    #[arg(long = "replica-url", env = "TRUSTMSG_REPLICA_URL", hide_env_values = true, value_parser = quiet::<DatabaseUrl>())]
    pub replica_urls: Vec<DatabaseUrl>,
}

impl DatabaseArgs {
    /// The URLs, first the one that holds the registry.
    pub fn urls(&self) -> &[DatabaseUrl] {
        &self.database_urls
    }

    /// The replicas' URLs, in the order of the databases they copy.
    pub fn replicas(&self) -> &[DatabaseUrl] {
        &self.replica_urls
    }
}
