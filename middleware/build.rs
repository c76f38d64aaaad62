//! Lists the migrations for the binary. Each backend's folder under
//! `../migrations` becomes a list of `(version, description, SQL)` that
//! `store::migrations` hands to sqlx's `Migrator`, with the SQL embedded by
//! `include_str!`. This is what `sqlx::migrate!` does, without sqlx's
//! proc-macro crate: that crate builds sqlx with every driver and rustls a
//! second time for the compiler host, a large part of a cold build. Cargo
//! runs this again when a migration is added, removed or changed.

use std::fmt::Write as _;
use std::path::Path;
use std::{env, fs};

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
    let mut out = String::new();
    for backend in ["mysql", "postgres", "sqlite"] {
        let dir = Path::new("../migrations").join(backend);
        println!("cargo:rerun-if-changed={}", dir.display());
        let mut files: Vec<(i64, String, String)> = Vec::new();
        for entry in fs::read_dir(&dir).expect("the migrations folder") {
            let path = entry.expect("a migrations folder entry").path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            // sqlx's naming: <VERSION>_<DESCRIPTION>.sql, '_' read as ' '.
            let Some((version, rest)) = name.split_once('_') else {
                continue;
            };
            let Some(description) = rest.strip_suffix(".sql") else {
                continue;
            };
            let version: i64 = version
                .parse()
                .unwrap_or_else(|_| panic!("migration {name}: no integer version before '_'"));
            assert!(
                !description.ends_with(".up") && !description.ends_with(".down"),
                "migration {name}: reversible migrations are not supported"
            );
            let path = fs::canonicalize(&path).expect("a migration's path");
            println!("cargo:rerun-if-changed={}", path.display());
            files.push((
                version,
                description.replace('_', " "),
                path.display().to_string(),
            ));
        }
        files.sort();
        writeln!(
            out,
            "pub(super) const {}: &[(i64, &str, &str)] = &[",
            backend.to_uppercase()
        )
        .unwrap();
        for (version, description, path) in files {
            writeln!(
                out,
                "    ({version}, {description:?}, include_str!({path:?})),"
            )
            .unwrap();
        }
        writeln!(out, "];").unwrap();
    }
    let dest = Path::new(&env::var("OUT_DIR").unwrap()).join("migrations.rs");
    fs::write(dest, out).expect("writing the migrations list");
}
