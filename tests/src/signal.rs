//! Signals to the processes a test started (servers, the service), by
//! their pid: never to anything else.

use std::process::{Child, Command, Stdio};

/// Sends `which` (`-STOP`, `-CONT`, `-HUP`…) to `child`, which must run
/// (`what` names it in the failure).
pub fn to(child: Option<&Child>, what: &str, which: &str) {
    let pid = child.unwrap_or_else(|| panic!("{what} runs")).id();
    let status = Command::new("kill")
        .args([which, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {which} {pid} ({what}): {status}");
}

/// Sends `which` to `pid`; a process already gone is not an error (a
/// backend whose client just left).
pub fn to_pid(pid: u32, which: &str) {
    let _ = Command::new("kill")
        .args([which, &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .expect("run kill");
}

/// SIGKILL to `child`, if it runs, and reaps it: a crash.
pub fn kill_9(child: &mut Option<Child>, what: &str) {
    if let Some(mut c) = child.take() {
        c.kill().unwrap_or_else(|e| panic!("SIGKILL {what}: {e}"));
        c.wait().unwrap_or_else(|e| panic!("reap {what}: {e}"));
    }
}
