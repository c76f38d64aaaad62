//! What a phase cost, beyond wall time: the database's own counters
//! (MySQL's `SHOW GLOBAL STATUS` deltas, per message: statements, fsyncs,
//! row operations, pages changed, redo bytes; PostgreSQL's statistics, see
//! [`PgCost`]), the CPU time of each process involved (the database, the
//! service, the bench itself), and peak memory.
//!
//! The counters are server-wide (PostgreSQL's rows and transactions: the
//! bench's databases'): they include the bench's own few polling
//! queries and anything else the server did meanwhile, so run the bench on a
//! server nothing else uses.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

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

/// One reading of the server's counters: MySQL's [`COUNTERS`], or
/// PostgreSQL's (see `server::pg_counters`).
#[derive(Debug, Clone, Default)]
pub(crate) struct DbCounters {
    postgres: bool,
    values: BTreeMap<String, u64>,
    /// PostgreSQL: `pg_stat_statements`' calls by first keyword, when loaded.
    statements: Option<BTreeMap<String, u64>>,
}

impl DbCounters {
    /// MySQL's `SHOW GLOBAL STATUS` rows, those of [`COUNTERS`] kept.
    pub(crate) fn mysql(rows: impl IntoIterator<Item = (String, u64)>) -> Self {
        Self {
            postgres: false,
            values: rows
                .into_iter()
                .filter(|(name, _)| COUNTERS.iter().any(|c| c.eq_ignore_ascii_case(name)))
                .collect(),
            statements: None,
        }
    }

    /// PostgreSQL's counters, and its statements by kind when counted.
    pub(crate) fn postgres(
        values: BTreeMap<String, u64>,
        statements: Option<BTreeMap<String, u64>>,
    ) -> Self {
        Self {
            postgres: true,
            values,
            statements,
        }
    }

    fn get(&self, name: &str) -> u64 {
        self.values
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map_or(0, |(_, v)| *v)
    }
}

/// Database work per message over a phase, as the server counts it: the
/// two kinds count different things, so each has its own fields (MySQL's
/// as they always were).
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub(crate) enum DbCost {
    Mysql(MysqlCost),
    Postgres(PgCost),
}

impl Default for DbCost {
    fn default() -> Self {
        Self::Mysql(MysqlCost::default())
    }
}

impl DbCost {
    pub(crate) fn between(before: &DbCounters, after: &DbCounters, messages: f64) -> Self {
        match after.postgres {
            false => Self::Mysql(MysqlCost::between(before, after, messages)),
            true => Self::Postgres(PgCost::between(before, after, messages)),
        }
    }
}

/// MySQL's work per message over a phase.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct MysqlCost {
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

impl MysqlCost {
    fn between(before: &DbCounters, after: &DbCounters, messages: f64) -> Self {
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

/// PostgreSQL's work per message over a phase. The rows, transactions,
/// blocks and the WAL's records and fsyncs come from its cumulative
/// statistics, which backends publish up to a second late (10 s when
/// idle): over a short phase they are approximate. The WAL bytes and the
/// write transactions are read from the server's positions: exact.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct PgCost {
    /// Statements per message (`pg_stat_statements`' calls); None when
    /// the server does not load `pg_stat_statements`.
    pub(crate) statements_per_msg: Option<f64>,
    /// Each kind of statement (its first keyword) per message; empty
    /// without `pg_stat_statements`.
    pub(crate) by_kind: BTreeMap<String, f64>,
    /// Transactions per message, committed and rolled back
    /// (`pg_stat_database`): every statement outside a transaction block
    /// is one, reads included.
    pub(crate) transactions_per_msg: BTreeMap<String, f64>,
    /// Transactions that wrote per message (transaction ids taken).
    pub(crate) write_transactions_per_msg: f64,
    /// WAL fsyncs per message (`pg_stat_wal.wal_sync`): what a durable
    /// commit waits for.
    pub(crate) log_fsyncs_per_msg: f64,
    /// WAL writes to the operating system per message (`wal_write`).
    pub(crate) wal_writes_per_msg: f64,
    /// Rows per message, by kind (`pg_stat_database` `tup_*`: `inserted`,
    /// `updated`, `deleted`; `returned` rows read by scans, `fetched` rows
    /// found through an index).
    pub(crate) rows_per_msg: BTreeMap<String, f64>,
    /// Blocks per message found in shared buffers (`hit`) or read (`read`).
    pub(crate) blocks_per_msg: BTreeMap<String, f64>,
    /// Bytes of WAL per message (the WAL position's advance).
    pub(crate) redo_bytes_per_msg: f64,
    /// WAL records per message (`wal_records`).
    pub(crate) wal_records_per_msg: f64,
    /// Full-page images in the WAL per message (`wal_fpi`): a page's
    /// first change after a checkpoint is logged whole.
    pub(crate) wal_fpi_per_msg: f64,
}

impl PgCost {
    fn between(before: &DbCounters, after: &DbCounters, messages: f64) -> Self {
        let n = messages.max(1.0);
        let delta = |c: &str| after.get(c).saturating_sub(before.get(c)) as f64 / n;
        let map = |names: &[(&str, &str)]| -> BTreeMap<String, f64> {
            names
                .iter()
                .map(|(name, counter)| (name.to_string(), delta(counter)))
                .collect()
        };
        let by_kind: Option<BTreeMap<String, f64>> = match (&before.statements, &after.statements) {
            (Some(b), Some(a)) => Some(
                a.iter()
                    .map(|(kind, calls)| {
                        let was = b.get(kind).copied().unwrap_or(0);
                        (kind.clone(), calls.saturating_sub(was) as f64 / n)
                    })
                    .collect(),
            ),
            _ => None,
        };
        Self {
            statements_per_msg: by_kind.as_ref().map(|k| k.values().sum()),
            by_kind: by_kind.unwrap_or_default(),
            transactions_per_msg: map(&[("commit", "xact_commit"), ("rollback", "xact_rollback")]),
            write_transactions_per_msg: delta("xids"),
            log_fsyncs_per_msg: delta("wal_sync"),
            wal_writes_per_msg: delta("wal_write"),
            rows_per_msg: map(&[
                ("inserted", "tup_inserted"),
                ("updated", "tup_updated"),
                ("deleted", "tup_deleted"),
                ("returned", "tup_returned"),
                ("fetched", "tup_fetched"),
            ]),
            blocks_per_msg: map(&[("hit", "blks_hit"), ("read", "blks_read")]),
            redo_bytes_per_msg: delta("wal_lsn_bytes"),
            wal_records_per_msg: delta("wal_records"),
            wal_fpi_per_msg: delta("wal_fpi"),
        }
    }
}

/// The `/proc/<pid>/stat` fields after the command name (which is in
/// parentheses and may hold spaces), from the state on.
fn stat_fields(pid: &str) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Clock ticks of fields `at` of a process's stat, in seconds.
fn ticks(fields: &[String], at: &[usize]) -> Option<f64> {
    let mut sum = 0.0;
    for &i in at {
        sum += fields.get(i)?.parse::<f64>().ok()?;
    }
    // USER_HZ is 100 on every Linux the bench runs on.
    Some(sum / 100.0)
}

/// CPU seconds (user + system) a process has used, from `/proc/<pid>/stat`.
/// Linux only; None elsewhere or when the process is gone.
fn cpu_seconds(pid: &str) -> Option<f64> {
    ticks(&stat_fields(pid)?, &[11, 12])
}

/// The CPU seconds of a process and of all its children, those running
/// (their own) and those ended (which the parent waited for: the kernel
/// adds theirs to its `cutime` and `cstime`). Over an interval the sum
/// counts a child that came or went in it for the part it ran then.
fn tree_cpu_seconds(parent: &str) -> Option<f64> {
    let own = ticks(&stat_fields(parent)?, &[11, 12, 13, 14])?;
    let children: f64 = std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().into_string().ok()?;
            let fields = stat_fields(&pid)?;
            // Field 4 of the stat, the parent's pid, is the second after the state.
            (fields.get(1)? == parent).then(|| ticks(&fields, &[11, 12]))?
        })
        .sum();
    Some(own + children)
}

/// The database server's processes on this machine.
#[derive(Debug, Clone)]
pub(crate) enum DatabaseProcess {
    /// One process (`mariadbd`, `mysqld`).
    Single(String),
    /// A parent and its children (PostgreSQL's postmaster, its backends
    /// and background workers).
    Tree(String),
}

impl DatabaseProcess {
    /// The local MySQL server (`mariadbd` or `mysqld`), if one runs here.
    pub(crate) fn mysql() -> Option<Self> {
        std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
            let pid = e.file_name().into_string().ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            matches!(comm.trim(), "mariadbd" | "mysqld").then_some(Self::Single(pid))
        })
    }

    /// The PostgreSQL server whose backend is `backend` (a pid the server
    /// gave), when that backend runs on this machine: its parent, the
    /// postmaster. Both must be `postgres` processes, else the pid is
    /// another machine's (a remote server) and None is returned.
    pub(crate) fn postgres(backend: &str) -> Option<Self> {
        let is_postgres = |pid: &str| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim() == "postgres")
        };
        let parent = stat_fields(backend)?.get(1)?.clone();
        (is_postgres(backend) && is_postgres(&parent)).then_some(Self::Tree(parent))
    }

    /// CPU seconds used so far.
    fn cpu_seconds(&self) -> Option<f64> {
        match self {
            Self::Single(pid) => cpu_seconds(pid),
            Self::Tree(pid) => tree_cpu_seconds(pid),
        }
    }
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
    database: Option<(DatabaseProcess, f64)>,
    service: Option<(String, f64)>,
    me: f64,
}

impl CpuClock {
    /// Starts measuring the database server's processes on this machine,
    /// this process, and the service's process `service` (a pid) if given.
    pub(crate) fn start(database: Option<DatabaseProcess>, service: Option<&str>) -> Self {
        Self {
            at: Instant::now(),
            database: database.and_then(|d| {
                let t0 = d.cpu_seconds()?;
                Some((d, t0))
            }),
            service: service.and_then(|pid| Some((pid.to_string(), cpu_seconds(pid)?))),
            me: cpu_seconds("self").unwrap_or(0.0),
        }
    }

    pub(crate) fn stop(&self) -> PhaseCpu {
        let wall = self.at.elapsed().as_secs_f64().max(1e-9);
        PhaseCpu {
            database_cores: self
                .database
                .as_ref()
                .and_then(|(d, t0)| Some((d.cpu_seconds()? - t0) / wall)),
            service_cores: self
                .service
                .as_ref()
                .and_then(|(pid, t0)| Some((cpu_seconds(pid)? - t0) / wall)),
            bench_process_cores: (cpu_seconds("self").unwrap_or(0.0) - self.me) / wall,
            wall_s: wall,
        }
    }
}

/// Peak resident memory of a process (`self` or a pid) in MiB (`VmHWM`),
/// Linux only.
pub(crate) fn peak_rss_mib(pid: &str) -> Option<f64> {
    status_mib(pid, "VmHWM:")
}

/// Resident memory of a process now (`self` or a pid) in MiB (`VmRSS`),
/// Linux only: what a soak watches for growth.
pub(crate) fn rss_mib(pid: &str) -> Option<f64> {
    status_mib(pid, "VmRSS:")
}

/// A `kB` field of `/proc/<pid>/status` in MiB.
fn status_mib(pid: &str, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))?
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
        let reading = |v: u64| DbCounters::mysql(COUNTERS.iter().map(|c| (c.to_string(), v)));
        let DbCost::Mysql(cost) = DbCost::between(&reading(10), &reading(30), 10.0) else {
            panic!("MySQL's counters make MySQL's cost");
        };
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
    fn postgres_counters_make_postgres_cost_per_message() {
        let reading = |v: u64, statements: Option<u64>| {
            let names = [
                "xact_commit",
                "tup_inserted",
                "wal_lsn_bytes",
                "xids",
                "wal_sync",
            ];
            DbCounters::postgres(
                names.iter().map(|c| (c.to_string(), v)).collect(),
                statements.map(|n| BTreeMap::from([("insert".to_string(), n)])),
            )
        };
        let DbCost::Postgres(cost) =
            DbCost::between(&reading(10, Some(5)), &reading(30, Some(25)), 10.0)
        else {
            panic!("PostgreSQL's counters make PostgreSQL's cost");
        };
        assert_eq!(cost.transactions_per_msg["commit"], 2.0);
        assert_eq!(cost.transactions_per_msg["rollback"], 0.0);
        assert_eq!(cost.rows_per_msg["inserted"], 2.0);
        assert_eq!(cost.redo_bytes_per_msg, 2.0);
        assert_eq!(cost.write_transactions_per_msg, 2.0);
        assert_eq!(cost.log_fsyncs_per_msg, 2.0);
        assert_eq!(cost.statements_per_msg, Some(2.0));
        // Without pg_stat_statements, statements are not counted: None,
        // not zero.
        let DbCost::Postgres(cost) = DbCost::between(&reading(10, None), &reading(30, None), 10.0)
        else {
            panic!("PostgreSQL's counters make PostgreSQL's cost");
        };
        assert_eq!(cost.statements_per_msg, None);
        assert!(cost.by_kind.is_empty());
    }

    #[test]
    fn a_process_tree_counts_its_children_that_ran_and_ended() {
        let me = std::process::id().to_string();
        let before = tree_cpu_seconds(&me).unwrap();
        // A child that spins for a while, then is waited for: its CPU
        // moves into this process's cutime/cstime.
        let status = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
            .status()
            .unwrap();
        assert!(status.success());
        let after = tree_cpu_seconds(&me).unwrap();
        assert!(after - before >= 0.01, "{before} → {after}");
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
        let now = rss_mib("self").unwrap();
        assert!(now > 1.0 && now <= peak_rss_mib("self").unwrap());
    }
}
