//! The schema's migrations, one list per SQL backend, embedded in the binary
//! by `build.rs` from `migrations/<backend>/NNNN_description.sql`.
//!
//! sqlx's `Migrator` applies them and keeps `_sqlx_migrations`. A migration's
//! checksum is the SHA-384 of its SQL, as `sqlx::migrate!` computes it, so a
//! database migrated by an earlier build (made with that macro) is recognised
//! and nothing already applied is run again or reported as changed. A file
//! that starts with `-- no-transaction` runs outside a transaction, as with
//! the macro.

use std::borrow::Cow;

use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{AssertSqlSafe, SqlSafeStr, SqlStr};

mod list {
    include!(concat!(env!("OUT_DIR"), "/migrations.rs"));
}

/// The MySQL/MariaDB migrations.
pub(crate) fn mysql() -> Migrator {
    migrator(list::MYSQL)
}

/// The PostgreSQL migrations.
pub(crate) fn postgres() -> Migrator {
    migrator(list::POSTGRES)
}

/// The SQLite migrations.
pub(crate) fn sqlite() -> Migrator {
    migrator(list::SQLITE)
}

/// Migration 0020, time partitions. On a store that holds rows, the
/// backend's online steps (`mysql::upgrade`, `postgres::upgrade`) do what
/// its file would do under a long lock, and the file's SQL is
/// [`replaced`] by what is left.
pub(crate) const TIME_PARTITIONS: i64 = 20;

/// `migrator` with migration `version` run as `sql` instead of its file,
/// and recorded under the file's checksum, as if the file had run: what the
/// online steps and `sql` leave is what the file makes
/// (`tests/it/store/partitions.rs` compares the two).
pub(crate) fn replaced(migrator: &Migrator, version: i64, sql: String) -> Migrator {
    Migrator::with_migrations(
        migrator
            .iter()
            .map(|m| match m.version == version {
                true => Migration {
                    sql: AssertSqlSafe(sql.clone()).into_sql_str(),
                    ..m.clone()
                },
                false => m.clone(),
            })
            .collect(),
    )
}

/// The SQL of migration `version` of `migrator`.
pub(crate) fn sql_of(migrator: &Migrator, version: i64) -> &str {
    migrator
        .iter()
        .find(|m| m.version == version)
        .map(|m| m.sql.as_str())
        .expect("the migration is listed")
}

/// The statement of migration `version`'s file that begins with `head`,
/// through its `;` (for steps that make what the file makes, made
/// otherwise).
pub(crate) fn statement(migrator: &Migrator, version: i64, head: &str) -> String {
    let sql = sql_of(migrator, version);
    let from = sql.find(head).expect("the migration holds the statement");
    let to = from + sql[from..].find(';').expect("the statement ends");
    sql[from..to].to_owned()
}

fn migrator(list: &'static [(i64, &'static str, &'static str)]) -> Migrator {
    Migrator::with_migrations(
        list.iter()
            .map(|&(version, description, sql)| {
                Migration::new(
                    version,
                    Cow::Borrowed(description),
                    MigrationType::Simple,
                    SqlStr::from_static(sql),
                    sql.starts_with("-- no-transaction"),
                )
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_migration_file_is_listed_in_version_order() {
        for (backend, list) in [
            ("mysql", list::MYSQL),
            ("postgres", list::POSTGRES),
            ("sqlite", list::SQLITE),
        ] {
            let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations");
            let files = std::fs::read_dir(format!("{dir}/{backend}"))
                .unwrap()
                .filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .file_name()
                        .to_string_lossy()
                        .ends_with(".sql")
                })
                .count();
            assert_eq!(list.len(), files, "{backend}");
            assert!(list.windows(2).all(|w| w[0].0 < w[1].0), "{backend}");
            assert_eq!(list[0].1, "init");
        }
    }
}
