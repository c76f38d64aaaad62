//! `trustmsg serve` refuses a bad configuration before it touches anything:
//! exit code 2 and one line that names the flag, and no database is created.

use std::process::{Command, Output};

/// Runs `trustmsg serve` over a SQLite file in a fresh directory with `extra`
/// flags; returns the output and whether the database file appeared.
fn serve(extra: &[&str]) -> (Output, bool) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("trustmsg.db");
    let out = Command::new(env!("CARGO_BIN_EXE_trustmsg"))
        .args([
            "serve",
            "--database-url",
            &format!("sqlite://{}?mode=rwc", db.display()),
            "--admin-token",
            "t",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(extra)
        .env_remove("TRUSTMSG_LOG")
        .output()
        .unwrap();
    (out, db.exists())
}

fn assert_refused(extra: &[&str], expected: &[&str]) {
    let (out, created) = serve(extra);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
    let first = stderr.lines().next().unwrap_or_default();
    for needle in expected {
        assert!(first.contains(needle), "{extra:?}: first line {first:?}");
    }
    assert!(
        !created,
        "{extra:?}: the database was created before the refusal"
    );
}

#[test]
fn zero_workers_batches_and_intervals_are_refused_with_a_line_naming_the_flag() {
    for flag in [
        "--write-workers",
        "--write-batch",
        "--sweep-batch",
        "--verify-concurrency",
    ] {
        assert_refused(&[flag, "0"], &[flag, "at least 1"]);
    }
    for flag in ["--sweep-interval", "--verify-interval"] {
        assert_refused(&[flag, "0s"], &[flag, "longer than 0"]);
    }
    assert_refused(
        &["--verify-lease-margin", "500ms"],
        &["--verify-lease-margin", "at least 1s"],
    );
}

#[test]
fn a_lease_shorter_than_what_it_covers_is_refused_with_a_line_naming_both_flags() {
    assert_refused(
        &[
            "--kafka-brokers",
            "127.0.0.1:9",
            "--kafka-message-timeout",
            "30s",
            "--send-lease",
            "20s",
        ],
        &["--send-lease (20s)", "--kafka-message-timeout (30s)"],
    );
    // A registration may ask for check-back calls of up to 2 min by default.
    assert_refused(
        &["--verify-timeout", "3m"],
        &["--verify-timeout (3m)", "--verify-timeout-max (2m)"],
    );
}
