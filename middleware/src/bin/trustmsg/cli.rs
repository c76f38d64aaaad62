//! The `trustmsg` command line: the subcommands and their flags. Only the
//! binary reads it; the library takes the typed settings in `config`.

use clap::{Args, Parser, Subcommand};
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
    Migrate(MigrateArgs),
    /// Measure throughput and latency next to the database's own ceiling.
    Bench(Box<BenchArgs>),
    /// Operate a running service: messages, producers, summary.
    Admin(Box<AdminArgs>),
    /// Run everything on this machine with nothing installed: SQLite, an
    /// in-process Kafka broker, the console and a demo producer.
    Dev(Box<DevArgs>),
    /// Print the records of a Kafka topic as they arrive.
    Tail(Box<TailArgs>),
    /// The local message table way: print the producer's outbox table.
    #[command(subcommand)]
    Outbox(OutboxCommand),
}

/// `trustmsg outbox …`.
#[derive(Debug, Subcommand)]
pub(crate) enum OutboxCommand {
    /// Print the `CREATE TABLE` of a producer's outbox table (the same SQL
    /// as `migrations/outbox/` in the repository): run it in the producer's
    /// database, then insert one row per message in the business
    /// transaction (docs/outbox.md).
    Schema {
        /// The producer database's dialect.
        #[arg(long, value_enum)]
        dialect: trustmsg::outbox::schema::SchemaDialect,
        /// The table's name (`--outbox-table` of `trustmsg serve`).
        #[arg(long, default_value = trustmsg::outbox::schema::DEFAULT_TABLE)]
        table: String,
    },
}

/// `trustmsg migrate`.
#[derive(Debug, Args)]
pub(crate) struct MigrateArgs {
    #[command(flatten)]
    pub(crate) db: DatabaseArgs,

    /// Only the steps of the pending migrations that may run while the
    /// previous release serves (migration 0020's copy into time partitions
    /// on MySQL/MariaDB; its keys, constraints and index on PostgreSQL),
    /// so that `trustmsg migrate` then finishes in moments
    /// (docs/operations.md, "Upgrading past migration 0020").
    #[arg(long)]
    pub(crate) prepare: bool,
}
