//! The barrier, the inbox and the outbox on the real PostgreSQL server (a
//! database per test, `PgTestDb`), as `barrier.rs`, `inbox.rs` and
//! `outbox.rs` hold them on MariaDB: the answers of check-back always agree
//! with the business state, including while the local transaction is open
//! (both outcomes of the race), keys compare byte for byte, a repeat is
//! skipped and failing work leaves nothing, and an enqueued row is exact,
//! rolled back with its transaction, unique per key and refused when
//! trustmsg would refuse it. The PostgreSQL SQL the crate ships is the
//! contract kit's.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use sqlx::{Connection, PgConnection, PgPool};
use trustmsg_client::barrier::{self, InsertError, RunError};
use trustmsg_client::inbox::{self, InboxError, Processed};
use trustmsg_client::outbox::{self, EnqueueError};
use trustmsg_client::{Decision, Message};
use trustmsg_tests::PgTestDb;

#[test]
fn the_shipped_postgres_sql_is_the_contract_kits() {
    assert_eq!(
        barrier::POSTGRES_MIGRATION,
        include_str!("../../../conformance/sql/postgres.sql")
    );
    assert_eq!(inbox::POSTGRES_MIGRATION, barrier::POSTGRES_MIGRATION);
}

async fn setup() -> (PgTestDb, PgPool) {
    let db = PgTestDb::create().await;
    let pool = db.pool().await;
    barrier::create_table(&pool).await.unwrap();
    barrier::create_table(&pool)
        .await
        .expect("create_table is idempotent");
    sqlx::query("CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY)")
        .execute(&pool)
        .await
        .unwrap();
    (db, pool)
}

async fn order_exists(pool: &PgPool, id: &str) -> bool {
    sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM orders WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
        == 1
}

async fn place_order(pool: &PgPool, id: &str) -> Result<String, RunError<sqlx::Error>> {
    let id = id.to_string();
    barrier::run_in_tx(pool, "shop", &id.clone(), |conn| {
        Box::pin(async move {
            sqlx::query("INSERT INTO orders (id) VALUES ($1)")
                .bind(&id)
                .execute(&mut *conn)
                .await?;
            Ok(id)
        })
    })
    .await
}

/// Waits until the check's INSERT is running on `db` and waiting for a lock:
/// the local transaction's uncommitted marker holds the key it needs.
async fn wait_until_check_is_blocked(pool: &PgPool, db: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        let blocked: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = $1 \
             AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' \
             AND query LIKE 'INSERT INTO trustmsg_barrier%rollback%'",
        )
        .bind(db)
        .fetch_one(pool)
        .await
        .unwrap();
        if blocked > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("check never waited on the local transaction's marker");
}

/// A local transaction on its own connection, with its `commit` marker and
/// its order written, left open.
async fn open_local_transaction(db: &PgTestDb, key: &str) -> PgConnection {
    let mut local = PgConnection::connect(&db.url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut local).await.unwrap();
    barrier::insert(&mut local, "shop", key).await.unwrap();
    sqlx::query("INSERT INTO orders (id) VALUES ($1)")
        .bind(key)
        .execute(&mut local)
        .await
        .unwrap();
    local
}

#[tokio::test]
async fn postgres_a_committed_local_transaction_is_answered_commit() {
    let (db, pool) = setup().await;
    assert_eq!(place_order(&pool, "o-1").await.unwrap(), "o-1");
    assert!(order_exists(&pool, "o-1").await);
    for _ in 0..2 {
        assert_eq!(
            barrier::check(&pool, "shop", "o-1").await.unwrap(),
            Decision::Commit
        );
    }
    db.drop_db().await;
}

#[tokio::test]
async fn postgres_a_transaction_that_never_ran_is_answered_rollback_and_can_no_longer_commit() {
    let (db, pool) = setup().await;
    assert_eq!(
        barrier::check(&pool, "shop", "o-2").await.unwrap(),
        Decision::Rollback
    );
    let err = place_order(&pool, "o-2").await.unwrap_err();
    assert!(
        matches!(err, RunError::AlreadyDecided(Decision::Rollback)),
        "{err:?}"
    );
    assert!(!order_exists(&pool, "o-2").await);
    // A failed local transaction leaves no marker either.
    let err = barrier::run_in_tx(&pool, "shop", "o-3", |conn| {
        Box::pin(async move {
            sqlx::query("INSERT INTO orders (id) VALUES ('o-3')")
                .execute(&mut *conn)
                .await?;
            Err::<(), _>(sqlx::Error::Protocol("out of stock".into()))
        })
    })
    .await
    .unwrap_err();
    assert!(matches!(err, RunError::Local(_)), "{err:?}");
    assert!(!order_exists(&pool, "o-3").await);
    assert_eq!(
        barrier::check(&pool, "shop", "o-3").await.unwrap(),
        Decision::Rollback
    );
    // The same key twice: already decided commit; another producer's
    // identical key is another marker.
    place_order(&pool, "o-4").await.unwrap();
    assert!(matches!(
        place_order(&pool, "o-4").await,
        Err(RunError::AlreadyDecided(Decision::Commit))
    ));
    barrier::run_in_tx(&pool, "billing", "o-4", |_conn| {
        Box::pin(async { Ok::<_, sqlx::Error>(()) })
    })
    .await
    .unwrap();
    db.drop_db().await;
}

#[tokio::test]
async fn postgres_check_waits_for_an_open_transaction_that_then_commits_and_answers_commit() {
    let (db, pool) = setup().await;
    let mut local = open_local_transaction(&db, "o-5").await;
    let p = pool.clone();
    let check = tokio::spawn(async move { barrier::check(&p, "shop", "o-5").await });
    wait_until_check_is_blocked(&pool, &db.name).await;
    assert!(
        !check.is_finished(),
        "check must wait for the open transaction"
    );
    sqlx::query("COMMIT").execute(&mut local).await.unwrap();
    assert_eq!(check.await.unwrap().unwrap(), Decision::Commit);
    assert!(
        order_exists(&pool, "o-5").await,
        "answer and business state agree"
    );
    local.close().await.unwrap();
    db.drop_db().await;
}

#[tokio::test]
async fn postgres_check_waits_for_an_open_transaction_that_then_rolls_back_and_answers_rollback() {
    let (db, pool) = setup().await;
    let mut local = open_local_transaction(&db, "o-6").await;
    let p = pool.clone();
    let check = tokio::spawn(async move { barrier::check(&p, "shop", "o-6").await });
    wait_until_check_is_blocked(&pool, &db.name).await;
    assert!(
        !check.is_finished(),
        "check must wait for the open transaction"
    );
    sqlx::query("ROLLBACK").execute(&mut local).await.unwrap();
    assert_eq!(check.await.unwrap().unwrap(), Decision::Rollback);
    assert!(
        !order_exists(&pool, "o-6").await,
        "answer and business state agree"
    );
    assert!(matches!(
        place_order(&pool, "o-6").await,
        Err(RunError::AlreadyDecided(Decision::Rollback))
    ));
    local.close().await.unwrap();
    db.drop_db().await;
}

#[tokio::test]
async fn postgres_a_marker_inserted_after_check_back_is_already_decided_and_the_transaction_goes_on(
) {
    let (db, pool) = setup().await;
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("INSERT INTO orders (id) VALUES ('o-7')")
        .execute(&mut *tx)
        .await
        .unwrap();
    assert_eq!(
        barrier::check(&pool, "shop", "o-7").await.unwrap(),
        Decision::Rollback
    );
    let err = barrier::insert(&mut tx, "shop", "o-7").await.unwrap_err();
    assert!(
        matches!(err, InsertError::AlreadyDecided(Decision::Rollback)),
        "{err:?}"
    );
    // Unlike a failed statement, the refusal left the transaction usable.
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orders")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert_eq!(n, 1);
    tx.rollback().await.unwrap();
    assert!(!order_exists(&pool, "o-7").await);
    db.drop_db().await;
}

#[tokio::test]
async fn postgres_keys_that_differ_by_a_trailing_space_or_case_have_separate_markers() {
    let (db, pool) = setup().await;
    place_order(&pool, "A").await.unwrap();
    for (biz, key) in [("shop", "A "), ("shop", "a"), ("shop ", "A"), ("Shop", "A")] {
        assert_eq!(
            barrier::check(&pool, biz, key).await.unwrap(),
            Decision::Rollback,
            "{biz:?} {key:?}"
        );
    }
    assert_eq!(
        barrier::check(&pool, "shop", "A").await.unwrap(),
        Decision::Commit
    );
    db.drop_db().await;
}

#[tokio::test]
async fn postgres_purge_deletes_only_old_markers() {
    let (db, pool) = setup().await;
    place_order(&pool, "old").await.unwrap();
    place_order(&pool, "new").await.unwrap();
    sqlx::query(
        "UPDATE trustmsg_barrier SET created_at = created_at - interval '8 days' \
         WHERE message_key = 'old'",
    )
    .execute(&pool)
    .await
    .unwrap();
    let week = Duration::from_secs(7 * 24 * 3600);
    assert_eq!(barrier::purge_older_than(&pool, week).await.unwrap(), 1);
    for age in [
        Duration::from_secs(300_000 * 365 * 24 * 3600),
        Duration::MAX,
    ] {
        assert_eq!(barrier::purge_older_than(&pool, age).await.unwrap(), 0);
    }
    assert_eq!(
        barrier::check(&pool, "shop", "new").await.unwrap(),
        Decision::Commit
    );
    db.drop_db().await;
}

async fn inbox_setup() -> (PgTestDb, PgPool) {
    let db = PgTestDb::create().await;
    let pool = db.pool().await;
    inbox::create_table(&pool).await.unwrap();
    inbox::create_table(&pool)
        .await
        .expect("create_table is idempotent");
    sqlx::query("CREATE TABLE charges (message_id BIGINT, amount INT)")
        .execute(&pool)
        .await
        .unwrap();
    (db, pool)
}

async fn charge(
    pool: &PgPool,
    group: &str,
    id: u64,
    runs: &Arc<AtomicUsize>,
    hold: Duration,
    fail: bool,
) -> Result<Processed<u64>, InboxError<sqlx::Error>> {
    let runs = runs.clone();
    inbox::process_id(pool, group, id, move |conn| {
        Box::pin(async move {
            runs.fetch_add(1, Ordering::SeqCst);
            sqlx::query("INSERT INTO charges (message_id, amount) VALUES ($1, 42)")
                .bind(id as i64)
                .execute(&mut *conn)
                .await?;
            tokio::time::sleep(hold).await;
            if fail {
                return Err(sqlx::Error::Protocol("the consumer's work failed".into()));
            }
            Ok(id)
        })
    })
    .await
}

async fn count(pool: &PgPool, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

#[tokio::test]
async fn postgres_inbox_processes_a_message_once_per_group_and_skips_repeats() {
    let (db, pool) = inbox_setup().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let first = charge(&pool, "billing", 7, &runs, Duration::ZERO, false).await;
    assert_eq!(first.unwrap(), Processed::Done(7));
    for _ in 0..3 {
        let again = charge(&pool, "billing", 7, &runs, Duration::ZERO, false).await;
        assert_eq!(again.unwrap(), Processed::Repeat);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the work ran once");
    for group in ["analytics", "billing ", "Billing"] {
        let other = charge(&pool, group, 7, &runs, Duration::ZERO, false).await;
        assert_eq!(other.unwrap(), Processed::Done(7), "{group:?}");
    }
    // A trustmsg-message-id is a u64 (the kit's column NUMERIC(20, 0)).
    let top = charge(&pool, "billing", u64::MAX, &runs, Duration::ZERO, false).await;
    assert_eq!(top.unwrap(), Processed::Done(u64::MAX));
    let again = charge(&pool, "billing", u64::MAX, &runs, Duration::ZERO, false).await;
    assert_eq!(again.unwrap(), Processed::Repeat);
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM charges").await, 5);
    assert_eq!(
        count(
            &pool,
            "SELECT COUNT(*) FROM trustmsg_inbox WHERE message_id = 18446744073709551615"
        )
        .await,
        1
    );
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM trustmsg_inbox").await, 5);
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_inbox_runs_two_concurrent_deliveries_once_and_failing_work_leaves_nothing() {
    let (db, pool) = inbox_setup().await;
    let runs = Arc::new(AtomicUsize::new(0));
    // Failing work: nothing kept, the next delivery runs it.
    let err = charge(&pool, "billing", 3, &runs, Duration::ZERO, true)
        .await
        .unwrap_err();
    assert!(matches!(err, InboxError::Work(_)), "{err}");
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM charges").await, 0);
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM trustmsg_inbox").await, 0);
    let again = charge(&pool, "billing", 3, &runs, Duration::ZERO, false).await;
    assert_eq!(again.unwrap(), Processed::Done(3));

    // Two at once: the second waits on the first's key, then skips.
    let runs = Arc::new(AtomicUsize::new(0));
    let first = {
        let (pool, runs) = (pool.clone(), runs.clone());
        tokio::spawn(async move {
            charge(
                &pool,
                "billing",
                9,
                &runs,
                Duration::from_millis(500),
                false,
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    let second = charge(&pool, "billing", 9, &runs, Duration::ZERO, false).await;
    let mut outcomes = [first.await.unwrap().unwrap(), second.unwrap()];
    outcomes.sort_by_key(|o| *o == Processed::Repeat);
    assert_eq!(outcomes, [Processed::Done(9), Processed::Repeat]);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the work ran once");
    db.drop_db().await;
}

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

async fn outbox_setup() -> (PgTestDb, PgPool) {
    let db = PgTestDb::create().await;
    let pool = db.pool().await;
    outbox::create_table(&pool).await.unwrap();
    outbox::create_table(&pool)
        .await
        .expect("create_table is idempotent");
    sqlx::query("CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY)")
        .execute(&pool)
        .await
        .unwrap();
    (db, pool)
}

/// A row as stored: message_key, topic, record_key, payload, headers,
/// content_type, deliver_at, traceparent, status, retry_count.
type Stored = (
    String,
    String,
    Option<String>,
    Vec<u8>,
    Option<String>,
    Option<String>,
    Option<DateTime<Utc>>,
    Option<String>,
    i16,
    i32,
);

async fn stored(pool: &PgPool, key: &str) -> Option<Stored> {
    sqlx::query_as(
        "SELECT message_key, topic, record_key, payload, headers::text, content_type, \
         deliver_at, traceparent, status, retry_count FROM trustmsg_outbox WHERE message_key = $1",
    )
    .bind(key)
    .fetch_optional(pool)
    .await
    .unwrap()
}

async fn place(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    id: &str,
    message: &Message,
) -> Result<u64, EnqueueError> {
    sqlx::query("INSERT INTO orders (id) VALUES ($1)")
        .bind(id)
        .execute(&mut **tx)
        .await
        .unwrap();
    outbox::enqueue(tx, message).await
}

#[tokio::test]
async fn postgres_a_row_enqueued_in_a_committed_transaction_holds_the_message_exactly() {
    let (db, pool) = outbox_setup().await;
    let at = Utc
        .timestamp_millis_opt(Utc::now().timestamp_millis() + 3 * 86_400_000)
        .unwrap();
    let message = Message::from_bytes("order-1", "orders", &[0, 159, 146, 150, 255])
        .key("customer-7")
        .header("content-type", "application/octet-stream")
        .header("source", "shop")
        .deliver_at(at)
        .trace_context(TRACEPARENT, Some("shop=1"));
    let mut tx = pool.begin().await.unwrap();
    let id = place(&mut tx, "1", &message).await.unwrap();
    assert_eq!(
        count(&pool, "SELECT COUNT(*) FROM trustmsg_outbox").await,
        0,
        "invisible until the commit"
    );
    tx.commit().await.unwrap();
    let row = stored(&pool, "order-1").await.expect("the row");
    let headers: serde_json::Value = serde_json::from_str(row.4.as_deref().unwrap()).unwrap();
    assert_eq!(
        headers,
        serde_json::json!({"content-type": "application/octet-stream", "source": "shop"})
    );
    assert_eq!(
        (row.0, row.1, row.2, row.3, row.5, row.6, row.7, row.8, row.9),
        (
            "order-1".to_string(),
            "orders".to_string(),
            Some("customer-7".to_string()),
            vec![0, 159, 146, 150, 255],
            None,
            Some(at),
            Some(TRACEPARENT.to_string()),
            0,
            0,
        )
    );
    let row_id: i64 = sqlx::query_scalar("SELECT id FROM trustmsg_outbox WHERE message_key = $1")
        .bind("order-1")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(id, row_id as u64, "enqueue returns the row's id");

    // A delay counted by the database's clock; the least a row needs.
    let mut tx = pool.begin().await.unwrap();
    place(
        &mut tx,
        "2",
        &Message::new("order-2", "orders", "{}").deliver_after(Duration::from_millis(3_600_250)),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let ahead_ms: i64 = sqlx::query_scalar(
        "SELECT (EXTRACT(EPOCH FROM deliver_at - now()) * 1000)::bigint FROM trustmsg_outbox \
         WHERE message_key = 'order-2'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(
        (3_600_250 - 10_000..=3_600_250).contains(&ahead_ms),
        "deliver_at is {ahead_ms} ms ahead"
    );
    let (_, _, record_key, payload, headers, _, _, traceparent, status, _) =
        stored(&pool, "order-2").await.unwrap();
    assert_eq!(
        (record_key, payload, headers, traceparent, status),
        (None, b"{}".to_vec(), None, None, 0)
    );
    db.drop_db().await;
}

#[tokio::test]
async fn postgres_a_rolled_back_transaction_leaves_no_row() {
    let (db, pool) = outbox_setup().await;
    let mut tx = pool.begin().await.unwrap();
    place(&mut tx, "1", &Message::new("order-1", "orders", "{}"))
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    let mut tx = pool.begin().await.unwrap();
    place(&mut tx, "2", &Message::new("order-2", "orders", "{}"))
        .await
        .unwrap();
    drop(tx);
    assert_eq!(
        count(&pool, "SELECT COUNT(*) FROM trustmsg_outbox").await,
        0
    );
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM orders").await, 0);
    db.drop_db().await;
}

#[tokio::test]
async fn postgres_a_duplicate_key_is_a_clear_error_and_leaves_the_transaction_usable() {
    let (db, pool) = outbox_setup().await;
    let mut tx = pool.begin().await.unwrap();
    place(&mut tx, "1", &Message::new("order-1", "orders", "first"))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let mut tx = pool.begin().await.unwrap();
    let err = place(
        &mut tx,
        "1-again",
        &Message::new("order-1", "orders", "second"),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, EnqueueError::Duplicate { message_key, .. } if message_key == "order-1"),
        "{err:?}"
    );
    // PostgreSQL would abort the transaction on a failed statement; the
    // savepoint keeps it going: the business write commits without the row.
    outbox::enqueue(&mut tx, &Message::new("order-1b", "orders", "third"))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(count(&pool, "SELECT COUNT(*) FROM orders").await, 2);
    let (_, _, _, payload, ..) = stored(&pool, "order-1").await.unwrap();
    assert_eq!(payload, b"first", "the first row is untouched");

    // A key held by an open transaction: the INSERT waits, then is a
    // duplicate once that commits. Through a pool and a connection too.
    let mut first = pool.begin().await.unwrap();
    outbox::enqueue(&mut first, &Message::new("order-9", "orders", "x"))
        .await
        .unwrap();
    let second = tokio::spawn({
        let pool = pool.clone();
        async move { outbox::enqueue(&pool, &Message::new("order-9", "orders", "y")).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!second.is_finished(), "the second INSERT waits on the key");
    first.commit().await.unwrap();
    let err = second.await.unwrap().unwrap_err();
    assert!(matches!(err, EnqueueError::Duplicate { .. }), "{err:?}");
    let mut conn = pool.acquire().await.unwrap();
    let err = outbox::enqueue(&mut conn, &Message::new("order-9", "orders", "z"))
        .await
        .unwrap_err();
    assert!(matches!(err, EnqueueError::Duplicate { .. }), "{err:?}");
    db.drop_db().await;
}

#[tokio::test]
async fn postgres_what_trustmsg_would_refuse_is_refused_before_anything_is_written() {
    let (db, pool) = outbox_setup().await;
    let mut tx = pool.begin().await.unwrap();
    for (message, expected) in [
        (Message::new("order-1", "orders/eu", "{}"), "invalid_topic"),
        (
            Message::new("order-1", "orders", "{}").header("trustmsg-message-id", "7"),
            "invalid_headers",
        ),
        (Message::new("", "orders", "{}"), "invalid_message_key"),
    ] {
        match outbox::enqueue(&mut tx, &message).await {
            Err(EnqueueError::Invalid { code, .. }) => assert_eq!(code, expected),
            other => panic!("{message:?} not refused as {expected}: {other:?}"),
        }
    }
    outbox::enqueue(&mut tx, &Message::new("order-1", "orders", "{}"))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        count(&pool, "SELECT COUNT(*) FROM trustmsg_outbox").await,
        1
    );
    db.drop_db().await;
}

/// Eight instances of a service starting at once on an empty database each
/// create the barrier, inbox and outbox tables: every one succeeds (two
/// `CREATE TABLE IF NOT EXISTS` of one table at once can fail on
/// PostgreSQL's catalog, 23505 on `pg_type`; the crate takes an advisory
/// lock around them), and the tables are there once.
#[tokio::test]
async fn eight_instances_create_the_tables_at_once_on_an_empty_database() {
    let db = PgTestDb::create().await;
    let mut instances = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let pool = db.pool().await;
        instances.spawn(async move {
            barrier::create_table(&pool).await?;
            inbox::create_table(&pool).await?;
            match outbox::create_table(&pool).await {
                Err(EnqueueError::Database(e)) => Err(e),
                Err(other) => panic!("the outbox table's SQL: {other}"),
                Ok(()) => Ok(()),
            }
        });
    }
    while let Some(made) = instances.join_next().await {
        made.unwrap().expect("every instance creates the tables");
    }
    let pool = db.pool().await;
    let tables: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema() \
         AND tablename IN ('trustmsg_barrier', 'trustmsg_inbox', 'trustmsg_outbox')",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(tables, 3);
}
