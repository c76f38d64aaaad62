//! PostgreSQL (≥ 13) backend: the second production store.
//!
//! Same guarantees as the MySQL backend (see the [`super`] module docs), met
//! the PostgreSQL way:
//! - A claim is one `UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED)
//!   RETURNING …`: the due rows another claimer holds are skipped, not waited
//!   for, and the ones taken get their lease and their version bump in the
//!   same statement, so concurrent instances split the due rows and a
//!   crashed claimer's rows come back when the lease runs out. Unreadable
//!   rows are quarantined in the claim's transaction, as on MySQL.
//! - Every state change is a guarded UPDATE. PostgreSQL reports the rows an
//!   UPDATE matched, which here are the rows it changed: every guarded
//!   UPDATE bumps `version`. Under READ COMMITTED (the default, kept), an
//!   UPDATE that finds its row changed by a concurrent transaction
//!   re-checks its guard against the new row, so the loser matches nothing.
//! - Times are `TIMESTAMPTZ(3)`, UTC instants to the millisecond as MySQL's
//!   `DATETIME(3)`, from [`NOW`]: `statement_timestamp()`, the start of the
//!   statement as MySQL's `UTC_TIMESTAMP(3)`, not `now()`, which would be
//!   the start of the transaction and stand still through a long one.
//! - Names compare byte for byte (`COLLATE "C"`), as MySQL's binary columns.
//! - The SQL, shared or this backend's own, is written with `?` like the
//!   other backends' and numbered `$1…$n` by [`sql::stmt`]; an id is
//!   `RETURNING id`, there being no last insert id.
//! - Migrations run under sqlx's `pg_advisory_lock`, which waits: instances
//!   starting together apply them once.
//!
//! - Batches: a prepare batch is one multi-row `INSERT … ON CONFLICT DO
//!   NOTHING RETURNING` (the keys there already read with one SELECT); a
//!   decision batch one guarded `UPDATE … RETURNING` per target state (the
//!   guards bound as arrays and `UNNEST`ed, so one statement text whatever
//!   the batch's size), with its audit rows, seqs and alerts in the same
//!   transaction; a batch of SENT marks one `UPDATE … FROM UNNEST(…)`.
//!   `RETURNING` tells which guards matched, so a lost race never sends the
//!   batch one by one. A batch that deadlocks with another is done one by one.
//!
//! One file per concern, one `impl` of a [`crate::store`] sub-trait in
//! each; this file holds the store itself, its connection, the clock
//! expression and the dialect (`sql::Dialect`, `sql::SqlRow`). `claims.rs`
//! runs the claim every claiming concern builds on (its statements are
//! `sql::returning_claim`'s, shared with SQLite); an operator's guarded
//! change, a tombstone and the one-by-one check-back release are
//! `sql::returning`'s.

mod claims;
mod committed;
mod lifecycle;
mod messages;
mod partitions;
mod sends;
mod upgrade;

use std::str::FromStr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgRow};
use sqlx::{Connection, PgPool, Postgres, Row, TypeInfo, ValueRef};

use crate::store::sql::{self, Dialect, SqlRow};
use crate::store::StoreResult;

/// The database clock: the start of the current statement, to the
/// millisecond the columns hold. Every time one statement writes is the
/// same instant.
const NOW: &str = "date_trunc('milliseconds', statement_timestamp())";

/// Appended to a bound number of milliseconds: that span as an interval.
const MS: &str = " * INTERVAL '1 millisecond'";

/// The PostgreSQL store.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    /// Where retention's row purge stops (`sql::partitions`).
    held_below: Arc<AtomicU64>,
}

impl PgStore {
    /// Connects a pool to `url` (`postgres://user:pass@host:port/db`, with
    /// sqlx's options such as `sslmode=verify-full&sslrootcert=…`).
    pub async fn connect(url: &crate::store::DatabaseUrl) -> StoreResult<Self> {
        let opts = PgConnectOptions::from_str(url.expose_for_driver())?;
        let pool = PgPoolOptions::new()
            .max_connections(32)
            .acquire_timeout(Duration::from_secs(10))
            // As on MySQL: right after a worker abandoned a statement, close
            // what comes back instead of testing it with a ping that would
            // wait behind the lost statement.
            .after_release(|conn, _| {
                conn.shrink_buffers();
                Box::pin(async { Ok(crate::store::deadline::reuse_released()) })
            })
            .connect_with(opts)
            .await?;
        Ok(Self {
            pool,
            held_below: Arc::default(),
        })
    }

    /// The underlying pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

use crate::store::sql::millis;

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Ids and versions are BIGINT; one beyond i64 cannot be stored, so it
/// cannot match anything either.
fn sql_int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(-1)
}

sql::outbox_store!(PgStore);
sql::housekeeping_store!(PgStore, Postgres, partitioned);
sql::alert_store!(PgStore);
sql::waiting_store!(PgStore, Postgres);
sql::send_store!(PgStore, Postgres);
sql::verify_store!(PgStore, Postgres, each);
sql::registry_store!(PgStore);
sql::ledger_store!(PgStore, Postgres);
sql::operator_store!(PgStore, Postgres, returning);

/// What the concerns written once ([`sql::backend`]) take from this backend.
impl PgStore {
    /// What a SELECT appends to lock the rows it reads: row locks until the transaction ends.
    const LOCK: &'static str = " FOR UPDATE";

    /// What a consumption's INSERT ends with: an existing row is left as it is, and read `FOR UPDATE` after.
    const LEDGER_KEEP: &'static str = "ON CONFLICT (group_name, message_id) DO NOTHING";

    /// Whether a failed statement lost a deadlock (and may be tried again).
    fn lost_a_deadlock(e: &sqlx::Error) -> bool {
        is_deadlock(e)
    }

    /// A transaction that will write: a plain `BEGIN`.
    async fn write_tx(&self) -> sqlx::Result<sqlx::Transaction<'_, Postgres>> {
        self.pool.begin().await
    }
}

impl Dialect for Postgres {
    const NOW: &'static str = NOW;
    type Int = i64;

    fn int(v: u64) -> i64 {
        sql_int(v)
    }

    fn rows_affected(done: &sqlx::postgres::PgQueryResult) -> u64 {
        done.rows_affected()
    }

    /// Never asked: [`Dialect::RETURNING_ID`] reads the id instead.
    fn last_insert_id(_: &sqlx::postgres::PgQueryResult) -> u64 {
        0
    }

    const RETURNING_ID: &'static str = " RETURNING id";
    const NUMBERED_PLACEHOLDERS: bool = true;
    const INSERT_IGNORE: &'static str = "INSERT";
    const IGNORED: &'static str = " ON CONFLICT DO NOTHING";
    const NO_BYTES: &'static str = "''::bytea";
    const SIGNED: &'static str = "BIGINT";

    const MINUS_SPAN: &'static str = " - ? * INTERVAL '1 microsecond'";
    const GREATEST: &'static str = "GREATEST";
    const PLUS_SPAN: &'static str = " + ? * INTERVAL '1 microsecond'";

    fn span(d: Duration) -> i64 {
        micros(d)
    }

    type Time = DateTime<Utc>;

    fn time(t: DateTime<Utc>) -> DateTime<Utc> {
        t
    }

    /// A plain table by itself; a partitioned one (whose parent holds no
    /// rows) summed over its leaves, the partitions `pg_partition_tree`
    /// lists below it. Rows are the live rows the statistics count
    /// (inserts and deletes as they commit, published within a second or
    /// so), bytes `pg_total_relation_size` (heap, TOAST and indexes).
    fn table_sizes(tables: &str) -> String {
        format!(
            "SELECT t.name AS name, \
             COALESCE(SUM(pg_stat_get_live_tuples(r.relid)), 0)::BIGINT AS row_estimate, \
             COALESCE(SUM(pg_total_relation_size(r.relid)), 0)::BIGINT AS bytes \
             FROM unnest(ARRAY[{tables}]::TEXT[]) AS t(name) \
             CROSS JOIN LATERAL (\
             SELECT c.oid FROM pg_class AS c WHERE c.oid = to_regclass(t.name) AND c.relkind = 'r' \
             UNION ALL SELECT p.relid FROM pg_partition_tree(to_regclass(t.name)) AS p \
             WHERE p.isleaf AND p.level > 0) AS r(relid) \
             GROUP BY t.name"
        )
    }
}

impl SqlRow for PgRow {
    fn opt_text(&self, col: &str) -> StoreResult<Option<String>> {
        self.try_get(col).map_err(|e| sql::column_error(col, e))
    }

    fn opt_bytes(&self, col: &str) -> StoreResult<Option<Vec<u8>>> {
        self.try_get(col).map_err(|e| sql::column_error(col, e))
    }

    /// An integer of any width, or a boolean as 0 or 1: sqlx decodes a
    /// PostgreSQL value only as its own type, and the shared SQL reads
    /// BIGINT columns, INTEGER ones (a partition, an HTTP status), literals
    /// and COUNTs, and BOOLEAN flags ([`SqlRow::flag`]) alike.
    fn opt_i64(&self, col: &str) -> StoreResult<Option<i64>> {
        let value = self
            .try_get_raw(col)
            .map_err(|e| sql::column_error(col, e))?;
        let type_name = value.type_info().name().to_string();
        let read = match type_name.as_str() {
            "INT2" => self
                .try_get::<Option<i16>, _>(col)
                .map(|v| v.map(i64::from)),
            "INT4" => self
                .try_get::<Option<i32>, _>(col)
                .map(|v| v.map(i64::from)),
            "BOOL" => self
                .try_get::<Option<bool>, _>(col)
                .map(|v| v.map(i64::from)),
            _ => self.try_get::<Option<i64>, _>(col),
        };
        read.map_err(|e| sql::column_error(col, e))
    }

    fn opt_time(&self, col: &str) -> StoreResult<Option<DateTime<Utc>>> {
        self.try_get(col).map_err(|e| sql::column_error(col, e))
    }
}

/// A transaction PostgreSQL aborted to break a deadlock (or a
/// serialization failure): nothing it wrote stays, and doing the same work
/// in smaller transactions succeeds.
fn is_deadlock(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if matches!(db.code().as_deref(), Some("40P01" | "40001")))
}

/// The upsert by which a batch of commits adds its rows to each of their
/// keys' `last_seq` ([`sql::order_commit_batch`]).
fn bump_keys() -> String {
    format!(
        " ON CONFLICT (order_key) DO UPDATE SET \
         last_seq = ordered_keys.last_seq + EXCLUDED.last_seq, updated_at = {NOW}"
    )
}

/// A message's `deliver_at`: the instant it was given, or the database
/// clock plus its delay, or NULL; its two parameters are
/// [`sql::deliver_binds`].
fn deliver_at() -> String {
    format!(
        "COALESCE(?, {NOW}{plus})",
        plus = <Postgres as Dialect>::PLUS_SPAN
    )
}

/// A statement with its parameters bound.
type PgQuery<'q> = sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>;
