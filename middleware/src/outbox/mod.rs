//! The local message table way (docs/outbox.md): a producer writes its
//! message as a row of its own outbox table, in the transaction of its
//! business change, and trustmsg relays the row: it becomes a message of
//! that producer decided COMMITTED (audit actor `outbox`), and from there
//! everything trustmsg does for a message applies (topic allow-list,
//! limits, per-key order, delivery time, tracing, alerts, the console,
//! the ledger, shards).
//!
//! What it guarantees, and how:
//! - **Nothing lost, nothing created twice.** A row is marked relayed (2)
//!   only after its message is committed in trustmsg, in the source
//!   transaction that held the row locked the whole time
//!   ([`source`]); a crash anywhere rolls that back and the row is relayed
//!   again, where its (biz_id, message_key) and content find the message
//!   already there (a prepare of the same content is the same message, a
//!   repeated commit is already decided).
//! - **No row skipped for committing late.** The relay scans rows by
//!   status, not by an id cursor: a row whose transaction commits after a
//!   higher id's is pending when it becomes visible, and relayed then.
//! - **Order.** One instance relays a source at a time (a named lock), in
//!   batches of the rows visible at once, by id; an ordered producer's
//!   commits take their keys' places in that order. So rows of one record
//!   key reach Kafka in the order they became visible, and among rows
//!   first seen together, in id order (see docs/outbox.md for concurrent
//!   transactions on one key).
//! - **A row refused for good** (content conflicting with the message
//!   already under its key, a topic not allowed, too large, malformed) is
//!   marked failed (3) with its reason, and raises one `outbox_failed`
//!   alert ([`crate::store::OutboxStore::record_outbox_failure`]); the
//!   batch goes on. An operator retries or gives it up.
//! - **A source that is down** is retried with backoff and counted; it
//!   fails no row and stops nothing else. A source whose producer is not
//!   registered waits, and says so.
//!
//! [`relay`] is the loop of one source, [`row`] reads a row as a prepare,
//! [`source`] holds each dialect's statements, [`schema`] the table's SQL.

pub(crate) mod relay;
pub(crate) mod row;
pub mod schema;
pub(crate) mod source;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::intake::Intake;
use crate::store::DatabaseUrl;
use source::{SourceDb, SourceStats};

/// `--outbox-source` and its settings.
#[derive(Debug, Clone)]
pub struct OutboxSettings {
    /// The sources, by producer.
    pub sources: Vec<(String, DatabaseUrl)>,
    /// The table's name in every source.
    pub table: String,
    /// Most rows relayed in one source transaction.
    pub batch: u32,
    /// How often a source found empty is looked at again (a claim that
    /// found rows is followed by the next at once).
    pub interval: Duration,
    /// How long relayed and given-up rows are kept; zero deletes a row as
    /// it is relayed.
    pub retention: Duration,
    /// How often the sources' gauges are read.
    pub stats_interval: Duration,
    /// The longest one source statement or batch write may take before the
    /// relay drops its connection and starts again.
    pub deadline: Duration,
}

/// What a source's relay is doing, as this instance sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelayState {
    /// Not connected yet.
    Starting,
    /// This instance holds the source's lock and relays its rows.
    Relaying,
    /// Another instance relays the source; this one takes over if it goes.
    Standby,
    /// The source's producer is not registered: its rows wait.
    WaitingForProducer,
    /// The source (or trustmsg's own database) does not answer: retried.
    Down,
}

impl RelayState {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Relaying => "relaying",
            Self::Standby => "standby",
            Self::WaitingForProducer => "waiting_for_producer",
            Self::Down => "down",
        }
    }
}

/// One source's live figures on this instance.
#[derive(Debug, Clone)]
pub(crate) struct Status {
    pub(crate) state: RelayState,
    pub(crate) last_error: Option<String>,
    pub(crate) last_error_at: Option<DateTime<Utc>>,
    pub(crate) relayed: u64,
    pub(crate) failed: u64,
    pub(crate) errors: u64,
    pub(crate) last_relayed_at: Option<DateTime<Utc>>,
    pub(crate) stats: Option<SourceStats>,
    pub(crate) stats_at: Option<DateTime<Utc>>,
    /// Rows relayed per second over the last gauge interval.
    pub(crate) relayed_per_s: f64,
    rate_mark: Option<(Instant, u64)>,
}

impl Default for Status {
    fn default() -> Self {
        Self {
            state: RelayState::Starting,
            last_error: None,
            last_error_at: None,
            relayed: 0,
            failed: 0,
            errors: 0,
            last_relayed_at: None,
            stats: None,
            stats_at: None,
            relayed_per_s: 0.0,
            rate_mark: None,
        }
    }
}

/// One configured source.
pub(crate) struct Source {
    pub(crate) biz_id: String,
    /// Shown with its password hidden.
    pub(crate) url: DatabaseUrl,
    pub(crate) db: SourceDb,
    status: Mutex<Status>,
}

impl Source {
    /// A copy of the live figures.
    pub(crate) fn status(&self) -> Status {
        self.status.lock().expect("status lock").clone()
    }

    /// What the relay is doing now (without copying the rest).
    pub(crate) fn state(&self) -> RelayState {
        self.status.lock().expect("status lock").state
    }

    fn update(&self, f: impl FnOnce(&mut Status)) {
        f(&mut self.status.lock().expect("status lock"));
    }

    fn set_state(&self, state: RelayState) {
        self.update(|s| s.state = state);
        let up = if state == RelayState::Down { 0.0 } else { 1.0 };
        metrics::gauge!("trustmsg_outbox_up", "source" => self.biz_id.clone()).set(up);
        let relaying = if state == RelayState::Relaying {
            1.0
        } else {
            0.0
        };
        metrics::gauge!("trustmsg_outbox_relaying", "source" => self.biz_id.clone()).set(relaying);
    }

    /// Counts an error (`stage`: `source` or `trustmsg`) and keeps its text.
    fn error(&self, stage: &'static str, error: String) {
        metrics::counter!("trustmsg_outbox_errors_total", "source" => self.biz_id.clone(), "stage" => stage)
            .increment(1);
        self.update(|s| {
            s.errors += 1;
            s.last_error = Some(error);
            s.last_error_at = Some(Utc::now());
        });
    }

    fn relayed(&self, relayed: u64, failed: u64) {
        let source = self.biz_id.clone();
        metrics::counter!("trustmsg_outbox_relayed_total", "source" => source.clone())
            .increment(relayed);
        metrics::counter!("trustmsg_outbox_failed_total", "source" => source).increment(failed);
        self.update(|s| {
            s.relayed += relayed;
            s.failed += failed;
            if relayed > 0 {
                s.last_relayed_at = Some(Utc::now());
            }
        });
    }

    fn stats(&self, stats: SourceStats) {
        let source = self.biz_id.clone();
        #[allow(clippy::cast_precision_loss)]
        {
            metrics::gauge!("trustmsg_outbox_rows_pending", "source" => source.clone())
                .set(stats.pending as f64);
            metrics::gauge!("trustmsg_outbox_failed_rows", "source" => source.clone())
                .set(stats.failed as f64);
        }
        metrics::gauge!("trustmsg_outbox_oldest_pending_seconds", "source" => source).set(
            stats
                .oldest_pending_age
                .map_or(0.0, |age| age.as_secs_f64()),
        );
        self.update(|s| {
            let now = Instant::now();
            if let Some((then, relayed)) = s.rate_mark {
                let secs = now.duration_since(then).as_secs_f64();
                if secs > 0.0 {
                    #[allow(clippy::cast_precision_loss)]
                    let rate = (s.relayed - relayed) as f64 / secs;
                    s.relayed_per_s = rate;
                }
            }
            s.rate_mark = Some((now, s.relayed));
            s.stats = Some(stats);
            s.stats_at = Some(Utc::now());
        });
    }
}

/// The sources this instance relays, for the operators' views and actions.
#[derive(Clone, Default)]
pub(crate) struct Sources {
    by_producer: Arc<BTreeMap<String, Arc<Source>>>,
    pub(crate) table: String,
}

impl Sources {
    /// The configured sources (their pools connect when first used).
    pub(crate) fn new(settings: Option<&OutboxSettings>) -> anyhow::Result<Self> {
        let Some(settings) = settings else {
            return Ok(Self::default());
        };
        let mut by_producer = BTreeMap::new();
        for (biz_id, url) in &settings.sources {
            let db = SourceDb::new(url, &settings.table)
                .map_err(|e| anyhow::anyhow!("--outbox-source {biz_id}={url}: {e}"))?;
            by_producer.insert(
                biz_id.clone(),
                Arc::new(Source {
                    biz_id: biz_id.clone(),
                    url: url.clone(),
                    db,
                    status: Mutex::new(Status::default()),
                }),
            );
        }
        Ok(Self {
            by_producer: Arc::new(by_producer),
            table: settings.table.clone(),
        })
    }

    /// Every source, by producer.
    pub(crate) fn all(&self) -> impl Iterator<Item = &Arc<Source>> {
        self.by_producer.values()
    }

    /// The source of `biz_id`.
    pub(crate) fn get(&self, biz_id: &str) -> Option<&Arc<Source>> {
        self.by_producer.get(biz_id)
    }
}

/// Starts each source's relay and gauges; the tasks end at `shutdown`.
pub(crate) fn spawn(
    intake: Intake,
    sources: &Sources,
    settings: OutboxSettings,
    shutdown: CancellationToken,
) -> Vec<(String, JoinHandle<()>)> {
    let settings = Arc::new(settings);
    let mut tasks = Vec::new();
    for source in sources.all() {
        let relay = relay::Relay {
            source: source.clone(),
            intake: intake.clone(),
            settings: settings.clone(),
        };
        tasks.push((
            format!("outbox relay {}", source.biz_id),
            tokio::spawn(relay.run(shutdown.clone())),
        ));
        let name = format!("outbox gauges {}", source.biz_id);
        let (watched, every, deadline) =
            (source.clone(), settings.stats_interval, settings.deadline);
        let task = crate::workers::periodic::spawn(every, shutdown.clone(), move || {
            let source = watched.clone();
            async move {
                match tokio::time::timeout(deadline, source.db.stats()).await {
                    Ok(Ok(stats)) => source.stats(stats),
                    Ok(Err(e)) => source.error("source", format!("reading the gauges: {e}")),
                    Err(_) => source.error("source", "reading the gauges: no answer".into()),
                }
            }
        });
        tasks.push((name, task));
    }
    tasks
}
