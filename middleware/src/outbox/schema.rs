//! The producer's table: its `CREATE TABLE` in each dialect (the files in
//! `migrations/outbox/`, which ship in the repository as they are), under
//! the name a deployment chose.

use std::fmt;

/// The dialects `trustmsg outbox schema` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SchemaDialect {
    /// MySQL >= 8.0 or MariaDB >= 10.6.
    Mysql,
    /// PostgreSQL >= 13.
    Postgres,
    /// SQLite (`trustmsg dev`'s demo source, single-machine producers).
    Sqlite,
}

impl fmt::Display for SchemaDialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Mysql => "mysql",
            Self::Postgres => "postgres",
            Self::Sqlite => "sqlite",
        })
    }
}

/// The table's name when none is chosen.
pub const DEFAULT_TABLE: &str = "trustmsg_outbox";

const MYSQL: &str = include_str!("../../../migrations/outbox/mysql.sql");
const POSTGRES: &str = include_str!("../../../migrations/outbox/postgres.sql");
const SQLITE: &str = include_str!("../../../migrations/outbox/sqlite.sql");

/// A table name the relay can put in its statements unquoted: 1 to 64 of
/// `A-Z a-z 0-9 _`, not starting with a digit.
pub fn check_table(name: &str) -> Result<(), String> {
    trustmsg_verify_api::rules::outbox_table(name).map_err(|r| r.message)
}

/// The `CREATE TABLE` (and its indexes) of the outbox table `table`.
pub fn schema(dialect: SchemaDialect, table: &str) -> String {
    let sql = match dialect {
        SchemaDialect::Mysql => MYSQL,
        SchemaDialect::Postgres => POSTGRES,
        SchemaDialect::Sqlite => SQLITE,
    };
    // Every name in the files starts with the default one (the table's, and
    // the indexes' as `…_trustmsg_outbox_…`).
    sql.replace(DEFAULT_TABLE, table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chosen_name_replaces_the_table_and_its_index_names() {
        let sql = schema(SchemaDialect::Mysql, "orders_outbox");
        assert!(sql.contains("CREATE TABLE IF NOT EXISTS orders_outbox ("));
        assert!(sql.contains("KEY idx_orders_outbox_status (status, id)"));
        assert!(!sql.contains(DEFAULT_TABLE));
    }

    #[test]
    fn table_names_that_would_need_quoting_are_refused() {
        for bad in ["", "1x", "a-b", "a b", "t;drop", &"x".repeat(65)] {
            assert!(check_table(bad).is_err(), "{bad:?}");
        }
        for good in ["trustmsg_outbox", "T1", "_x"] {
            assert!(check_table(good).is_ok(), "{good:?}");
        }
    }
}
