//! A database server of the test's own, MariaDB or PostgreSQL: the kill -9
//! ledger and the fault campaign run the same scenario on either, chosen
//! by [`Database`], and kill, freeze and restart it through
//! [`PrivateDb`] without caring which it is.

use crate::{PrivateMariaDb, PrivatePostgres};

/// Which server trustmsg's store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Database {
    /// MariaDB (`mysql://`).
    MariaDb,
    /// PostgreSQL (`postgres://`).
    Postgres,
}

impl Database {
    /// The database named by the environment variable `var`
    /// (`mariadb` or `postgres`), `default` when it is unset; panics with
    /// what it accepts on anything else.
    pub fn from_env(var: &str, default: Self) -> Self {
        match std::env::var(var) {
            Err(_) => default,
            Ok(v) => v.parse().unwrap_or_else(|e| panic!("{var}: {e}")),
        }
    }
}

impl std::str::FromStr for Database {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "mariadb" | "mysql" => Ok(Self::MariaDb),
            "postgres" | "postgresql" => Ok(Self::Postgres),
            _ => Err(format!(
                "{s:?} is no database the tests know: say mariadb or postgres"
            )),
        }
    }
}

impl std::fmt::Display for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::MariaDb => "MariaDB",
            Self::Postgres => "PostgreSQL",
        })
    }
}

/// A private server of either kind; killed (and its data deleted) when
/// dropped.
pub enum PrivateDb {
    /// A private `mariadbd`.
    MariaDb(PrivateMariaDb),
    /// A private `postgres`.
    Postgres(PrivatePostgres),
}

impl PrivateDb {
    /// Starts a private server of `database`; returns once it accepts
    /// connections.
    pub async fn start(database: Database) -> Self {
        match database {
            Database::MariaDb => Self::MariaDb(PrivateMariaDb::start().await),
            Database::Postgres => Self::Postgres(PrivatePostgres::start().await),
        }
    }

    /// Which server it is.
    pub fn database(&self) -> Database {
        match self {
            Self::MariaDb(_) => Database::MariaDb,
            Self::Postgres(_) => Database::Postgres,
        }
    }

    /// The URL of `database` on it, as the server's superuser.
    pub fn url(&self, database: &str) -> String {
        match self {
            Self::MariaDb(db) => db.url(database),
            Self::Postgres(db) => db.url(database),
        }
    }

    /// SIGKILL of the whole server (nothing flushed beyond what it already
    /// made durable).
    pub fn kill_9(&mut self) {
        match self {
            Self::MariaDb(db) => db.kill_9(),
            Self::Postgres(db) => db.kill_9(),
        }
    }

    /// SIGSTOP: frozen, its connections open but unanswered.
    pub fn pause(&self) {
        match self {
            Self::MariaDb(db) => db.pause(),
            Self::Postgres(db) => db.pause(),
        }
    }

    /// SIGCONT after [`PrivateDb::pause`].
    pub fn resume(&self) {
        match self {
            Self::MariaDb(db) => db.resume(),
            Self::Postgres(db) => db.resume(),
        }
    }

    /// Starts it again on the same data and port, killing it first if it
    /// runs; returns once it accepts connections (its crash recovery done).
    pub async fn restart(&mut self) {
        match self {
            Self::MariaDb(db) => db.restart().await,
            Self::Postgres(db) => db.restart().await,
        }
    }

    /// Creates the empty database `name` on it.
    pub async fn create_database(&self, name: &str) {
        match self.database() {
            Database::MariaDb => {
                let pool = sqlx::mysql::MySqlPoolOptions::new()
                    .max_connections(1)
                    .connect(&self.url(""))
                    .await
                    .expect("connect to the private MariaDB");
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
                    .execute(&pool)
                    .await
                    .expect("create a database");
                pool.close().await;
            }
            Database::Postgres => {
                let pool = sqlx::postgres::PgPoolOptions::new()
                    .max_connections(1)
                    .connect(&self.url("postgres"))
                    .await
                    .expect("connect to the private PostgreSQL");
                sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
                    .execute(&pool)
                    .await
                    .expect("create a database");
                pool.close().await;
            }
        }
    }
}
