//! Migration 0020 (time partitions) on a database the previous release
//! migrated (migrations up to 0019, as sqlx's own migrator records them from
//! the files) and filled: the rows are upgraded in place and keep working;
//! on a store that holds rows the upgrade is made online
//! (`store/{mysql,postgres}/upgrade.rs`), so writes made meanwhile, as an
//! instance of the previous release makes them, are all there afterwards;
//! and what the online steps leave is what the migration's file makes.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::AssertSqlSafe;
use trustmsg::store::{DynStore, Inserted};
use trustmsg_tests as common;
use trustmsg_verify_api::MessageStatus;

use crate::store::harness::*;

/// The migrations before time partitions, in a directory of their own.
fn before_0020(backend: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let from = format!("{}/../migrations/{backend}", env!("CARGO_MANIFEST_DIR"));
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.as_str() < "0020" {
            std::fs::copy(&path, dir.path().join(name)).unwrap();
        }
    }
    dir
}

/// How a dialect writes what the old rows hold.
#[derive(Clone, Copy)]
struct Dialect {
    now: &'static str,
    mysql: bool,
}

const MYSQL: Dialect = Dialect {
    now: "UTC_TIMESTAMP(3)",
    mysql: true,
};
const POSTGRES: Dialect = Dialect {
    now: "now()",
    mysql: false,
};

impl Dialect {
    /// The digest of [`new_message`]'s content, as a literal.
    fn digest(self) -> String {
        let digest = new_message("x", LATER).digest();
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        match self.mysql {
            true => format!("X'{hex}'"),
            false => format!("'\\x{hex}'::bytea"),
        }
    }

    /// A message of BIZ under `key` with [`new_message`]'s content, as the
    /// previous release writes it: PREPARED, or SENT when `sent`.
    fn insert(self, key: &str, sent: bool) -> String {
        let (status, send) = match sent {
            true => ("'COMMITTED'", "'SENT'"),
            false => ("'PREPARED'", "NULL"),
        };
        format!(
            "INSERT INTO messages (biz_id, message_key, topic, record_key, payload, headers, \
             content_digest, status, send_status, created_at, updated_at) VALUES ('{BIZ}', \
             '{key}', 'orders', 'order-1', '{{\"amount\":42}}', \
             '{{\"content-type\":\"application/json\"}}', {digest}, {status}, {send}, {now}, {now})",
            digest = self.digest(),
            now = self.now,
        )
    }

    /// The audit row of the message under `key`.
    fn audit(self, key: &str) -> String {
        format!(
            "INSERT INTO audit_log (message_id, actor, action, reason, created_at) \
             SELECT id, 'producer:{BIZ}', 'prepare', '', {now} FROM messages \
             WHERE biz_id = '{BIZ}' AND message_key = '{key}'",
            now = self.now
        )
    }

    /// `n` SENT messages `bulk-<i>` with an audit row each, in two statements.
    fn bulk(self, n: usize) -> Vec<String> {
        let insert = self.insert("KEY", true);
        let (head, values) = insert.split_at(insert.find(" VALUES (").unwrap());
        let select = values
            .strip_prefix(" VALUES (")
            .and_then(|v| v.strip_suffix(')'))
            .unwrap()
            .replace("'KEY'", "CONCAT('bulk-', n)");
        let messages = match self.mysql {
            true => format!(
                "SET SESSION max_recursive_iterations = {n}; {head} WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq \
                 WHERE n < {n}) SELECT {select} FROM seq"
            ),
            false => format!("{head} SELECT {select} FROM generate_series(1, {n}) AS n"),
        };
        vec![
            messages,
            format!(
                "INSERT INTO audit_log (message_id, actor, action, reason, created_at) \
                 SELECT id, 'producer:{BIZ}', 'prepare', '', created_at FROM messages"
            ),
        ]
    }
}

/// The previous release's migrations applied to `pool`'s empty database,
/// then `sql` run there.
macro_rules! previous_release {
    ($pool:expr, $backend:literal, $sql:expr) => {{
        let dir = before_0020($backend);
        let migrator = sqlx::migrate::Migrator::new(dir.path()).await.unwrap();
        migrator.run($pool).await.unwrap();
        for sql in $sql {
            sqlx::raw_sql(AssertSqlSafe(sql))
                .execute($pool)
                .await
                .unwrap();
        }
    }};
}

/// `n` messages `old-<i>`, SENT but for the last, PREPARED.
fn old_rows(d: Dialect, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| d.insert(&format!("old-{i}"), i + 1 != n))
        .collect()
}

async fn holds_after_the_upgrade(store: DynStore, n: usize) {
    let s = store.as_ref();
    store
        .migrate()
        .await
        .expect("migration 0020 on a populated store");
    // The old rows are the first partition's and their keys hold.
    let old = s
        .find_message(BIZ, "old-0")
        .await
        .unwrap()
        .expect("an old row");
    let Inserted::Existing(found) = s
        .insert_prepared(&new_message("old-0", LATER))
        .await
        .unwrap()
    else {
        panic!("an old key made a second message");
    };
    assert_eq!(found.id, old.id);
    let last = format!("old-{}", n - 1);
    let committed = decided(decide_key(s, &last, true, producer(), LATER).await);
    assert_eq!(committed.status, MessageStatus::Committed);
    let Inserted::Created(new) = s.insert_prepared(&new_message("new", LATER)).await.unwrap()
    else {
        panic!("a new key");
    };
    assert!(new.id > committed.id);
    // And they go on into the next partitions, and away.
    let round = age_partitions(s, Duration::from_millis(10)).await;
    assert!(round.partitioned, "{round:?}");
    assert!(
        !round.held.is_empty(),
        "the new PREPARED message holds the first partition"
    );
    purge_all(s, Duration::from_millis(10)).await;
    assert_eq!(
        s.find_message(BIZ, "old-1").await.unwrap(),
        None,
        "a finished old row goes"
    );
    assert!(s.find_message(BIZ, "new").await.unwrap().is_some());
}

#[tokio::test]
async fn a_populated_mariadb_store_upgrades_in_place() {
    let db = common::TestDb::create().await;
    let pool = db.pool().await;
    previous_release!(&pool, "mysql", old_rows(MYSQL, 50));
    let store = trustmsg::store::connect(&db.database_url()).await.unwrap();
    holds_after_the_upgrade(store, 50).await;
    pool.close().await;
    db.drop_db().await;
}

#[tokio::test]
async fn a_populated_postgres_store_upgrades_in_place() {
    let db = common::PgTestDb::create().await;
    let pool = db.pool().await;
    previous_release!(&pool, "postgres", old_rows(POSTGRES, 50));
    let store = trustmsg::store::connect(&db.database_url()).await.unwrap();
    holds_after_the_upgrade(store, 50).await;
    pool.close().await;
}

/// What an instance of the previous release wrote while the upgrade ran.
#[derive(Default)]
struct Meanwhile {
    /// `live-<i>` for i below this were inserted, with an audit row each.
    inserted: usize,
    /// Of those, the ones rolled back afterwards.
    rolled_back: BTreeSet<usize>,
    /// `bulk-<i>` deleted (as its retention would).
    deleted: BTreeSet<usize>,
    /// The longest one of its statements took.
    slowest: Duration,
}

/// Writes as the previous release does, from a pool of its own, until
/// `stop`: a PREPARED message `live-<i>` and its audit row, every third
/// one rolled back right after, every fifth turn a `bulk-` message deleted.
macro_rules! write_meanwhile {
    ($pool:expr, $d:expr, $stop:expr) => {{
        let (pool, d, stop) = ($pool, $d, $stop);
        tokio::spawn(async move {
            let mut m = Meanwhile::default();
            while !stop.load(Ordering::Relaxed) {
                let i = m.inserted;
                let key = format!("live-{i}");
                let mut statements = vec![d.insert(&key, false), d.audit(&key)];
                if i % 3 == 2 {
                    statements.push(format!(
                        "UPDATE messages SET status = 'ROLLED_BACK', updated_at = {} \
                         WHERE biz_id = '{BIZ}' AND message_key = '{key}'",
                        d.now
                    ));
                    m.rolled_back.insert(i);
                }
                if i % 5 == 4 {
                    statements.push(format!(
                        "DELETE FROM messages WHERE biz_id = '{BIZ}' AND message_key = 'bulk-{}'",
                        i + 1
                    ));
                    m.deleted.insert(i + 1);
                }
                for sql in statements {
                    let started = Instant::now();
                    sqlx::raw_sql(AssertSqlSafe(sql))
                        .execute(&pool)
                        .await
                        .expect("a write of the previous release during the upgrade");
                    m.slowest = m.slowest.max(started.elapsed());
                }
                m.inserted += 1;
            }
            m
        })
    }};
}

/// Upgrades a store of [`BULK`] messages while the previous release writes
/// to it, as an operator does: `trustmsg migrate --prepare` while it serves,
/// then `trustmsg migrate`, during which it keeps serving where `serving`
/// (MySQL: it can) and is stopped before where not (PostgreSQL: its prepare
/// names a unique key the partitioned table no longer has). Then checks
/// every write is there as it was made.
async fn writes_go_on(
    store: DynStore,
    meanwhile: tokio::task::JoinHandle<Meanwhile>,
    stop: Arc<AtomicBool>,
    serving: bool,
) {
    // Some writes before the upgrade, and all through it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    store.prepare_upgrade().await.expect("migrate --prepare");
    let prepared = started.elapsed();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Stopped means stopped: a write still in flight when `migrate` begins
    // (an audit row's insert, which locks `audit_log` and then reads
    // `messages`) meets the renames in a deadlock, as it would in an
    // instance that was asked to stop and had not yet.
    let mut meanwhile = Some(meanwhile);
    let mut m = None;
    if !serving {
        stop.store(true, Ordering::Relaxed);
        m = Some(meanwhile.take().unwrap().await.unwrap());
    }
    let started = Instant::now();
    store.migrate().await.expect("the rest of the upgrade");
    let took = started.elapsed();
    if let Some(meanwhile) = meanwhile {
        tokio::time::sleep(Duration::from_millis(300)).await;
        stop.store(true, Ordering::Relaxed);
        m = Some(meanwhile.await.unwrap());
    }
    let m = m.unwrap();
    eprintln!(
        "migrate --prepare took {prepared:?}, migrate {took:?}; {} messages written \
         meanwhile, the slowest write {:?}",
        m.inserted, m.slowest
    );
    assert!(m.inserted > 10, "the writer wrote during the upgrade");
    let s = store.as_ref();
    for i in 0..m.inserted {
        let key = format!("live-{i}");
        let found = s
            .find_message(BIZ, &key)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{key}, written during the upgrade, is there"));
        let status = match m.rolled_back.contains(&i) {
            true => MessageStatus::RolledBack,
            false => MessageStatus::Prepared,
        };
        assert_eq!(found.status, status, "{key}");
        assert_eq!(
            s.audit_trail(found.id).await.unwrap().len(),
            1,
            "{key}'s audit row"
        );
        // Its key names it: the same prepare finds it.
        let Inserted::Existing(again) = s.insert_prepared(&new_message(&key, LATER)).await.unwrap()
        else {
            panic!("{key}'s key was lost in the upgrade: a second message was made");
        };
        assert_eq!(again.id, found.id);
    }
    for i in &m.deleted {
        let key = format!("bulk-{i}");
        assert_eq!(
            s.find_message(BIZ, &key).await.unwrap(),
            None,
            "{key} was deleted"
        );
        let Inserted::Created(_) = s.insert_prepared(&new_message(&key, LATER)).await.unwrap()
        else {
            panic!("{key}'s key outlived its message");
        };
    }
    let kept = s
        .find_message(BIZ, "bulk-1")
        .await
        .unwrap()
        .expect("bulk-1");
    assert_eq!(kept.status, MessageStatus::Committed);
}

/// Enough rows for the copy to take many chunks.
const BULK: usize = 20_000;

#[tokio::test]
async fn writes_go_on_while_a_mariadb_store_upgrades() {
    let db = common::TestDb::create().await;
    let pool = db.pool().await;
    previous_release!(&pool, "mysql", MYSQL.bulk(BULK));
    let stop = Arc::new(AtomicBool::new(false));
    let meanwhile = write_meanwhile!(db.pool().await, MYSQL, stop.clone());
    let store = trustmsg::store::connect(&db.database_url()).await.unwrap();
    writes_go_on(store, meanwhile, stop, true).await;
    pool.close().await;
    db.drop_db().await;
}

#[tokio::test]
async fn writes_go_on_while_a_postgres_store_upgrades() {
    let db = common::PgTestDb::create().await;
    let pool = db.pool().await;
    previous_release!(&pool, "postgres", POSTGRES.bulk(BULK));
    let stop = Arc::new(AtomicBool::new(false));
    let meanwhile = write_meanwhile!(db.pool().await, POSTGRES, stop.clone());
    let store = trustmsg::store::connect(&db.database_url()).await.unwrap();
    writes_go_on(store, meanwhile, stop, false).await;
    pool.close().await;
}

/// Each line of the schema, whitespace and names of its own aside.
fn lines(rows: Vec<String>) -> Vec<String> {
    let mut rows: Vec<String> = rows
        .into_iter()
        .map(|r| r.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    rows.sort();
    rows
}

/// What the schema of `pool`'s database is: tables, their columns, keys,
/// partitions and triggers (SHOW CREATE TABLE, less the id counter).
async fn mariadb_schema(pool: &sqlx::MySqlPool) -> Vec<String> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(TABLE_NAME AS CHAR) FROM information_schema.TABLES \
         WHERE TABLE_SCHEMA = DATABASE()",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let mut rows = Vec::new();
    for table in tables {
        let row: (String, String) =
            sqlx::query_as(AssertSqlSafe(format!("SHOW CREATE TABLE `{table}`")))
                .fetch_one(pool)
                .await
                .unwrap();
        let counter = without_counter(&row.1);
        rows.push(counter);
    }
    let triggers: Vec<(String, String, String, String, String)> = sqlx::query_as(
        "SELECT CAST(TRIGGER_NAME AS CHAR), CAST(EVENT_MANIPULATION AS CHAR), \
         CAST(EVENT_OBJECT_TABLE AS CHAR), CAST(ACTION_TIMING AS CHAR), \
         CAST(ACTION_STATEMENT AS CHAR) FROM information_schema.TRIGGERS \
         WHERE TRIGGER_SCHEMA = DATABASE()",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    rows.extend(triggers.into_iter().map(|t| format!("{t:?}")));
    lines(rows)
}

/// SHOW CREATE TABLE without its ` AUTO_INCREMENT=<n>`.
fn without_counter(create: &str) -> String {
    create
        .split_whitespace()
        .filter(|w| !w.starts_with("AUTO_INCREMENT="))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The same of a PostgreSQL database: tables and partitions with their
/// bounds, columns, indexes (less their names: a partition's are named by
/// how they came), constraints, triggers and functions.
async fn postgres_schema(pool: &sqlx::PgPool) -> Vec<String> {
    let queries = [
        "SELECT c.relname || ' ' || c.relkind::text || ' ' || COALESCE(pg_get_expr(c.relpartbound, c.oid), '') \
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')",
        "SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || \
         COALESCE(column_default, '') || ' ' || COALESCE(collation_name, '') \
         FROM information_schema.columns WHERE table_schema = current_schema()",
        "SELECT tablename || ' ' || regexp_replace(indexdef, 'INDEX \\S+ ON', 'INDEX ON') \
         FROM pg_indexes WHERE schemaname = current_schema()",
        "SELECT conrelid::regclass::text || ' ' || contype::text || ' ' || pg_get_constraintdef(oid) \
         FROM pg_constraint WHERE connamespace = current_schema()::regnamespace",
        "SELECT tgrelid::regclass::text || ' ' || tgname || ' ' || pg_get_triggerdef(oid) \
         FROM pg_trigger WHERE NOT tgisinternal",
        "SELECT proname || ' ' || prosrc FROM pg_proc WHERE pronamespace = current_schema()::regnamespace",
    ];
    let mut rows = Vec::new();
    for q in queries {
        let found: Vec<String> = sqlx::query_scalar(q).fetch_all(pool).await.unwrap();
        rows.extend(found);
    }
    lines(rows)
}

/// The schema (`$schema`) of a store of the previous release on `$Db`
/// migrated through the file (empty) and online (holding rows): returns
/// both, and the databases.
macro_rules! through_the_file_and_online {
    ($Db:ty, $backend:literal, $dialect:expr, $schema:ident) => {{
        let mut found = Vec::new();
        let mut dbs = Vec::new();
        for rows in [Vec::<String>::new(), old_rows($dialect, 5)] {
            let db = <$Db>::create().await;
            let pool = db.pool().await;
            previous_release!(&pool, $backend, rows);
            let store = trustmsg::store::connect(&db.database_url()).await.unwrap();
            store.migrate().await.unwrap();
            found.push($schema(&pool).await);
            pool.close().await;
            dbs.push(db);
        }
        (found, dbs)
    }};
}

#[tokio::test]
async fn the_online_upgrade_leaves_what_the_file_makes_on_mariadb() {
    let (schemas, dbs) =
        through_the_file_and_online!(common::TestDb, "mysql", MYSQL, mariadb_schema);
    assert_eq!(schemas[1], schemas[0]);
    for db in dbs {
        db.drop_db().await;
    }
}

#[tokio::test]
async fn the_online_upgrade_leaves_what_the_file_makes_on_postgres() {
    let (schemas, _) =
        through_the_file_and_online!(common::PgTestDb, "postgres", POSTGRES, postgres_schema);
    assert_eq!(schemas[1], schemas[0]);
}

/// Messages enough for `migrate --prepare` to take a while.
const KILLED_BULK: usize = 200_000;

/// Runs `trustmsg migrate --prepare` on `url` and kills it (SIGKILL) once
/// `begun` says its work has begun (polled every 20 ms); returns whether it
/// was killed before it ended on its own.
async fn kill_9_prepare(url: &str, mut begun: impl AsyncFnMut() -> bool) -> bool {
    let mut child = tokio::process::Command::new(common::process::binary())
        .args(["migrate", "--prepare", "--database-url", url])
        .env("RUST_LOG", "warn")
        .spawn()
        .unwrap();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "migrate --prepare failed: {status}");
            return false;
        }
        if begun().await {
            child.start_kill().unwrap();
            child.wait().await.unwrap();
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What a finished upgrade must hold: every message and key, and nothing
/// the steps leave on their way (`leftovers` counts what is left of them).
async fn upgraded_whole(store: &DynStore, leftovers: i64) {
    assert_eq!(
        leftovers, 0,
        "the online steps' tables, triggers or constraints are left"
    );
    let s = store.as_ref();
    for i in [1, KILLED_BULK / 2, KILLED_BULK] {
        let key = format!("bulk-{i}");
        let found = s
            .find_message(BIZ, &key)
            .await
            .unwrap()
            .expect("a bulk message");
        let Inserted::Existing(again) = s.insert_prepared(&new_message(&key, LATER)).await.unwrap()
        else {
            panic!("{key}'s key was lost in the upgrade");
        };
        assert_eq!(again.id, found.id);
    }
}

/// `migrate --prepare` killed (SIGKILL) on `$db` (a new database of the
/// previous release holding [`KILLED_BULK`] messages) once a quarter of
/// the keys are there, then `migrate`: everything is there, and
/// `$leftovers` (what is left of the online steps) counts nothing.
macro_rules! killed_then_migrated {
    ($db:expr, $backend:literal, $dialect:expr, $leftovers:literal) => {{
        let db = $db;
        let pool = db.pool().await;
        previous_release!(&pool, $backend, $dialect.bulk(KILLED_BULK));
        let killed = kill_9_prepare(&db.url, async || {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM message_keys")
                .fetch_one(&pool)
                .await
                .is_ok_and(|n| n > (KILLED_BULK / 4) as i64)
        })
        .await;
        assert!(killed, "migrate --prepare ended before the kill");
        let store = trustmsg::store::connect(&db.database_url()).await.unwrap();
        store.migrate().await.expect("migrate after a kill -9");
        let (count, keys): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM messages), (SELECT COUNT(*) FROM message_keys)",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!((count, keys), (KILLED_BULK as i64, KILLED_BULK as i64));
        let leftovers: i64 = sqlx::query_scalar($leftovers)
            .fetch_one(&pool)
            .await
            .unwrap();
        upgraded_whole(&store, leftovers).await;
        pool.close().await;
        db
    }};
}

#[tokio::test]
async fn a_kill_9_of_the_copy_is_finished_by_the_next_migrate_on_mariadb() {
    let db = killed_then_migrated!(
        common::TestDb::create().await,
        "mysql",
        MYSQL,
        "SELECT (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() \
           AND TABLE_NAME LIKE '%\\_0020%') \
         + (SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() \
           AND TRIGGER_NAME <> 'messages_key')"
    );
    db.drop_db().await;
}

#[tokio::test]
async fn a_kill_9_of_the_steps_is_finished_by_the_next_migrate_on_postgres() {
    killed_then_migrated!(
        common::PgTestDb::create().await,
        "postgres",
        POSTGRES,
        "SELECT (SELECT COUNT(*) FROM pg_trigger WHERE tgname = 'trustmsg_0020_keys') \
         + (SELECT COUNT(*) FROM pg_constraint WHERE conname LIKE '%\\_0020\\_range') \
         + (SELECT COUNT(*) FROM pg_proc WHERE proname = 'trustmsg_0020_keys')"
    );
}
