//! The flags of `trustmsg bench` and the sizes they come to.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use trustmsg::config::{quiet, quiet_with, RedactedUrl, Secret};
use trustmsg::net::kafka_settings;
use trustmsg::store::DatabaseUrl;

/// Flags of `trustmsg bench`.
#[derive(Debug, Clone, Args)]
pub(crate) struct BenchArgs {
    /// MySQL/MariaDB server (`mysql://user:pass@host:port[/ignored]`) or
    /// PostgreSQL server (`postgres://user:pass@host:port[/ignored]`), a
    /// password percent-encoded. The bench creates a database of its own
    /// there and drops it when done.
    #[arg(long, env = "TRUSTMSG_DATABASE_URL", hide_env_values = true, value_parser = quiet::<DatabaseUrl>())]
    pub(crate) database_url: DatabaseUrl,

    /// Kafka brokers; without them an in-process librdkafka mock cluster is used.
    #[arg(long, env = "TRUSTMSG_KAFKA_BROKERS", hide_env_values = true, value_parser = quiet_with(kafka_settings::brokers))]
    pub(crate) kafka_brokers: Option<String>,

    /// Drive an already running trustmsg instead of starting one
    /// (lifecycle and open-loop only; needs --kafka-brokers and --admin-token;
    /// MySQL only).
    #[arg(long, value_parser = quiet::<RedactedUrl>())]
    pub(crate) target: Option<RedactedUrl>,

    /// Admin token of the --target service.
    #[arg(long, env = "TRUSTMSG_ADMIN_TOKEN", hide_env_values = true)]
    pub(crate) admin_token: Option<Secret>,

    /// Small sizes: the whole run takes under a minute on 2 cores.
    #[arg(long)]
    pub(crate) quick: bool,

    /// Register every producer `ordered` (in order per key), to measure
    /// what ordering costs the lifecycle. Each message has its own record
    /// key, so each is its key's head: the cost measured is the ordering
    /// bookkeeping per message, not waiting.
    #[arg(long)]
    pub(crate) ordered: bool,

    /// Spread the service's messages over this many databases on the
    /// server (shards, `--database-url` repeated). With more than one the
    /// bench runs the ceiling, the lifecycle and the open loop only: the
    /// other phases write rows behind the service's back in one database.
    /// MySQL only.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=32))]
    pub(crate) shards: u16,

    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,

    /// Concurrent producers (and ceiling writers).
    #[arg(long, default_value_t = 32)]
    pub(crate) concurrency: usize,

    /// How long the ceiling and the lifecycle phases run (default 10s; --quick 4s).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) duration: Option<Duration>,

    /// Arrival rate of the open-loop phase as a fraction of the lifecycle peak.
    #[arg(long, default_value_t = 0.5)]
    pub(crate) open_loop_fraction: f64,

    /// Stale PREPARED rows for the verifier phase (default 5000; --quick 1000).
    #[arg(long)]
    pub(crate) verifier_rows: Option<u64>,

    /// Committed rows for the drain phase (default 50000; --quick 10000).
    #[arg(long)]
    pub(crate) drain_rows: Option<u64>,

    /// Rows the outbox phase commits at once in its source table (default
    /// 50000; --quick 10000).
    #[arg(long)]
    pub(crate) outbox_rows: Option<u64>,

    /// Arrival rates (rows per second, comma-separated) at which the
    /// outbox phase's latency part runs again after its run at half the
    /// relayed rate: commit → Kafka against the load, in `outbox.at_rates`.
    #[arg(long, value_delimiter = ',', value_parser = positive_rate)]
    pub(crate) outbox_rates: Vec<f64>,

    /// Rows each producer transaction of the outbox phase's latency parts
    /// commits (at the rate divided by this many transactions per second):
    /// 1, the default, charges the producer's own commit to every row; more
    /// measures what the relay adds at a row rate the producer's commits
    /// alone would not leave room for.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub(crate) outbox_rows_per_tx: u32,

    /// Payload bytes of the rows the verifier and drain phases write (the
    /// API's phases send 256-byte payloads whatever this is), to price what
    /// a check-back, a claim and a SENT mark cost a large message: e.g.
    /// `--row-payload-bytes 900000 --verifier-rows 300 --drain-rows 300`.
    #[arg(long, default_value_t = super::PAYLOAD_BYTES)]
    pub(crate) row_payload_bytes: usize,

    /// The `trustmsg` binary to run as the service (default: this one), to
    /// compare two builds under the same load generator.
    #[arg(long)]
    pub(crate) service_binary: Option<PathBuf>,

    /// Extra `trustmsg serve` flags for the service the bench starts, repeatable
    /// (e.g. `--serve-arg=--kafka-config=linger.ms=1`).
    #[arg(long = "serve-arg", allow_hyphen_values = true)]
    pub(crate) serve_args: Vec<String>,

    /// Measure tracing: every prepare carries a W3C `traceparent`, and the
    /// service exports its spans (`--otlp-endpoint`) to an
    /// OTLP/HTTP sink in the bench that counts and drops them.
    #[arg(long)]
    pub(crate) trace: bool,

    /// Messages the submit phase submits as signed prepare + commit records
    /// to the service's `--submit-topic` (default: as many as the lifecycle
    /// phase carried, at least 1000).
    #[arg(long)]
    pub(crate) submit_messages: Option<usize>,

    /// Most submitted messages whose records the submit phase's producer has
    /// not yet seen acknowledged.
    #[arg(long, default_value_t = 1000)]
    pub(crate) submit_in_flight: usize,

    /// Run a soak instead of the phases: the producer API (HTTP prepare +
    /// commit) at the fixed `--rate` for this long, with a short retention
    /// (`--soak-retention`), one line per `--soak-window` and a summary
    /// that says whether the cost per message, the tables, the memory and
    /// the latency stayed flat (e.g. `--soak 30m --rate 300`).
    #[arg(long, value_parser = humantime::parse_duration, requires = "rate")]
    pub(crate) soak: Option<Duration>,

    /// The soak's arrival rate, messages per second (an open loop: the
    /// arrivals keep their times whatever the service does).
    #[arg(long, value_parser = positive_rate, requires = "soak")]
    pub(crate) rate: Option<f64>,

    /// The `--retention` of the service the soak starts (default: a fifth
    /// of `--soak`), so rows start to go well before the run ends.
    #[arg(long, value_parser = humantime::parse_duration, requires = "soak")]
    pub(crate) soak_retention: Option<Duration>,

    /// The `--partition-period` of the service the soak starts (default: a
    /// quarter of the retention): the partitioned stores drop a period's
    /// partitions at a time, so a day's period would keep every row of a
    /// shorter run.
    #[arg(long, value_parser = humantime::parse_duration, requires = "soak")]
    pub(crate) soak_partition_period: Option<Duration>,

    /// How long each of the soak's windows is: one line, one measurement.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "60s", requires = "soak")]
    pub(crate) soak_window: Duration,

    /// Table sizes for the claim-query cost (default 10000,1000000; --quick 10000,100000).
    #[arg(long, value_delimiter = ',')]
    pub(crate) scan_rows: Vec<u64>,
}

pub(crate) struct Sizes {
    pub(crate) duration: Duration,
    pub(crate) verifier_rows: u64,
    pub(crate) drain_rows: u64,
    pub(crate) outbox_rows: u64,
    pub(crate) scan_rows: Vec<u64>,
}

impl BenchArgs {
    pub(crate) fn sizes(&self) -> Sizes {
        let (d, v, dr, s) = if self.quick {
            (4, 1_000, 10_000, vec![10_000, 100_000])
        } else {
            (10, 5_000, 50_000, vec![10_000, 1_000_000])
        };
        Sizes {
            duration: self.duration.unwrap_or(Duration::from_secs(d)),
            verifier_rows: self.verifier_rows.unwrap_or(v),
            drain_rows: self.drain_rows.unwrap_or(dr),
            outbox_rows: self.outbox_rows.unwrap_or(dr),
            scan_rows: if self.scan_rows.is_empty() {
                s
            } else {
                self.scan_rows.clone()
            },
        }
    }
}

/// A latency part's arrival rate: a positive number of rows per second.
fn positive_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!(
            "{s:?} is not a rate: give rows per second, a positive number (e.g. 1000)"
        )),
    }
}
