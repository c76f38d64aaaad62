//! What every conformance test stands on: the backends, the state matrix
//! and the helpers that arrange and inspect rows through the store's own
//! operations.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use trustmsg::store::{
    self, Actor, AuditEntry, Claimed, DecideOutcome, DecideRequest, DynStore, Inserted, Message,
    NewMessage, SentMark, Store, Target, Transition, VerifyLease,
};
use trustmsg_verify_api::MessageStatus;

use trustmsg_tests as common;
pub(crate) const BIZ: &str = "shop";
/// Far enough out that nothing arranged with it becomes due during a test.
pub(crate) const LATER: Duration = Duration::from_secs(3600);

/// A send claim's room when its payloads' sizes do not matter to the test.
pub(crate) const ROOM: trustmsg::store::PayloadRoom = trustmsg::store::PayloadRoom::UNBOUNDED;
/// A check-back lease of `d` for a row of a producer that is not registered
/// (as none of [`BIZ`]'s rows' is): `d` is then the longest call plus the margin.
pub(crate) fn lasting(d: Duration) -> VerifyLease {
    VerifyLease {
        margin: d / 2,
        max_timeout: d - d / 2,
    }
}

/// An id no test ever creates.
pub(crate) const UNKNOWN_ID: u64 = 987_654_321;

/// Ends the time partition the messages there are now are in and lets
/// `window` pass after it, then runs the upkeep with retention `window`:
/// on a partitioned store that partition is dropped when all its messages
/// are finished, or held when one waits for someone (its finished rows
/// then go one by one with `purge_finished`). A round that says so, and
/// nothing else, on SQLite, where `purge_finished` deletes every finished
/// row past the window.
pub(crate) async fn age_partitions(s: &dyn Store, window: Duration) -> store::PartitionRound {
    let plan = store::PartitionPlan {
        period: Duration::from_millis(1),
        retention: Some(window),
        ahead: store::PARTITIONS_AHEAD,
        archive: false,
    };
    let ended = store::PartitionPlan {
        retention: None,
        ..plan
    };
    s.keep_partitions(&ended).await.unwrap();
    tokio::time::sleep(window + Duration::from_millis(20)).await;
    s.keep_partitions(&plan).await.unwrap()
}

/// `purge_finished` until it finds nothing left; how many it deleted.
pub(crate) async fn purge_all(s: &dyn Store, window: Duration) -> u64 {
    let mut purged = 0;
    loop {
        match s.purge_finished(window, 100).await.unwrap() {
            0 => return purged,
            n => purged += n,
        }
    }
}

/// A store under test and what keeps its database alive. It derefs to the
/// store, so a conformance test takes `&DynStore`, or `&Backend` when it must
/// also reach the database behind the store's back ([`Backend::raw_execute`]).
pub(crate) struct Backend {
    pub(crate) store: DynStore,
    raw: Raw,
    cleanup: Cleanup,
}

impl std::ops::Deref for Backend {
    type Target = DynStore;

    fn deref(&self) -> &DynStore {
        &self.store
    }
}

/// A second pool on the store's database, for what the store itself never writes.
enum Raw {
    MySql(sqlx::MySqlPool),
    Postgres(sqlx::PgPool),
    Sqlite(sqlx::SqlitePool),
    /// One pool per shard: a raw statement about a row goes to the shard
    /// its id was created on (the registry's to the first).
    Shards(Vec<sqlx::MySqlPool>),
}

pub(crate) enum Cleanup {
    MySql(common::TestDb),
    Postgres(common::PgTestDb),
    Sqlite(tempfile::TempDir),
    Shards(Vec<common::TestDb>),
}

/// Databases of the sharded backend.
pub(crate) const SHARDS: usize = 3;

impl Backend {
    pub(crate) async fn mysql() -> Self {
        let db = common::TestDb::create().await;
        let store = store::connect(&db.database_url())
            .await
            .expect("connect to MariaDB");
        Self::mysql_with(db, store).await
    }

    /// MariaDB without `INSERT … RETURNING`, the way a MySQL server is used.
    pub(crate) async fn mysql_without_returning() -> Self {
        let db = common::TestDb::create().await;
        let store = store::mysql::MySqlStore::connect(&db.database_url())
            .await
            .expect("connect to MariaDB")
            .without_insert_returning();
        Self::mysql_with(db, std::sync::Arc::new(store)).await
    }

    async fn mysql_with(db: common::TestDb, store: DynStore) -> Self {
        store.migrate().await.expect("mysql migrations");
        let raw = sqlx::MySqlPool::connect(&db.url)
            .await
            .expect("raw pool on MariaDB");
        Self {
            store,
            raw: Raw::MySql(raw),
            cleanup: Cleanup::MySql(db),
        }
    }

    /// [`SHARDS`] fresh MariaDB databases as the shards of one store.
    pub(crate) async fn sharded() -> Self {
        let mut dbs = Vec::new();
        for _ in 0..SHARDS {
            dbs.push(common::TestDb::create().await);
        }
        let urls: Vec<_> = dbs.iter().map(|d| d.database_url()).collect();
        let store = store::shards::ShardedStore::open(&urls, &[], true)
            .await
            .expect("open the shards");
        let mut raw = Vec::new();
        for db in &dbs {
            raw.push(
                sqlx::MySqlPool::connect(&db.url)
                    .await
                    .expect("raw pool on a shard"),
            );
        }
        Self {
            store: std::sync::Arc::new(store),
            raw: Raw::Shards(raw),
            cleanup: Cleanup::Shards(dbs),
        }
    }

    /// A fresh PostgreSQL database, copied from a migrated template.
    pub(crate) async fn postgres() -> Self {
        let db = common::PgTestDb::migrated().await;
        let store = store::connect(&db.database_url())
            .await
            .expect("connect to PostgreSQL");
        let raw = db.pool_of(2).await;
        Self {
            store,
            raw: Raw::Postgres(raw),
            cleanup: Cleanup::Postgres(db),
        }
    }

    pub(crate) async fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("trustmsg.db").display()
        );
        let store = store::connect(&url.parse().unwrap())
            .await
            .expect("open sqlite file");
        store.migrate().await.expect("sqlite migrations");
        let raw = sqlx::SqlitePool::connect(&url)
            .await
            .expect("raw pool on the sqlite file");
        Self {
            store,
            raw: Raw::Sqlite(raw),
            cleanup: Cleanup::Sqlite(dir),
        }
    }

    /// A second store on the same database (on every shard): another
    /// instance of trustmsg.
    pub(crate) async fn another(&self) -> DynStore {
        match &self.cleanup {
            Cleanup::MySql(db) => store::connect(&db.database_url()).await,
            Cleanup::Postgres(db) => store::connect(&db.database_url()).await,
            Cleanup::Sqlite(_) => panic!("one process owns a SQLite file"),
            Cleanup::Shards(dbs) => {
                let urls: Vec<_> = dbs.iter().map(|d| d.database_url()).collect();
                store::shards::ShardedStore::open(&urls, &[], false)
                    .await
                    .map(|s| std::sync::Arc::new(s) as DynStore)
            }
        }
        .expect("a second store on the test database")
    }

    /// Runs `sql`, a statement without parameters (a change of layout),
    /// on a MariaDB or PostgreSQL database.
    pub(crate) async fn raw_ddl(&self, sql: &str) {
        let sql = sqlx::AssertSqlSafe(sql.to_string());
        match &self.raw {
            Raw::MySql(p) => sqlx::raw_sql(sql).execute(p).await.map(drop),
            Raw::Postgres(p) => sqlx::raw_sql(sql).execute(p).await.map(drop),
            _ => panic!("a change of layout on one MariaDB or PostgreSQL database"),
        }
        .unwrap_or_else(|e| panic!("raw SQL failed: {e}"))
    }

    /// Whether the store is PostgreSQL's, for the SQL that is not the same
    /// on every backend.
    pub(crate) fn is_postgres(&self) -> bool {
        matches!(self.raw, Raw::Postgres(_))
    }

    /// Runs `sql` (SQL every dialect reads the same, see [`for_postgres`])
    /// with `id` bound to its one `?`, straight on the database (on every
    /// shard); returns the rows it matched.
    pub(crate) async fn raw_execute(&self, sql: &str, id: u64) -> u64 {
        let sql = sqlx::AssertSqlSafe(sql.to_string());
        match &self.raw {
            Raw::Postgres(p) => sqlx::query(sqlx::AssertSqlSafe(for_postgres(&sql.0)))
                .bind(i64::try_from(id).unwrap())
                .execute(p)
                .await
                .map(|done| done.rows_affected()),
            Raw::MySql(p) => sqlx::query(sql)
                .bind(id)
                .execute(p)
                .await
                .map(|done| done.rows_affected()),
            // On every shard, the rows matched added up: a statement about
            // one row matches on the shard that holds it, and `?` is not
            // always an id.
            Raw::Shards(pools) => {
                let mut matched = Ok(0);
                for p in pools {
                    let once = sqlx::AssertSqlSafe(sql.0.clone());
                    let done = sqlx::query(once).bind(id).execute(p).await;
                    matched = matched.and_then(|n| done.map(|d| n + d.rows_affected()));
                }
                matched
            }
            Raw::Sqlite(p) => sqlx::query(sql)
                .bind(i64::try_from(id).unwrap())
                .execute(p)
                .await
                .map(|done| done.rows_affected()),
        }
        .unwrap_or_else(|e| panic!("raw SQL failed: {e}"))
    }

    /// Whether the backend is PostgreSQL, MySQL, MySQL shards or SQLite.
    pub(crate) fn kind(&self) -> &'static str {
        match &self.raw {
            Raw::MySql(_) => "mysql",
            Raw::Shards(_) => "sharded",
            Raw::Postgres(_) => "postgres",
            Raw::Sqlite(_) => "sqlite",
        }
    }

    /// Runs `sql` on shard `shard` of the sharded backend only: what the
    /// store never writes there (a registry copy changed behind its back).
    pub(crate) async fn raw_execute_on_shard(&self, shard: usize, sql: &str) -> u64 {
        let Raw::Shards(pools) = &self.raw else {
            panic!("only the sharded backend has shards");
        };
        sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
            .execute(&pools[shard])
            .await
            .unwrap_or_else(|e| panic!("raw SQL failed: {e}"))
            .rows_affected()
    }

    /// On the sharded backend, moves message `id`'s row (and its content
    /// kept apart, if any) to shard `to`, as
    /// the procedure for moving a slot does (docs/scaling.md); the row
    /// keeps its id.
    pub(crate) async fn move_row(&self, id: u64, to: usize) {
        let (Raw::Shards(pools), Cleanup::Shards(dbs)) = (&self.raw, &self.cleanup) else {
            panic!("only shards move rows");
        };
        let from = store::shards::shard_of_id(id);
        let copy = format!(
            "INSERT INTO messages SELECT * FROM `{}`.messages WHERE id = ?",
            dbs[from].name
        );
        let copied = sqlx::query(sqlx::AssertSqlSafe(copy))
            .bind(id)
            .execute(&pools[to])
            .await
            .unwrap();
        assert_eq!(copied.rows_affected(), 1);
        let copy = format!(
            "INSERT INTO message_payloads SELECT * FROM `{}`.message_payloads WHERE message_id = ?",
            dbs[from].name
        );
        sqlx::query(sqlx::AssertSqlSafe(copy))
            .bind(id)
            .execute(&pools[to])
            .await
            .unwrap();
        for delete in [
            "DELETE FROM message_payloads WHERE message_id = ?",
            "DELETE FROM messages WHERE id = ?",
        ] {
            sqlx::query(delete)
                .bind(id)
                .execute(&pools[from])
                .await
                .unwrap();
        }
    }

    /// On MySQL and PostgreSQL, a transaction holding `biz_id`'s producer
    /// row locked (as an update of the registration does) until it is
    /// dropped; None on SQLite, which locks no rows.
    pub(crate) async fn lock_producer(&self, biz_id: &str) -> Option<Held> {
        let sql = "SELECT biz_id FROM producers WHERE biz_id = ? FOR UPDATE";
        let (held, locked) = match &self.raw {
            Raw::MySql(p) => {
                let mut tx = p.begin().await.expect("begin");
                let locked = sqlx::query(sql).bind(biz_id).fetch_all(&mut *tx).await;
                (Held::MySql(tx), locked.map(|rows| rows.len()))
            }
            Raw::Shards(pools) => {
                let mut tx = pools[0].begin().await.expect("begin");
                let locked = sqlx::query(sql).bind(biz_id).fetch_all(&mut *tx).await;
                (Held::MySql(tx), locked.map(|rows| rows.len()))
            }
            Raw::Postgres(p) => {
                let mut tx = p.begin().await.expect("begin");
                let locked = sqlx::query(sqlx::AssertSqlSafe(for_postgres(sql)))
                    .bind(biz_id)
                    .fetch_all(&mut *tx)
                    .await;
                (Held::Postgres(tx), locked.map(|rows| rows.len()))
            }
            Raw::Sqlite(_) => return None,
        };
        assert_eq!(
            locked.expect("lock the producer row"),
            1,
            "{biz_id} is registered"
        );
        Some(held)
    }

    /// Runs `sql` (a `SELECT … FOR UPDATE` with `id` bound to its one `?`) in
    /// a transaction on MySQL or PostgreSQL and holds it, with its row
    /// locks, until the returned transaction ends. Not on SQLite, which has
    /// no row locks.
    pub(crate) async fn lock_row(&self, sql: &str, id: u64) -> Held {
        let p = match &self.raw {
            Raw::MySql(p) => p,
            Raw::Shards(pools) => &pools[store::shards::shard_of_id(id)],
            Raw::Postgres(p) => {
                let mut tx = p.begin().await.expect("begin on PostgreSQL");
                sqlx::query(sqlx::AssertSqlSafe(for_postgres(sql)))
                    .bind(i64::try_from(id).unwrap())
                    .fetch_all(&mut *tx)
                    .await
                    .unwrap_or_else(|e| panic!("raw SQL failed: {e}"));
                return Held::Postgres(tx);
            }
            Raw::Sqlite(_) => panic!("SQLite locks no rows (see store::row_locks)"),
        };
        let mut tx = p.begin().await.expect("begin on MariaDB");
        sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
            .bind(id)
            .fetch_all(&mut *tx)
            .await
            .unwrap_or_else(|e| panic!("raw SQL failed: {e}"));
        Held::MySql(tx)
    }

    /// The integer `sql` selects (one `?`, bound to `id`), straight from the
    /// database (summed over the shards).
    pub(crate) async fn raw_count(&self, sql: &str, id: u64) -> i64 {
        let sql = sqlx::AssertSqlSafe(sql.to_string());
        match &self.raw {
            Raw::MySql(p) => sqlx::query_scalar(sql).bind(id).fetch_one(p).await,
            Raw::Postgres(p) => sqlx::query(sqlx::AssertSqlSafe(for_postgres(&sql.0)))
                .bind(i64::try_from(id).unwrap())
                .fetch_one(p)
                .await
                .map(|row| pg_integer(&row)),
            // The shards' answers added up (a count is every shard's; a
            // row's value comes from the one shard that holds the row).
            Raw::Shards(pools) => {
                let mut sum = Ok(0);
                for p in pools {
                    let once = sqlx::AssertSqlSafe(sql.0.clone());
                    let one: Result<Option<i64>, _> =
                        sqlx::query_scalar(once).bind(id).fetch_optional(p).await;
                    sum = sum.and_then(|n| one.map(|v| n + v.unwrap_or(0)));
                }
                sum
            }
            Raw::Sqlite(p) => {
                sqlx::query_scalar(sql)
                    .bind(i64::try_from(id).unwrap())
                    .fetch_one(p)
                    .await
            }
        }
        .unwrap_or_else(|e| panic!("raw SQL failed: {e}"))
    }

    pub(crate) async fn finish(self) {
        match &self.raw {
            Raw::MySql(p) => p.close().await,
            Raw::Postgres(p) => p.close().await,
            Raw::Sqlite(p) => p.close().await,
            Raw::Shards(pools) => {
                for p in pools {
                    p.close().await;
                }
            }
        }
        drop(self.store);
        match self.cleanup {
            Cleanup::MySql(db) => db.drop_db().await,
            Cleanup::Postgres(db) => db.drop_db().await,
            Cleanup::Sqlite(dir) => drop(dir),
            Cleanup::Shards(dbs) => {
                for db in dbs {
                    db.drop_db().await;
                }
            }
        }
    }
}

/// A transaction holding row locks, from [`Backend::lock_row`] or
/// [`Backend::lock_producer`].
pub(crate) enum Held {
    MySql(sqlx::Transaction<'static, sqlx::MySql>),
    Postgres(sqlx::Transaction<'static, sqlx::Postgres>),
}

impl Held {
    /// Ends the transaction, releasing its locks, before returning (a
    /// dropped transaction's rollback is only queued).
    pub(crate) async fn rollback(self) -> Result<(), sqlx::Error> {
        match self {
            Self::MySql(tx) => tx.rollback().await,
            Self::Postgres(tx) => tx.rollback().await,
        }
    }
}

/// The tests' raw SQL, written for MySQL and SQLite alike, as PostgreSQL
/// reads it: its one `?` as `$1`, and the two casts PostgreSQL spells
/// otherwise (`SIGNED` is `BIGINT`, `CHAR` without a length is one character).
pub(crate) fn for_postgres(sql: &str) -> String {
    sql.replace('?', "$1")
        .replace("AS SIGNED)", "AS BIGINT)")
        .replace("AS CHAR)", "AS TEXT)")
}

/// The one value of `row` as an integer: PostgreSQL answers with the
/// type of the expression (a COUNT is BIGINT, LENGTH an INTEGER, a flag
/// a BOOLEAN), MySQL and SQLite with an integer that fits i64 anyway.
fn pg_integer(row: &sqlx::postgres::PgRow) -> i64 {
    use sqlx::{Column, Row, TypeInfo};
    match row.columns()[0].type_info().name() {
        "INT2" => row.get::<Option<i16>, _>(0).map_or(0, i64::from),
        "INT4" => row.get::<Option<i32>, _>(0).map_or(0, i64::from),
        "BOOL" => row.get::<Option<bool>, _>(0).map_or(0, i64::from),
        _ => row.get::<Option<i64>, _>(0).unwrap_or(0),
    }
}

/// Every state a (biz_id, message_key) can be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Missing,
    Prepared,
    SendPending,
    Sent,
    SendFailed,
    RolledBack,
    Tombstone,
    VerifyFailed,
}

pub(crate) const STATES: [State; 8] = [
    State::Missing,
    State::Prepared,
    State::SendPending,
    State::Sent,
    State::SendFailed,
    State::RolledBack,
    State::Tombstone,
    State::VerifyFailed,
];

/// Whether the arranged row's check-back / send is due now or only much later.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Due {
    Now,
    Later,
}

impl Due {
    fn delay(self) -> Duration {
        match self {
            Due::Now => Duration::ZERO,
            Due::Later => LATER,
        }
    }
}

pub(crate) fn new_message(key: &str, first_verify_after: Duration) -> NewMessage {
    NewMessage {
        biz_id: BIZ.into(),
        message_key: key.into(),
        topic: "orders".into(),
        key: Some("order-1".into()),
        payload: b"{\"amount\":42}".to_vec(),
        headers: BTreeMap::from([("content-type".to_string(), "application/json".to_string())]),
        first_verify_after,
        order_key: None,
        deliver: None,
        traceparent: None,
        tracestate: None,
    }
}

pub(crate) fn key_of(state: State) -> String {
    format!("key-{state:?}")
}

pub(crate) async fn prepare(s: &dyn Store, key: &str, due: Due) -> Message {
    match s
        .insert_prepared(&new_message(key, due.delay()))
        .await
        .unwrap()
    {
        Inserted::Created(m) => m,
        other => panic!("prepare of {key} did not create a row: {other:?}"),
    }
}

pub(crate) async fn decide_key(
    s: &dyn Store,
    key: &str,
    commit: bool,
    actor: Actor,
    lease: Duration,
) -> DecideOutcome {
    store::decide(
        s,
        DecideRequest {
            target: Target::Key {
                biz_id: BIZ,
                message_key: key,
            },
            commit,
            actor,
            reason: "decided by the test".into(),
            send_lease: lease,
            verify_attempt: false,
        },
    )
    .await
    .unwrap()
}

pub(crate) fn producer() -> Actor {
    Actor::Producer(BIZ.into())
}

/// `m`, as read, from `from` to `to` by `actor`: with no send lease, no
/// attempt counted and no error, which the callers change where they need.
pub(crate) fn transition(
    m: &Message,
    from: MessageStatus,
    to: MessageStatus,
    actor: Actor,
    reason: &str,
) -> Transition {
    Transition {
        id: m.id,
        from,
        version: m.version,
        to,
        send_lease: Duration::ZERO,
        verify_attempt: false,
        error: None,
        actor,
        reason: reason.into(),
    }
}

/// Check-back gives up on `m`: PREPARED → VERIFY_FAILED, an attempt counted.
pub(crate) fn verify_failed(m: &Message) -> Transition {
    Transition {
        verify_attempt: true,
        error: Some("check-back timed out".into()),
        ..transition(
            m,
            MessageStatus::Prepared,
            MessageStatus::VerifyFailed,
            Actor::Verifier,
            "attempt limit reached",
        )
    }
}

/// The producer commits `m` in a batch: PREPARED → COMMITTED, its send
/// claimed for a minute.
pub(crate) fn batched_commit(m: &Message) -> Transition {
    Transition {
        send_lease: Duration::from_secs(60),
        ..transition(
            m,
            MessageStatus::Prepared,
            MessageStatus::Committed,
            producer(),
            "batched commit",
        )
    }
}

pub(crate) fn decided(outcome: DecideOutcome) -> Message {
    match outcome {
        DecideOutcome::Decided(m) => m,
        other => panic!("expected Decided, got {other:?}"),
    }
}

/// Puts `key` into `state` through the store's own operations.
pub(crate) async fn arrange_key(
    s: &dyn Store,
    key: &str,
    state: State,
    due: Due,
) -> Option<Message> {
    let lease = due.delay();
    let m = match state {
        State::Missing => return None,
        State::Prepared => prepare(s, key, due).await,
        State::SendPending => {
            prepare(s, key, Due::Later).await;
            decided(decide_key(s, key, true, producer(), lease).await)
        }
        State::Sent => {
            prepare(s, key, Due::Later).await;
            let m = decided(decide_key(s, key, true, producer(), LATER).await);
            let mark = SentMark {
                id: m.id,
                version: m.version,
                partition: 3,
                offset: 42,
                order: None,
            };
            assert_eq!(s.mark_sent(&[mark]).await.unwrap(), 1);
            s.find_message_by_id(m.id).await.unwrap().unwrap()
        }
        State::SendFailed => {
            prepare(s, key, Due::Later).await;
            let m = decided(decide_key(s, key, true, producer(), LATER).await);
            s.mark_send_failed(m.id, m.version, "record too large", &Actor::Forwarder)
                .await
                .unwrap()
                .expect("pending row fails")
        }
        State::RolledBack => {
            prepare(s, key, Due::Later).await;
            decided(decide_key(s, key, false, producer(), LATER).await)
        }
        State::Tombstone => decided(decide_key(s, key, false, producer(), LATER).await),
        State::VerifyFailed => {
            let m = prepare(s, key, due).await;
            s.transition(&verify_failed(&m))
                .await
                .unwrap()
                .expect("prepared row fails check-back")
        }
    };
    Some(m)
}

pub(crate) async fn arrange(s: &dyn Store, state: State, due: Due) -> Option<Message> {
    arrange_key(s, &key_of(state), state, due).await
}

pub(crate) fn id_of(m: &Option<Message>) -> u64 {
    m.as_ref().map_or(UNKNOWN_ID, |m| m.id)
}

pub(crate) fn version_of(m: &Option<Message>) -> u64 {
    m.as_ref().map_or(0, |m| m.version)
}

/// One audit row in a form that compares and prints well.
pub(crate) fn line(e: &AuditEntry) -> String {
    fn o(v: &Option<String>) -> &str {
        v.as_deref().unwrap_or("-")
    }
    format!(
        "{} {} {}=>{} send {}=>{}",
        e.actor,
        e.action,
        o(&e.from_status),
        o(&e.to_status),
        o(&e.from_send_status),
        o(&e.to_send_status)
    )
}

pub(crate) async fn audit_lines(s: &dyn Store, id: u64) -> Vec<String> {
    s.audit_trail(id).await.unwrap().iter().map(line).collect()
}

/// The row and its audit trail are exactly as before (or there is still no row).
pub(crate) async fn assert_untouched(
    s: &dyn Store,
    state: State,
    before: &Option<Message>,
    audit: usize,
) {
    match before {
        Some(m) => {
            let now = s.find_message_by_id(m.id).await.unwrap();
            assert_eq!(now.as_ref(), Some(m), "{state:?}: row changed");
            assert_eq!(
                s.audit_trail(m.id).await.unwrap().len(),
                audit,
                "{state:?}: audit rows added"
            );
        }
        None => {
            assert_eq!(
                s.find_message(BIZ, &key_of(state)).await.unwrap(),
                None,
                "{state:?}: a row appeared"
            );
            assert_eq!(s.find_message_by_id(UNKNOWN_ID).await.unwrap(), None);
        }
    }
}

/// What an operation on one row answered: whether it matched the row.
pub(crate) trait Matched: std::fmt::Debug {
    fn matched(&self) -> bool;
}

impl Matched for bool {
    fn matched(&self) -> bool {
        *self
    }
}

impl<T: std::fmt::Debug> Matched for Option<T> {
    fn matched(&self) -> bool {
        self.is_some()
    }
}

/// Arranges a row in every state (due later) and applies `op` to its id and
/// version. In every state but `applies_to` the operation must match nothing
/// (`{state:?} must not {what}`) and leave the row and its audit trail as
/// they were. Returns, for `applies_to`, the row as it was before, its audit
/// length then, and what `op` answered.
pub(crate) async fn apply_in_every_state<T, F, Fut>(
    s: &dyn Store,
    applies_to: State,
    what: &str,
    mut op: F,
) -> (Message, usize, T)
where
    T: Matched,
    F: FnMut(u64, u64) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let mut applied = None;
    for state in STATES {
        let before = arrange(s, state, Due::Later).await;
        let audit = audit_len(s, &before).await;
        let got = op(id_of(&before), version_of(&before)).await;
        if state == applies_to {
            applied = Some((before.expect("a row to apply to"), audit, got));
        } else {
            assert!(!got.matched(), "{state:?} must not {what}: {got:?}");
            assert_untouched(s, state, &before, audit).await;
        }
    }
    applied.expect("applies_to is one of STATES")
}

pub(crate) async fn audit_len(s: &dyn Store, m: &Option<Message>) -> usize {
    match m {
        Some(m) => s.audit_trail(m.id).await.unwrap().len(),
        None => 0,
    }
}

/// What a claim returns: the claimed rows alone, or with the quarantined.
pub(crate) trait ClaimResult {
    /// Whether the claim took no row at all.
    fn took_nothing(&self) -> bool;
}

impl ClaimResult for Vec<Message> {
    fn took_nothing(&self) -> bool {
        self.is_empty()
    }
}

impl ClaimResult for Vec<trustmsg_verify_api::admin::AlertView> {
    fn took_nothing(&self) -> bool {
        self.is_empty()
    }
}

impl ClaimResult for Claimed {
    fn took_nothing(&self) -> bool {
        self.taken() == 0
    }
}

/// Polls `claim` until it takes something, for at most 10 s.
pub(crate) async fn claim_eventually<C, F, Fut>(mut claim: F) -> C
where
    C: ClaimResult,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = C>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got = claim().await;
        if !got.took_nothing() {
            return got;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the lease never ran out"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `again`, claimed once the lease of the claim `first` ran out (`lease_end`,
/// its next due time), is the row `before` alone, claimed twice since.
pub(crate) async fn assert_reclaimed_after_the_lease(
    s: &dyn Store,
    before: &Message,
    again: &[Message],
    lease_end: Option<DateTime<Utc>>,
) {
    let now = s.now().await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].id, before.id);
    assert_eq!(again[0].version, before.version + 2);
    assert!(
        now >= lease_end.unwrap(),
        "reclaimed before the lease ran out"
    );
}

/// A row arranged in each state (due later), with its audit length.
pub(crate) async fn arrange_every_state(s: &dyn Store) -> Vec<(State, Option<Message>, usize)> {
    let mut rows = Vec::new();
    for state in STATES {
        let before = arrange(s, state, Due::Later).await;
        let audit = audit_len(s, &before).await;
        rows.push((state, before, audit));
    }
    rows
}

/// The claims (id and version) of `rows`, as [`arrange_every_state`] gives them.
pub(crate) fn claims_of(rows: &[(State, Option<Message>, usize)]) -> Vec<(u64, u64)> {
    rows.iter()
        .map(|(_, m, _)| (id_of(m), version_of(m)))
        .collect()
}

pub(crate) fn is_whole_ms(t: DateTime<Utc>) -> bool {
    t.timestamp_subsec_nanos() == t.timestamp_subsec_millis() * 1_000_000
}

/// A message-shaped placeholder for the missing state (only id/version are used).
pub(crate) fn arrange_dummy() -> Message {
    Message {
        id: UNKNOWN_ID,
        biz_id: BIZ.into(),
        message_key: key_of(State::Missing),
        topic: None,
        key: None,
        payload: Vec::new(),
        headers: BTreeMap::new(),
        content_digest: None,
        status: MessageStatus::Prepared,
        send_status: None,
        tombstone: false,
        version: 0,
        verify_attempts: 0,
        send_attempts: 0,
        last_error: None,
        next_verify_at: None,
        next_send_at: None,
        kafka_partition: None,
        kafka_offset: None,
        created_at: DateTime::UNIX_EPOCH,
        updated_at: DateTime::UNIX_EPOCH,
        decided_at: None,
        sent_at: None,
        order_key: None,
        order_seq: None,
        deliver_at: None,
        traceparent: None,
        tracestate: None,
    }
}
