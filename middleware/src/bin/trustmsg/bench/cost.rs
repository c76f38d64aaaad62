//! What a phase cost, beyond wall time: the database's own counters
//! (`SHOW GLOBAL STATUS` deltas, per message: statements, fsyncs, row
//! operations, pages changed, redo bytes), the CPU time of each process
//! involved (the database, the service, the bench itself), and peak memory.
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
    "Com_stmt_prepare",
    "Innodb_os_log_fsyncs",
    "Innodb_data_fsyncs",
    "Innodb_os_log_written",
    "Innodb_buffer_pool_write_requests",
    "Handler_write",
    "Handler_update",
    "Handler_delete",
    "Handler_read_key",
    "Handler_read_next",
    "Handler_read_rnd_next",
    "Handler_tmp_write",
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
    /// Row operations per message, by kind (`Handler_*`: `write` a row
    /// inserted, `update`/`delete` a row changed/deleted, `read_key` a row
    /// found by a key, `read_next` the next row of an index range,
    /// `read_rnd_next` a row of a table scan, `tmp_write` a row of a
    /// temporary table). Every secondary index a changed column is in is
    /// written too, which these do not count: see `page_writes_per_msg`.
    pub(crate) rows_per_msg: BTreeMap<String, f64>,
    /// Changes to buffer-pool pages per message
    /// (`Innodb_buffer_pool_write_requests`): each row and each index
    /// entry written counts, so this grows with the indexes a change touches.
    pub(crate) page_writes_per_msg: f64,
    /// Bytes written to the redo log per message (`Innodb_os_log_written`).
    pub(crate) redo_bytes_per_msg: f64,
    /// Statements the server parsed and planned anew per message
    /// (`Com_stmt_prepare`): a client's prepared-statement cache missed.
    pub(crate) prepares_per_msg: f64,
}

impl DbCost {
    pub(crate) fn between(before: &DbCounters, after: &DbCounters, messages: f64) -> Self {
        let n = messages.max(1.0);
        let delta = |c: &str| after.get(c).saturating_sub(before.get(c)) as f64 / n;
        let by_kind: BTreeMap<String, f64> = COUNTERS
            .iter()
            .filter(|c| c.starts_with("Com_") && !c.starts_with("Com_stmt_"))
            .map(|c| (c.trim_start_matches("Com_").to_string(), delta(c)))
            .collect();
        let rows_per_msg = COUNTERS
            .iter()
            .filter(|c| c.starts_with("Handler_"))
            .map(|c| (c.trim_start_matches("Handler_").to_string(), delta(c)))
            .collect();
        Self {
            statements_per_msg: by_kind.values().sum(),
            by_kind,
            log_fsyncs_per_msg: delta("Innodb_os_log_fsyncs"),
            data_fsyncs_per_msg: delta("Innodb_data_fsyncs"),
            rows_per_msg,
            page_writes_per_msg: delta("Innodb_buffer_pool_write_requests"),
            redo_bytes_per_msg: delta("Innodb_os_log_written"),
            prepares_per_msg: delta("Com_stmt_prepare"),
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
    /// The service's own process (None with `--target`, whose process the
    /// bench does not know).
    pub(crate) service_cores: Option<f64>,
    /// The bench process: the load generator, the Kafka mock broker and the
    /// consumer.
    pub(crate) bench_process_cores: f64,
    /// The phase's wall time, seconds.
    pub(crate) wall_s: f64,
}

/// CPU time per message of a phase, µs, by process.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct CpuPerMessage {
    /// Messages (or pairs, for the ceiling) the phase carried.
    pub(crate) messages: f64,
    pub(crate) database_us: Option<f64>,
    pub(crate) service_us: Option<f64>,
    pub(crate) bench_process_us: f64,
}

impl PhaseCpu {
    /// Each process's CPU time per one of `messages`.
    pub(crate) fn per_message(&self, messages: f64) -> CpuPerMessage {
        let us = |cores: f64| cores * self.wall_s / messages.max(1.0) * 1e6;
        CpuPerMessage {
            messages,
            database_us: self.database_cores.map(us),
            service_us: self.service_cores.map(us),
            bench_process_us: us(self.bench_process_cores),
        }
    }
}

/// A running CPU measurement, started at the beginning of a phase.
pub(crate) struct CpuClock {
    at: Instant,
    database: Option<(String, f64)>,
    service: Option<(String, f64)>,
    me: f64,
}

impl CpuClock {
    /// Starts measuring the database server found on this machine, this
    /// process, and the service's process `service` (a pid) if given.
    pub(crate) fn start(service: Option<&str>) -> Self {
        let reading = |pid: String| Some((pid.clone(), cpu_seconds(&pid)?));
        Self {
            at: Instant::now(),
            database: database_pid().and_then(reading),
            service: service.map(str::to_string).and_then(reading),
            me: cpu_seconds("self").unwrap_or(0.0),
        }
    }

    pub(crate) fn stop(&self) -> PhaseCpu {
        let wall = self.at.elapsed().as_secs_f64().max(1e-9);
        let cores = |r: &Option<(String, f64)>| {
            r.as_ref()
                .and_then(|(pid, t0)| Some((cpu_seconds(pid)? - t0) / wall))
        };
        PhaseCpu {
            database_cores: cores(&self.database),
            service_cores: cores(&self.service),
            bench_process_cores: (cpu_seconds("self").unwrap_or(0.0) - self.me) / wall,
            wall_s: wall,
        }
    }
}

/// Peak resident memory of a process (`self` or a pid) in MiB (`VmHWM`),
/// Linux only.
pub(crate) fn peak_rss_mib(pid: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
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
        let cost = DbCost::between(&reading(10), &reading(30), 10.0);
        // Nine kinds of statement (select, insert, update, update_multi,
        // delete, delete_multi, begin, commit, rollback), 2 of each per message.
        assert_eq!(cost.statements_per_msg, 9.0 * 2.0);
        assert_eq!(cost.by_kind["update_multi"], 2.0);
        assert_eq!(cost.by_kind["select"], 2.0);
        assert_eq!(cost.log_fsyncs_per_msg, 2.0);
        assert_eq!(cost.rows_per_msg["write"], 2.0);
        assert_eq!(cost.rows_per_msg.len(), 7);
        assert_eq!(cost.redo_bytes_per_msg, 2.0);
        assert_eq!(cost.page_writes_per_msg, 2.0);
        // Prepares are counted apart, not as a tenth kind of statement.
        assert_eq!(cost.prepares_per_msg, 2.0);
        assert!(!cost.by_kind.contains_key("stmt_prepare"));
    }

    #[test]
    fn cpu_per_message_is_each_process_share_of_the_phase() {
        let cpu = PhaseCpu {
            database_cores: Some(0.5),
            service_cores: None,
            bench_process_cores: 0.25,
            wall_s: 4.0,
        };
        let per = cpu.per_message(10_000.0);
        // 0.5 cores for 4 s is 2 s of CPU, over 10,000 messages.
        assert!((per.database_us.unwrap() - 200.0).abs() < 1e-9);
        assert!((per.bench_process_us - 100.0).abs() < 1e-9);
        assert!(per.service_us.is_none());
    }

    #[test]
    fn this_process_has_used_some_cpu_and_memory() {
        assert!(cpu_seconds("self").is_some());
        assert!(peak_rss_mib("self").unwrap() > 1.0);
    }
}
