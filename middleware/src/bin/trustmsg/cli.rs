//! The `trustmsg` command line: the subcommands and their flags. Only the
//! binary reads it; the library takes the typed settings in `config`.

use clap::{Parser, Subcommand};
use trustmsg::config::{DatabaseArgs, ServeArgs};

use crate::admin_cli::AdminArgs;
use crate::bench::BenchArgs;
use crate::dev::DevArgs;
use crate::tail::TailArgs;

/// trustmsg: reliable messages to Kafka with prepare/commit and check-back.
#[derive(Debug, Parser)]
#[command(name = "trustmsg", version, about)]
pub(crate) struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the service: producer API, admin API, forwarder and verifier.
    Serve(Box<ServeArgs>),
    /// Apply database migrations and exit.
    Migrate(DatabaseArgs),
    /// Measure throughput and latency next to the database's own ceiling.
    Bench(Box<BenchArgs>),
    /// Operate a running service: messages, producers, summary.
    Admin(Box<AdminArgs>),
    /// Run everything on this machine with nothing installed: SQLite, an
    /// in-process Kafka broker, the console and a demo producer.
    Dev(Box<DevArgs>),
    /// Print the records of a Kafka topic as they arrive.
    Tail(Box<TailArgs>),
}
