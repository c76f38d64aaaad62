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

/// Whether `args` (flags passed on to `serve`) name `flag`, as `--flag value`
/// or `--flag=value`. `dev` and `bench` set serve flags of their own and
/// leave out those the user gives (clap refuses a flag given twice).
pub(crate) fn names_flag(args: &[String], flag: &str) -> bool {
    args.iter().any(|a| {
        a == flag
            || a.strip_prefix(flag)
                .is_some_and(|rest| rest.starts_with('='))
    })
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

#[cfg(test)]
mod tests {
    use super::names_flag;

    #[test]
    fn a_flag_is_named_with_a_separate_value_or_after_an_equals_sign_only() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(names_flag(&args(&["--listen", "x"]), "--listen"));
        assert!(names_flag(&args(&["--listen=x"]), "--listen"));
        assert!(!names_flag(&args(&["--listen-backlog=9"]), "--listen"));
        assert!(!names_flag(&args(&["x", "--listenx"]), "--listen"));
    }
}
