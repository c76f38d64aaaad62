//! The inbox on the real MariaDB/MySQL server: a message is processed once
//! per consumer group whatever the repeats, two concurrent deliveries run
//! the work once, and a failure in the work leaves nothing behind, so the
//! next delivery runs it again.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sqlx::MySqlPool;
use tokio::sync::Notify;
use trustmsg_client::inbox::{self, InboxError, Processed};
use trustmsg_tests::TestDb;

async fn setup() -> (TestDb, MySqlPool) {
    let db = TestDb::create().await;
    let pool = db.pool().await;
    inbox::create_table(&pool).await.unwrap();
    inbox::create_table(&pool)
        .await
        .expect("create_table is idempotent");
    sqlx::query("CREATE TABLE charges (message_id BIGINT UNSIGNED, amount INT) ENGINE=InnoDB")
        .execute(&pool)
        .await
        .unwrap();
    (db, pool)
}

/// The consumer's work: one charge row for the message; counts its runs.
async fn charge(
    pool: &MySqlPool,
    group: &str,
    id: u64,
    runs: &Arc<AtomicUsize>,
    hold: Duration,
    fail: bool,
) -> Result<Processed<u64>, InboxError<sqlx::Error>> {
    charge_telling(pool, group, id, runs, hold, fail, None).await
}

/// [`charge`], telling `entered` once the work runs (the inbox row is then
/// held by its transaction).
async fn charge_telling(
    pool: &MySqlPool,
    group: &str,
    id: u64,
    runs: &Arc<AtomicUsize>,
    hold: Duration,
    fail: bool,
    entered: Option<Arc<Notify>>,
) -> Result<Processed<u64>, InboxError<sqlx::Error>> {
    let runs = runs.clone();
    inbox::process_id(pool, group, id, move |conn| {
        Box::pin(async move {
            runs.fetch_add(1, Ordering::SeqCst);
            if let Some(entered) = entered {
                entered.notify_one();
            }
            sqlx::query("INSERT INTO charges (message_id, amount) VALUES (?, 42)")
                .bind(id)
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

async fn charges(pool: &MySqlPool, id: u64) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM charges WHERE message_id = ?")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn inbox_rows(pool: &MySqlPool) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM trustmsg_inbox")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_message_is_processed_once_per_group_and_repeats_are_skipped() {
    let (db, pool) = setup().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let first = charge(&pool, "billing", 7, &runs, Duration::ZERO, false).await;
    assert_eq!(first.unwrap(), Processed::Done(7));
    for _ in 0..3 {
        let again = charge(&pool, "billing", 7, &runs, Duration::ZERO, false).await;
        assert_eq!(again.unwrap(), Processed::Repeat);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the work ran once");
    assert_eq!(charges(&pool, 7).await, 1);
    // Another group processes it for itself; groups are byte-exact.
    for group in ["analytics", "billing "] {
        let other = charge(&pool, group, 7, &runs, Duration::ZERO, false).await;
        assert_eq!(other.unwrap(), Processed::Done(7), "{group:?}");
    }
    assert_eq!(inbox_rows(&pool).await, 3);
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_deliveries_run_the_work_once() {
    let (db, pool) = setup().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let entered = Arc::new(Notify::new());
    // The first holds its transaction open while the second arrives; the
    // second waits on the row lock, then finds the row committed.
    let first = {
        let (pool, runs, entered) = (pool.clone(), runs.clone(), entered.clone());
        tokio::spawn(async move {
            let hold = Duration::from_millis(500);
            charge_telling(&pool, "billing", 9, &runs, hold, false, Some(entered)).await
        })
    };
    entered.notified().await;
    let second = charge(&pool, "billing", 9, &runs, Duration::ZERO, false).await;
    let first = first.await.unwrap();
    assert_eq!(first.unwrap(), Processed::Done(9));
    assert_eq!(
        second.unwrap(),
        Processed::Repeat,
        "it waited, then found the row"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the work ran once");
    assert_eq!(charges(&pool, 9).await, 1);

    // When the first fails instead, the waiting one takes over and runs it.
    let failing = {
        let (pool, runs, entered) = (pool.clone(), runs.clone(), entered.clone());
        tokio::spawn(async move {
            let hold = Duration::from_millis(500);
            charge_telling(&pool, "billing", 10, &runs, hold, true, Some(entered)).await
        })
    };
    entered.notified().await;
    let taking_over = charge(&pool, "billing", 10, &runs, Duration::ZERO, false).await;
    assert!(matches!(failing.await.unwrap(), Err(InboxError::Work(_))));
    assert_eq!(taking_over.unwrap(), Processed::Done(10));
    assert_eq!(
        charges(&pool, 10).await,
        1,
        "only the successful run's charge"
    );
    db.drop_db().await;
}

#[tokio::test]
async fn a_failure_in_the_work_rolls_back_the_work_and_the_inbox_row() {
    let (db, pool) = setup().await;
    let runs = Arc::new(AtomicUsize::new(0));
    let failed = charge(&pool, "billing", 11, &runs, Duration::ZERO, true).await;
    assert!(matches!(failed, Err(InboxError::Work(_))), "{failed:?}");
    assert_eq!(charges(&pool, 11).await, 0, "the work's write rolled back");
    assert_eq!(inbox_rows(&pool).await, 0, "no inbox row: not processed");
    let retried = charge(&pool, "billing", 11, &runs, Duration::ZERO, false).await;
    assert_eq!(
        retried.unwrap(),
        Processed::Done(11),
        "the next delivery runs it"
    );
    assert_eq!(charges(&pool, 11).await, 1);
    let bad = charge(&pool, "", 12, &runs, Duration::ZERO, false).await;
    assert!(matches!(bad, Err(InboxError::InvalidGroup(_))), "{bad:?}");
    db.drop_db().await;
}

#[tokio::test]
async fn a_record_is_known_by_its_trustmsg_message_id_header() {
    use rdkafka::message::{Header, OwnedHeaders, OwnedMessage, Timestamp};
    let (db, pool) = setup().await;
    let record = |headers: OwnedHeaders| {
        OwnedMessage::new(
            Some(b"{}".to_vec()),
            None,
            "orders".into(),
            Timestamp::NotAvailable,
            0,
            0,
            Some(headers),
        )
    };
    let from_trustmsg = record(OwnedHeaders::new().insert(Header {
        key: "trustmsg-message-id",
        value: Some("31"),
    }));
    assert_eq!(inbox::message_id(&from_trustmsg), Some(31));
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let done = inbox::process(&pool, "billing", &from_trustmsg, move |_| {
        Box::pin(async move {
            r.fetch_add(1, Ordering::SeqCst);
            Ok::<_, sqlx::Error>(())
        })
    })
    .await;
    assert_eq!(done.unwrap(), Processed::Done(()));
    let foreign = record(OwnedHeaders::new());
    let refused = inbox::process(&pool, "billing", &foreign, |_| {
        Box::pin(async { Ok::<_, sqlx::Error>(()) })
    })
    .await;
    assert!(
        matches!(refused, Err(InboxError::NoMessageId)),
        "{refused:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    db.drop_db().await;
}
