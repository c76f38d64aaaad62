//! The `trustmsg` binary: parse the CLI, set up logging, call the library.
//! The benchmark lives here rather than in the library: it is a tool that
//! drives the service, not part of it.

mod admin_cli;
mod bench;
mod cli;
mod dev;
mod serve_flags;
mod tail;

use std::io::IsTerminal;

use clap::{CommandFactory, Parser};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::EnvFilter;
use trustmsg::startup::Application;

use cli::{Cli, Command, OutboxCommand};

/// mimalloc rather than glibc's malloc: under the bench's load glibc's
/// allocator took about an eighth of the process's CPU (`perf`, see
/// docs/performance.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    trustmsg::net::client_tls::install_crypto_provider();
    // The commands that print data (a report, JSON lines, SQL) only speak
    // up when worried, and on stderr: a warning on stdout would land inside
    // `tail --json`'s lines (it did, under load, in a test reading them).
    let prints_data = matches!(
        cli.command,
        Command::Bench(_) | Command::Admin(_) | Command::Tail(_) | Command::Outbox(_)
    );
    let default_level = if prints_data { "warn" } else { "info" };
    let filter =
        EnvFilter::try_from_env("TRUSTMSG_LOG").unwrap_or_else(|_| EnvFilter::new(default_level));
    let (writer, terminal) = if prints_data {
        (
            BoxMakeWriter::new(std::io::stderr),
            std::io::stderr().is_terminal(),
        )
    } else {
        (
            BoxMakeWriter::new(std::io::stdout),
            std::io::stdout().is_terminal(),
        )
    };
    if std::env::var("TRUSTMSG_LOG_FORMAT").as_deref() == Ok("json") {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(writer)
            .json()
            .init();
    } else {
        // Colours only on a terminal: a log file or a journal gets plain text
        // (escape codes there split `field=value` and break every grep).
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(writer)
            .with_ansi(terminal)
            .init();
    }

    match cli.command {
        Command::Serve(args) => {
            // A bad combination of flags is a usage error, reported like clap's own.
            if let Err(e) = args.validate() {
                Cli::command()
                    .error(clap::error::ErrorKind::ArgumentConflict, e)
                    .exit();
            }
            let app = Application::build(*args).await?;
            stop_on_signal(app.shutdown_token());
            app.run_until_stopped().await
        }
        Command::Bench(args) => bench::run(*args).await.map(|_| ()),
        Command::Dev(args) => {
            let stop = CancellationToken::new();
            stop_on_signal(stop.clone());
            dev::run(*args, stop).await
        }
        Command::Tail(args) => tail::run(*args).await,
        Command::Admin(args) => {
            if let Err(e) = admin_cli::run(*args).await {
                eprintln!("error: {e:#}");
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Outbox(OutboxCommand::Schema { dialect, table }) => {
            if let Err(e) = trustmsg::outbox::schema::check_table(&table) {
                Cli::command()
                    .error(
                        clap::error::ErrorKind::ValueValidation,
                        format!("--table {e}"),
                    )
                    .exit();
            }
            print!("{}", trustmsg::outbox::schema::schema(dialect, &table));
            Ok(())
        }
        Command::Migrate(args) if args.prepare => {
            let store = trustmsg::store::open(args.db.urls(), args.db.replicas(), false).await?;
            store.prepare_upgrade().await?;
            tracing::info!("the steps that may run while the previous release serves are done; `trustmsg migrate` finishes");
            Ok(())
        }
        Command::Migrate(args) => {
            trustmsg::store::open(args.db.urls(), args.db.replicas(), true).await?;
            tracing::info!("migrations applied");
            Ok(())
        }
    }
}

/// Cancels `token` on SIGINT or SIGTERM.
fn stop_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        #[cfg(not(unix))]
        let term = std::future::pending::<()>();
        tokio::select! {
            _ = ctrl_c => {},
            _ = term => {},
        }
        tracing::info!("shutdown signal received; draining");
        token.cancel();
    });
}
