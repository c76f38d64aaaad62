//! The barrier on the real MariaDB/MySQL server, including the race it exists
//! for: a local transaction still open when check-back arrives. Every test
//! asserts that the business state and the answer agree.

use std::time::Duration;

use sqlx::{Connection, MySqlPool};
use trustmsg_client::barrier::{self, InsertError, RunError};
use trustmsg_client::Decision;
use trustmsg_tests::TestDb;

async fn setup() -> (TestDb, MySqlPool) {
    let db = TestDb::create().await;
    let pool = db.pool().await;
    barrier::create_table(&pool).await.unwrap();
    barrier::create_table(&pool)
        .await
        .expect("create_table is idempotent");
    sqlx::query("CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY) ENGINE=InnoDB")
        .execute(&pool)
        .await
        .unwrap();
    (db, pool)
}

async fn order_exists(pool: &MySqlPool, id: &str) -> bool {
    sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM orders WHERE id = ?")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
        == 1
}

async fn place_order(pool: &MySqlPool, id: &str) -> Result<String, RunError<sqlx::Error>> {
    let id = id.to_string();
    barrier::run_in_tx(pool, "shop", &id.clone(), |conn| {
        Box::pin(async move {
            sqlx::query("INSERT INTO orders (id) VALUES (?)")
                .bind(&id)
                .execute(&mut *conn)
                .await?;
            Ok(id)
        })
    })
    .await
}

/// Waits until the check's INSERT is executing on `db` and stuck there: the
/// local transaction's uncommitted marker holds the row lock it needs.
async fn wait_until_check_is_blocked(pool: &MySqlPool, db: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        let blocked: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
             WHERE DB = ? AND ID <> CONNECTION_ID() \
             AND INFO LIKE 'INSERT INTO trustmsg_barrier%rollback%'",
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
    panic!("check never waited on the local transaction's row lock");
}

#[tokio::test]
async fn a_committed_local_transaction_is_answered_commit() {
    let (db, pool) = setup().await;
    assert_eq!(place_order(&pool, "o-1").await.unwrap(), "o-1");
    assert!(order_exists(&pool, "o-1").await);
    assert_eq!(
        barrier::check(&pool, "shop", "o-1").await.unwrap(),
        Decision::Commit
    );
    // Asking again changes nothing.
    assert_eq!(
        barrier::check(&pool, "shop", "o-1").await.unwrap(),
        Decision::Commit
    );
    db.drop_db().await;
}

#[tokio::test]
async fn a_transaction_that_never_ran_is_answered_rollback_and_can_no_longer_commit() {
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
    assert_eq!(
        barrier::check(&pool, "shop", "o-2").await.unwrap(),
        Decision::Rollback
    );
    db.drop_db().await;
}

#[tokio::test]
async fn a_failed_local_transaction_leaves_no_marker_and_is_answered_rollback() {
    let (db, pool) = setup().await;
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
    db.drop_db().await;
}

#[tokio::test]
async fn the_same_key_twice_is_already_decided_commit() {
    let (db, pool) = setup().await;
    place_order(&pool, "o-4").await.unwrap();
    let err = barrier::run_in_tx(&pool, "shop", "o-4", |_conn| {
        Box::pin(async { Ok::<_, sqlx::Error>(()) })
    })
    .await
    .unwrap_err();
    assert!(
        matches!(err, RunError::AlreadyDecided(Decision::Commit)),
        "{err:?}"
    );
    // Another producer's identical key is a different marker.
    barrier::run_in_tx(&pool, "billing", "o-4", |_conn| {
        Box::pin(async { Ok::<_, sqlx::Error>(()) })
    })
    .await
    .unwrap();
    db.drop_db().await;
}

/// Contract kit scenario S04, case a (the transaction commits).
#[tokio::test]
async fn check_waits_for_an_open_transaction_that_then_commits_and_answers_commit() {
    let (db, pool) = setup().await;
    let mut local = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    let mut tx = local.begin().await.unwrap();
    barrier::insert(&mut tx, "shop", "o-5").await.unwrap();
    sqlx::query("INSERT INTO orders (id) VALUES ('o-5')")
        .execute(&mut *tx)
        .await
        .unwrap();

    let p = pool.clone();
    let check = tokio::spawn(async move { barrier::check(&p, "shop", "o-5").await });
    wait_until_check_is_blocked(&pool, &db.name).await;
    assert!(
        !check.is_finished(),
        "check must wait for the open transaction"
    );

    tx.commit().await.unwrap();
    let answer = check.await.unwrap().unwrap();
    assert_eq!(answer, Decision::Commit);
    assert!(
        order_exists(&pool, "o-5").await,
        "answer and business state agree"
    );
    db.drop_db().await;
}

/// Contract kit scenario S04, case b (the transaction rolls back).
#[tokio::test]
async fn check_waits_for_an_open_transaction_that_then_rolls_back_and_answers_rollback() {
    let (db, pool) = setup().await;
    let mut local = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    let mut tx = local.begin().await.unwrap();
    barrier::insert(&mut tx, "shop", "o-6").await.unwrap();
    sqlx::query("INSERT INTO orders (id) VALUES ('o-6')")
        .execute(&mut *tx)
        .await
        .unwrap();

    let p = pool.clone();
    let check = tokio::spawn(async move { barrier::check(&p, "shop", "o-6").await });
    wait_until_check_is_blocked(&pool, &db.name).await;
    assert!(
        !check.is_finished(),
        "check must wait for the open transaction"
    );

    tx.rollback().await.unwrap();
    let answer = check.await.unwrap().unwrap();
    assert_eq!(answer, Decision::Rollback);
    assert!(
        !order_exists(&pool, "o-6").await,
        "answer and business state agree"
    );
    // The rollback marker now stands: a retry of the transaction cannot commit.
    assert!(matches!(
        place_order(&pool, "o-6").await,
        Err(RunError::AlreadyDecided(Decision::Rollback))
    ));
    db.drop_db().await;
}

#[tokio::test]
async fn a_transaction_that_inserts_its_marker_after_check_back_fails_on_the_key() {
    let (db, pool) = setup().await;
    let mut local = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    let mut tx = local.begin().await.unwrap();
    // Business writes first, marker last: check-back slips in between.
    sqlx::query("INSERT INTO orders (id) VALUES ('o-7')")
        .execute(&mut *tx)
        .await
        .unwrap();

    let answer = barrier::check(&pool, "shop", "o-7").await.unwrap();
    assert_eq!(answer, Decision::Rollback);

    let err = barrier::insert(&mut tx, "shop", "o-7").await.unwrap_err();
    assert!(
        matches!(err, InsertError::AlreadyDecided(Decision::Rollback)),
        "{err:?}"
    );
    // The producer's code sees the error and does not commit.
    tx.rollback().await.unwrap();
    assert!(
        !order_exists(&pool, "o-7").await,
        "answer and business state agree"
    );
    assert_eq!(
        barrier::check(&pool, "shop", "o-7").await.unwrap(),
        Decision::Rollback
    );
    db.drop_db().await;
}

#[tokio::test]
async fn purge_deletes_only_old_markers() {
    let (db, pool) = setup().await;
    place_order(&pool, "old").await.unwrap();
    place_order(&pool, "new").await.unwrap();
    sqlx::query("UPDATE trustmsg_barrier SET created_at = created_at - INTERVAL 8 DAY WHERE message_key = 'old'")
        .execute(&pool)
        .await
        .unwrap();
    let n = barrier::purge_older_than(&pool, Duration::from_secs(7 * 24 * 3600))
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(
        barrier::check(&pool, "shop", "new").await.unwrap(),
        Decision::Commit
    );
    db.drop_db().await;
}

#[tokio::test]
async fn purge_with_an_age_older_than_any_date_deletes_nothing_and_does_not_fail() {
    let (db, pool) = setup().await;
    place_order(&pool, "old").await.unwrap();
    sqlx::query("UPDATE trustmsg_barrier SET created_at = '1971-01-01' WHERE message_key = 'old'")
        .execute(&pool)
        .await
        .unwrap();
    // 300,000 years in milliseconds times 1000 is past a BIGINT.
    for age in [
        Duration::from_secs(300_000 * 365 * 24 * 3600),
        Duration::MAX,
    ] {
        let n = barrier::purge_older_than(&pool, age).await;
        assert_eq!(n.map_err(|e| e.to_string()), Ok(0), "{age:?}");
    }
    assert_eq!(
        barrier::check(&pool, "shop", "old").await.unwrap(),
        Decision::Commit
    );
    db.drop_db().await;
}

#[tokio::test]
async fn keys_that_differ_only_in_trailing_spaces_have_separate_markers() {
    let (db, pool) = setup().await;
    place_order(&pool, "A").await.unwrap();
    // No local transaction ever ran for "A " or for biz_id "shop ": a commit
    // answer would deliver a message with nothing behind it.
    assert_eq!(
        barrier::check(&pool, "shop", "A ").await.unwrap(),
        Decision::Rollback
    );
    assert_eq!(
        barrier::check(&pool, "shop ", "A").await.unwrap(),
        Decision::Rollback
    );
    assert_eq!(
        barrier::check(&pool, "shop", "A").await.unwrap(),
        Decision::Commit
    );
    db.drop_db().await;
}

#[tokio::test]
async fn create_table_upgrades_a_table_made_by_the_first_migration_and_keeps_its_markers() {
    let db = TestDb::create().await;
    let pool = db.pool().await;
    // The table as the first release created it (and as users copied it).
    sqlx::raw_sql(barrier::MIGRATION)
        .execute(&pool)
        .await
        .unwrap();
    let mut conn = pool.acquire().await.unwrap();
    barrier::insert(&mut conn, "shop", "A").await.unwrap();
    drop(conn);

    barrier::create_table(&pool).await.unwrap();
    barrier::create_table(&pool)
        .await
        .expect("create_table is idempotent");
    assert_eq!(
        barrier::check(&pool, "shop", "A").await.unwrap(),
        Decision::Commit,
        "the marker written before the upgrade is kept"
    );
    assert_eq!(
        barrier::check(&pool, "shop", "A ").await.unwrap(),
        Decision::Rollback
    );
    db.drop_db().await;
}
