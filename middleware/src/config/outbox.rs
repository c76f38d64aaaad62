//! `--outbox-source` and its settings: the local message table way.

use std::time::Duration;

use clap::Args;

use super::parse::{duration, positive_duration};
use super::{ConfigError, ServeArgs};
use crate::net::secret::quiet_with;
use crate::outbox::schema::{check_table, DEFAULT_TABLE};
use crate::outbox::OutboxSettings;
use crate::store::{Backend, DatabaseUrl};

/// The local message table way (docs/outbox.md): relay the producers' own
/// outbox tables.
#[derive(Debug, Clone, Args)]
pub struct OutboxArgs {
    /// Relay the outbox table in this database for the registered producer
    /// BIZ_ID: `BIZ_ID=mysql://user:pass@host:3306/db` (or `postgres://…`,
    /// `sqlite://…`),
    /// repeatable, one per producer; characters such as `# / ? @ % ,` in
    /// the password percent-encoded. The URL is a secret: it is never
    /// logged. In the environment, several are separated by commas.
    #[arg(long = "outbox-source", env = "TRUSTMSG_OUTBOX_SOURCES", hide_env_values = true, value_delimiter = ',', value_parser = quiet_with(source))]
    pub outbox_sources: Vec<OutboxSource>,

    /// The outbox table's name in every source.
    #[arg(long, env = "TRUSTMSG_OUTBOX_TABLE", default_value = DEFAULT_TABLE)]
    pub outbox_table: String,

    /// Most rows relayed in one source transaction.
    #[arg(long, env = "TRUSTMSG_OUTBOX_BATCH", default_value = "1000", value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub outbox_batch: u32,

    /// The longest a source found empty waits before it is looked at again
    /// for new rows: a claim that found rows is followed by the next at
    /// once, one that found none by the next after 1 ms, then twice as long
    /// each time up to this. The latency a row written to a long idle
    /// source waits at most before its relay starts, against one small
    /// query per interval.
    #[arg(long, env = "TRUSTMSG_OUTBOX_INTERVAL", default_value = "100ms", value_parser = positive_duration)]
    pub outbox_interval: Duration,

    /// How long relayed rows (and rows an operator gave up) are kept in the
    /// source table before they are deleted, in small batches; `0` deletes a
    /// row as it is relayed. Failed rows are kept until an operator acts.
    #[arg(long, env = "TRUSTMSG_OUTBOX_RETENTION", default_value = "1d", value_parser = duration)]
    pub outbox_retention: Duration,
}

/// One `--outbox-source`.
#[derive(Debug, Clone)]
pub struct OutboxSource {
    pub biz_id: String,
    pub url: DatabaseUrl,
}

fn source(s: &str) -> Result<OutboxSource, String> {
    let Some((biz_id, url)) = s.split_once('=') else {
        return Err(
            "must be BIZ_ID=DATABASE_URL, e.g. shop=mysql://user:pass@host:3306/shop".into(),
        );
    };
    crate::intake::validate::biz_id(biz_id)
        .map_err(|e| format!("names the producer {biz_id:?}, which is not a producer id: {e}"))?;
    let url = DatabaseUrl::parse_outbox_source(url).map_err(|e| format!("for {biz_id}: {e}"))?;
    Ok(OutboxSource {
        biz_id: biz_id.to_string(),
        url,
    })
}

impl ServeArgs {
    /// `--outbox-source`: one per producer, a table name the relay can use.
    pub(super) fn outbox(&self) -> Result<Option<OutboxSettings>, ConfigError> {
        let a = &self.outbox;
        if a.outbox_sources.is_empty() {
            return Ok(None);
        }
        check_table(&a.outbox_table).map_err(|e| ConfigError(format!("--outbox-table {e}")))?;
        let mut sources: Vec<(String, DatabaseUrl)> = Vec::new();
        for s in &a.outbox_sources {
            if sources.iter().any(|(b, _)| *b == s.biz_id) {
                return Err(ConfigError(format!(
                    "--outbox-source names the producer {:?} twice: one source per producer",
                    s.biz_id
                )));
            }
            // Every backend has a relay (outbox/source.rs); say so here if
            // one is added that has not.
            match s.url.backend() {
                Backend::MySql | Backend::Postgres | Backend::Sqlite => {}
            }
            sources.push((s.biz_id.clone(), s.url.clone()));
        }
        Ok(Some(OutboxSettings {
            sources,
            table: a.outbox_table.clone(),
            batch: a.outbox_batch,
            interval: a.outbox_interval,
            retention: a.outbox_retention,
            stats_interval: self.backlog_interval,
            deadline: self
                .request_timeout
                .saturating_mul(2)
                .max(Duration::from_secs(10)),
        }))
    }
}
