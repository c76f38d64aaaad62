//! The fault campaign (issues 10 and 26): three `trustmsg serve` processes
//! on one private MariaDB (or PostgreSQL), a Kafka mock cluster, real check-back endpoints,
//! and producers running the whole protocol with the SDK, while one fault
//! per cycle hits them: kill -9 of an instance, SIGSTOP of an instance past
//! its leases then SIGCONT (a zombie writer coming back), kill -9 of the
//! database and restart, the brokers down for longer than the Kafka message
//! timeout, the check endpoint hanging, the check endpoint answering garbage
//! and 500, kill -9 of the instance whose check-back calls are in flight,
//! kill -9 while alerts are raised and the webhook refuses them, the
//! database frozen (SIGSTOP) past the request deadline, and a broker that
//! comes back without its state.
//!
//! Then a ledger judges, from what the producers were told, what the
//! database holds, what reached Kafka and what reached the alert webhook:
//! - lost = 0: every commit acknowledged to a producer (and every message
//!   whose producer committed locally and never called, decided by
//!   check-back) was consumed at least once, payload and key byte for byte,
//!   or acknowledged by a broker that then lost it with its state (Kafka's
//!   loss, counted apart);
//! - wrong = 0: nothing consumed that was rolled back, tombstoned or never
//!   committed;
//! - every prepared message ended decided, or VERIFY_FAILED;
//! - every entry into VERIFY_FAILED or SEND_FAILED has exactly one distinct
//!   alert id at the webhook (repeats of an id are counted, not failed);
//! - duplicates are counted and attributed to the fault of their window;
//! - each cycle recovered fully within a minute of its fault's end
//!   (`recovery`), and how long it took, per fault kind.
//!
//! `TRUSTMSG_CHAOS_CYCLES` sets the number of cycles (default: one per
//! fault kind, the short run CI does), `TRUSTMSG_CHAOS_DATABASE` the server
//! (`mariadb`, the default, or `postgres`); `scripts/chaos` runs the long
//! one and `TRUSTMSG_CHAOS_REPORT=path` writes the figures as Markdown.
//!
//! CI also runs a short campaign on PostgreSQL: one cycle of each fault
//! that hits the database or leans on what it guarantees
//! ([`DATABASE_FAULTS`]); the others (Kafka's, the endpoints') test
//! trustmsg's workers, which are the same over either store.

mod alerts;
mod ledger;
mod load;
mod procnet;
mod recovery;
mod rig;
mod sql;

use std::time::{Duration, Instant};

use ledger::Ledger;
use recovery::Recovery;
use rig::{Fault, Rig, FAULTS};
use trustmsg_tests::Database;

/// Load before the fault, and at least this long after it in each cycle
/// (longer while the campaign has not recovered).
const WARM: Duration = Duration::from_millis(1500);
const RECOVER: Duration = Duration::from_millis(1500);

/// The faults of the short PostgreSQL campaign: the database killed with
/// -9 and brought back (WAL recovery under three live instances), the
/// database frozen past the request deadline, and an instance frozen past
/// its leases (a zombie writer whose guarded UPDATEs must change nothing
/// once another instance took its rows over).
const DATABASE_FAULTS: [Fault; 3] = [
    Fault::KillDatabase,
    Fault::FreezeDatabase,
    Fault::PauseInstance,
];

/// One campaign at a time in a process (`cargo test` runs a binary's
/// tests side by side; each campaign loads the machine and times what it
/// sees).
static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn under_every_fault_nothing_acknowledged_is_lost_and_nothing_rolled_back_is_published() {
    let database = Database::from_env("TRUSTMSG_CHAOS_DATABASE", Database::MariaDb);
    let cycles: usize = std::env::var("TRUSTMSG_CHAOS_CYCLES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(FAULTS.len());
    campaign(database, &FAULTS, cycles).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_postgresql_under_the_database_faults_nothing_acknowledged_is_lost_and_nothing_rolled_back_is_published(
) {
    campaign(Database::Postgres, &DATABASE_FAULTS, DATABASE_FAULTS.len()).await;
}

/// `cycles` cycles of `faults` in turn on a rig over a private server of
/// `database`, then the ledger's verdict.
async fn campaign(database: Database, faults: &[Fault], cycles: usize) {
    let _alone = ALONE.lock().await;
    eprintln!("chaos: {cycles} cycles on {database}");
    let mut rig = Rig::start(database).await;
    let mut recovery = Recovery::new(rig.pool.clone());
    let ledger = std::sync::Arc::new(Ledger::default());
    let load = rig.start_load(ledger.clone());

    let started = Instant::now();
    let mut windows: Vec<(Fault, Instant, Instant)> = Vec::new();
    for cycle in 0..cycles {
        let fault = faults[cycle % faults.len()];
        tokio::time::sleep(WARM).await;
        let backlog = recovery.backlog().await.unwrap_or(0);
        let from = Instant::now();
        rig.inject(fault, cycle / faults.len(), &ledger).await;
        let end = Instant::now();
        let took = recovery.wait(fault, &mut rig, &ledger, backlog).await;
        tokio::time::sleep(RECOVER.saturating_sub(end.elapsed())).await;
        windows.push((fault, from, Instant::now()));
        eprintln!(
            "chaos: cycle {}/{cycles} {fault:?} done after {:?}, recovered {took:.1?} after its end",
            cycle + 1,
            started.elapsed()
        );
    }
    load.stop().await;
    let faults_took = started.elapsed();

    let mut report = rig.settle_and_judge(&ledger, &windows).await;
    report.recovery = recovery.times;
    report.print(cycles, faults_took);
    if let Ok(path) = std::env::var("TRUSTMSG_CHAOS_REPORT") {
        std::fs::write(&path, report.markdown(cycles, faults_took)).expect("write the report");
    }
    report.assert_holds();
    rig.finish().await;
}
