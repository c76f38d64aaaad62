//! What a phase cost, beyond wall time: the database's own statement and
//! fsync counters (`SHOW GLOBAL STATUS` deltas, per message), the CPU time of
//! each process involved, and the bench process's peak memory.
//!
//! The counters are server-wide: they include the bench's own few polling
//! queries and anything else the server did meanwhile, so run the bench on a
//! server nothing else uses.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;
use sqlx::MySqlPool;

/// The `SHOW GLOBAL STATUS` counters the bench reads. A statement that
/// joins tables (`UPDATE … JOIN`, the batched SENT mark; `DELETE … JOIN`)
/// counts as `Com_update_multi` / `Com_delete_multi`, not `Com_update` /
/// `Com_delete`.
const COUNTERS: &[&str] = &[
    "Com_select",
    "Com_insert",
    "Com_update",
    "Com_update_multi",
    "Com_delete",
    "Com_delete_multi",
    "Com_begin",
    "Com_commit",
    "Com_rollback",
    "Innodb_os_log_fsyncs",
    "Innodb_data_fsyncs",
];

/// One reading of [`COUNTERS`].
#[derive(Debug, Clone, Default)]
pub(crate) struct DbCounters(BTreeMap<String, u64>);

impl DbCounters {
    pub(crate) async fn read(pool: &MySqlPool) -> anyhow::Result<Self> {
        let rows: Vec<(String, String)> =
            sqlx::query_as("SHOW GLOBAL STATUS").fetch_all(pool).await?;
        Ok(Self(
            rows.into_iter()
                .filter(|(name, _)| COUNTERS.iter().any(|c| c.eq_ignore_ascii_case(name)))
                .filter_map(|(name, v)| Some((name, v.parse().ok()?)))
                .collect(),
        ))
    }

    fn get(&self, name: &str) -> u64 {
        self.0
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map_or(0, |(_, v)| *v)
    }
}

/// Database work per message over a phase.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct DbCost {
    /// SELECT + INSERT + UPDATE + DELETE + BEGIN + COMMIT + ROLLBACK statements per message.
    pub(crate) statements_per_msg: f64,
    /// Each kind of statement per message.
    pub(crate) by_kind: BTreeMap<String, f64>,
    /// Redo log fsyncs per message (`Innodb_os_log_fsyncs`).
    pub(crate) log_fsyncs_per_msg: f64,
    /// Data file fsyncs per message (`Innodb_data_fsyncs`).
    pub(crate) data_fsyncs_per_msg: f64,
}

impl DbCost {
    pub(crate) fn between(before: &DbCounters, after: &DbCounters, messages: usize) -> Self {
        let n = messages.max(1) as f64;
        let delta = |c: &str| after.get(c).saturating_sub(before.get(c)) as f64 / n;
        let by_kind: BTreeMap<String, f64> = COUNTERS
            .iter()
            .filter(|c| c.starts_with("Com_"))
            .map(|c| (c.trim_start_matches("Com_").to_string(), delta(c)))
            .collect();
        Self {
            statements_per_msg: by_kind.values().sum(),
            by_kind,
            log_fsyncs_per_msg: delta("Innodb_os_log_fsyncs"),
            data_fsyncs_per_msg: delta("Innodb_data_fsyncs"),
        }
    }
}

/// CPU seconds (user + system) a process has used, from `/proc/<pid>/stat`.
/// Linux only; None elsewhere or when the process is gone.
fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let (utime, stime): (f64, f64) = (fields.get(11)?.parse().ok()?, fields.get(12)?.parse().ok()?);
    // USER_HZ is 100 on every Linux the bench runs on.
    Some((utime + stime) / 100.0)
}

/// The pid of the local database server (`mariadbd` or `mysqld`), if one runs here.
fn database_pid() -> Option<String> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid = e.file_name().into_string().ok()?;
        let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
        matches!(comm.trim(), "mariadbd" | "mysqld").then_some(pid)
    })
}

/// Cores used during a phase, by process.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct PhaseCpu {
    /// The database server (None when it does not run on this machine).
    pub(crate) database_cores: Option<f64>,
    /// This process: the service in-process, the load generator, the Kafka
    /// mock broker and the consumer.
    pub(crate) bench_process_cores: f64,
}

/// A running CPU measurement, started at the beginning of a phase.
pub(crate) struct CpuClock {
    at: Instant,
    database: Option<(String, f64)>,
    me: f64,
}

impl CpuClock {
    pub(crate) fn start() -> Self {
        Self {
            at: Instant::now(),
            database: database_pid().and_then(|pid| Some((pid.clone(), cpu_seconds(&pid)?))),
            me: cpu_seconds("self").unwrap_or(0.0),
        }
    }

    pub(crate) fn stop(&self) -> PhaseCpu {
        let wall = self.at.elapsed().as_secs_f64().max(1e-9);
        PhaseCpu {
            database_cores: self
                .database
                .as_ref()
                .and_then(|(pid, t0)| Some((cpu_seconds(pid)? - t0) / wall)),
            bench_process_cores: (cpu_seconds("self").unwrap_or(0.0) - self.me) / wall,
        }
    }
}

/// Peak resident memory of this process in MiB (`VmHWM`), Linux only.
pub(crate) fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_and_fsyncs_are_counted_per_message() {
        let reading = |v: u64| DbCounters(COUNTERS.iter().map(|c| (c.to_string(), v)).collect());
        let cost = DbCost::between(&reading(10), &reading(30), 10);
        // Nine kinds of statement (select, insert, update, update_multi,
        // delete, delete_multi, begin, commit, rollback), 2 of each per message.
        assert_eq!(cost.statements_per_msg, 9.0 * 2.0);
        assert_eq!(cost.by_kind["update_multi"], 2.0);
        assert_eq!(cost.by_kind["select"], 2.0);
        assert_eq!(cost.log_fsyncs_per_msg, 2.0);
    }

    #[test]
    fn this_process_has_used_some_cpu_and_memory() {
        assert!(cpu_seconds("self").is_some());
        assert!(peak_rss_mib().unwrap() > 1.0);
    }
}
