//! `sqlx::migrate!` embeds the migrations at compile time, and cargo does not know
//! about those files: without this, a new migration is silently left out of the
//! binary until some Rust source changes.

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
