//! Fault injection for the tests of recovery, at the exact points a
//! `kill -9` can only hit by chance. The process exits at once (status 86,
//! nothing flushed, no mark written):
//! - `TRUSTMSG_FAULT_EXIT_AFTER_KAFKA_COMMITS=N`: right after its N-th
//!   committed transaction, before the SENT marks;
//! - `TRUSTMSG_FAULT_EXIT_BEFORE_KAFKA_COMMIT=1`: with its first
//!   transaction's records written and acknowledged, before the commit.
//!
//! With `TRUSTMSG_FAULT_HOLD_FIRST_SEND_MS=N` the exactly-once worker waits
//! N ms with its first batch claimed before it sends it: past a short
//! `--send-lease`, its claimer takes the batch's rows again meanwhile.
//!
//! And with `TRUSTMSG_FAULT_STOP_AFTER_CLAIM=1` it stops itself (SIGSTOP)
//! once, with its first claim taken and no transaction begun: a zombie,
//! which goes on where it stopped once sent SIGCONT.
//!
//! Not for production.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

const EXIT_AFTER: &str = "TRUSTMSG_FAULT_EXIT_AFTER_KAFKA_COMMITS";
const EXIT_BEFORE: &str = "TRUSTMSG_FAULT_EXIT_BEFORE_KAFKA_COMMIT";

pub(super) fn after_claim() {
    static STOP: OnceLock<bool> = OnceLock::new();
    static STOPPED: AtomicU64 = AtomicU64::new(0);
    let wanted = *STOP
        .get_or_init(|| std::env::var("TRUSTMSG_FAULT_STOP_AFTER_CLAIM").is_ok_and(|v| v == "1"));
    if wanted && STOPPED.fetch_add(1, Ordering::Relaxed) == 0 {
        eprintln!("TRUSTMSG_FAULT_STOP_AFTER_CLAIM=1: stopping with a claim taken");
        let _ = std::process::Command::new("kill")
            .args(["-STOP", &std::process::id().to_string()])
            .status();
    }
}

pub(super) async fn hold_first_send() {
    static HOLD: OnceLock<Option<u64>> = OnceLock::new();
    static HELD: AtomicU64 = AtomicU64::new(0);
    let hold = *HOLD.get_or_init(|| {
        std::env::var("TRUSTMSG_FAULT_HOLD_FIRST_SEND_MS")
            .ok()?
            .parse()
            .ok()
    });
    if let Some(ms) = hold {
        if HELD.fetch_add(1, Ordering::Relaxed) == 0 {
            eprintln!("TRUSTMSG_FAULT_HOLD_FIRST_SEND_MS={ms}: holding the first batch");
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
    }
}

pub(super) fn before_kafka_commit() {
    static BEFORE: OnceLock<bool> = OnceLock::new();
    if *BEFORE.get_or_init(|| std::env::var(EXIT_BEFORE).is_ok_and(|v| v == "1")) {
        eprintln!(
            "{EXIT_BEFORE}=1: exiting with a transaction's records written, before its commit"
        );
        std::process::exit(86);
    }
}

pub(super) fn after_kafka_commit() {
    static AFTER: OnceLock<Option<u64>> = OnceLock::new();
    static COMMITS: AtomicU64 = AtomicU64::new(0);
    let Some(n) = *AFTER.get_or_init(|| std::env::var(EXIT_AFTER).ok()?.parse().ok()) else {
        return;
    };
    if COMMITS.fetch_add(1, Ordering::Relaxed) + 1 >= n {
        eprintln!("{EXIT_AFTER}={n}: exiting after Kafka's commit, before the SENT marks");
        std::process::exit(86);
    }
}
