//! What the periodic workers read and keep: the backlog, the flow per
//! minute (its counts in `flow_minutes`' column order), and the move of old
//! rows' long contents.

use chrono::{DateTime, Utc};

/// The messages that wait for something, for `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Backlog {
    /// `(status, send_status, count)` for PREPARED, VERIFY_FAILED, and
    /// COMMITTED with PENDING or SEND_FAILED; states with none are absent.
    pub counts: Vec<(String, Option<String>, u64)>,
    /// When the oldest PREPARED message was prepared.
    pub oldest_prepared_at: Option<DateTime<Utc>>,
    /// Since when the oldest message whose send is PENDING and due has
    /// waited: its commit, or its `deliver_at` if later.
    pub oldest_pending_send_at: Option<DateTime<Utc>>,
    /// Committed messages whose send waits for a `deliver_at` still in the
    /// future: not backlog, so not in `counts` either.
    pub scheduled: u64,
    /// Alerts not yet delivered to the webhook (state pending).
    pub pending_alerts: u64,
    /// Submitted commits waiting for their prepare (the Kafka way in).
    pub waiting_commits: u64,
    /// When the oldest of them was raised.
    pub oldest_pending_alert_at: Option<DateTime<Utc>>,
    /// The database clock when this was read.
    pub at: DateTime<Utc>,
}

/// The backlog at one moment, as `crate::workers::backlog` read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BacklogSample {
    /// When it was read (the database clock); of two samples of a minute
    /// the later one is kept, whichever instance adds it first.
    pub at: DateTime<Utc>,
    /// Messages PREPARED.
    pub prepared: u64,
    /// Committed messages whose send is PENDING (and due).
    pub pending: u64,
}

/// What happened in one minute, counted by the instances as they did it
/// (`flow_minutes`, see [`crate::store::HousekeepingStore::add_flow`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowCounts {
    /// Messages prepared (rows created; a repeated prepare is not counted).
    pub prepared: u64,
    /// Messages committed, by whoever decided (producer, check-back, operator).
    pub committed: u64,
    /// Messages rolled back (a rollback of an unknown message included).
    pub rolled_back: u64,
    /// Records Kafka acknowledged.
    pub sent: u64,
    /// Messages that went VERIFY_FAILED or SEND_FAILED.
    pub failed: u64,
    /// Check-back calls answered `commit`.
    pub checks_commit: u64,
    /// Check-back calls answered `rollback`.
    pub checks_rollback: u64,
    /// Check-back calls answered `unknown`.
    pub checks_unknown: u64,
    /// Check-back calls that got no usable answer.
    pub checks_failed: u64,
}

impl FlowCounts {
    /// The column names of `flow_minutes`, in the order of [`FlowCounts::values`].
    pub const COLUMNS: [&'static str; 9] = [
        "prepared",
        "committed",
        "rolled_back",
        "sent",
        "failed",
        "checks_commit",
        "checks_rollback",
        "checks_unknown",
        "checks_failed",
    ];

    /// The counts in the order of [`FlowCounts::COLUMNS`].
    pub fn values(&self) -> [u64; 9] {
        [
            self.prepared,
            self.committed,
            self.rolled_back,
            self.sent,
            self.failed,
            self.checks_commit,
            self.checks_rollback,
            self.checks_unknown,
            self.checks_failed,
        ]
    }

    /// The counts from values in the order of [`FlowCounts::COLUMNS`].
    pub fn from_values(v: [u64; 9]) -> Self {
        let [prepared, committed, rolled_back, sent, failed, checks_commit, checks_rollback, checks_unknown, checks_failed] =
            v;
        Self {
            prepared,
            committed,
            rolled_back,
            sent,
            failed,
            checks_commit,
            checks_rollback,
            checks_unknown,
            checks_failed,
        }
    }

    /// Whether nothing was counted.
    pub fn is_zero(&self) -> bool {
        self.values() == [0; 9]
    }
}

/// One minute of the flow: as one instance adds it
/// ([`crate::store::HousekeepingStore::add_flow`]), or as the sum of all is read back
/// ([`crate::store::HousekeepingStore::flow_since`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowMinute {
    /// The minute's start (seconds and below zero).
    pub minute: DateTime<Utc>,
    pub counts: FlowCounts,
    /// The backlog as last sampled in the minute; None when not sampled.
    pub backlog: Option<BacklogSample>,
}

/// What one chunk of the move of long contents out of rows written before
/// migration 0018 did ([`crate::store::HousekeepingStore::move_payloads`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PayloadMove {
    /// Rows walked past.
    pub walked: u64,
    /// Of those, rows whose content was moved to `message_payloads`.
    pub moved: u64,
    /// The walk had reached the last row: there is nothing more to move.
    pub finished: bool,
}

impl PayloadMove {
    /// A walk that is over.
    pub const FINISHED: Self = Self {
        walked: 0,
        moved: 0,
        finished: true,
    };
}

/// How much one of the large tables holds, for `/metrics` and the console.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSize {
    /// The table's name (`messages`, `audit_log`, …).
    pub table: String,
    /// Its rows as the database estimates them (InnoDB's statistics,
    /// PostgreSQL's live tuples), not a count: close, never exact.
    pub rows: u64,
    /// Bytes its data and indexes take on disk (the pages allocated to
    /// them: space freed by deleted rows is reused, not given back).
    pub bytes: u64,
}

/// What the large tables hold and how old the oldest message is
/// ([`crate::store::HousekeepingStore::storage`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Storage {
    /// The large tables that exist, by name; a partitioned one's figures
    /// are the sum over its partitions.
    pub tables: Vec<TableSize>,
    /// When the oldest message still stored (the lowest id) was prepared;
    /// None when there is none.
    pub oldest_message_at: Option<DateTime<Utc>>,
    /// The oldest time partition still there; None where the tables are
    /// not partitioned (SQLite).
    pub oldest_partition: Option<OldestPartition>,
    /// The database clock when this was read.
    pub at: DateTime<Utc>,
}

/// The oldest time partition still there (`sql::partitions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OldestPartition {
    /// Its period: its messages' ids start at `period << 32`.
    pub period: u64,
    /// When it began to take new messages.
    pub from: DateTime<Utc>,
    /// When the next one did; None while it is the one taking them.
    pub to: Option<DateTime<Utc>>,
}

/// How the time partitions are kept (issue 60; `store/sql/partitions.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionPlan {
    /// How long one partition takes new messages (`--partition-period`).
    pub period: std::time::Duration,
    /// Retention (`--retention`): a partition whose every message is
    /// finished and unchanged for this long is dropped. None: nothing is.
    pub retention: Option<std::time::Duration>,
    /// Partitions made ahead of the one taking new messages.
    pub ahead: u64,
    /// An archive takes what leaves (`--archive`): a partition is dropped
    /// only once its finished messages are all archived
    /// ([`PartitionRound::to_archive`]).
    pub archive: bool,
}

/// A partition retention would drop but for its archive: the messages with
/// ids in `[from, to)` are to be archived, those below `from` are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveRange {
    /// The partition's period.
    pub period: u64,
    /// Where the archive has got to: the first id not archived yet.
    pub from: u64,
    /// The end of the partition's ids.
    pub to: u64,
}

/// What one round of partition upkeep saw and did, for the logs and
/// `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionRound {
    /// The store is partitioned (MySQL/MariaDB, PostgreSQL); false on
    /// SQLite, where retention deletes rows.
    pub partitioned: bool,
    /// This instance held the upkeep's lock: the round made, moved and
    /// dropped what was due. Without it another instance did, and the rest
    /// is as this one last saw it.
    pub led: bool,
    /// The period new messages take ids from.
    pub current: Option<u64>,
    /// The period opened by this round, if it moved the ids on.
    pub opened: Option<u64>,
    /// Periods whose partitions this round dropped.
    pub dropped: Vec<u64>,
    /// Periods past retention held by messages an operator may still act
    /// on (PREPARED, VERIFY_FAILED, PENDING, SEND_FAILED): their finished
    /// rows are deleted one by one instead, until the partition can go.
    pub held: Vec<u64>,
    /// Periods with partitions (opened, not dropped).
    pub partitions: u64,
    /// When the oldest of them opened: the age of the oldest partition.
    pub oldest_opened_at: Option<DateTime<Utc>>,
    /// Keys of dropped partitions deleted from `message_keys`.
    pub keys_deleted: u64,
    /// With an archive: the partitions that go once archived, oldest first.
    pub to_archive: Vec<ArchiveRange>,
}

impl PartitionRound {
    /// The rounds of two databases (shards) as one: what either did, the
    /// partitions of both, the older oldest partition.
    pub fn and(mut self, other: PartitionRound) -> PartitionRound {
        self.partitioned |= other.partitioned;
        self.led |= other.led;
        self.current = self.current.max(other.current);
        self.opened = self.opened.max(other.opened);
        self.dropped.extend(other.dropped);
        self.held.extend(other.held);
        self.partitions += other.partitions;
        self.oldest_opened_at = match (self.oldest_opened_at, other.oldest_opened_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.keys_deleted += other.keys_deleted;
        self.to_archive.extend(other.to_archive);
        self
    }
}
