//! The transaction helpers against the real service (and, for the barrier
//! variant, the real database).

use sqlx::MySqlPool;
use trustmsg_client::barrier;
use trustmsg_client::{transaction, Decision, Error, Message, MessageStatus, Producer, TxOutcome};
use trustmsg_tests::{fast_retry, TestApp, UNREACHABLE_VERIFY_URL};

fn msg(key: &str) -> Message {
    Message::new(key, "orders", "{}")
}

#[tokio::test]
async fn a_successful_local_transaction_commits_the_message() {
    let svc = TestApp::spawn(&[]).await;
    let p = svc.producer("shop").await;
    let outcome = transaction(&p, msg("t-1"), |view| async move {
        assert_eq!(
            view.status,
            MessageStatus::Prepared,
            "prepared before the local work"
        );
        Ok::<_, String>(42)
    })
    .await
    .unwrap();
    match outcome {
        TxOutcome::Committed { value, message } => {
            assert_eq!(value, 42);
            assert_eq!(message.status, MessageStatus::Committed);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(p.get("t-1").await.unwrap().status, MessageStatus::Committed);
    svc.finish().await;
}

#[tokio::test]
async fn a_failed_local_transaction_rolls_the_message_back() {
    let svc = TestApp::spawn(&[]).await;
    let p = svc.producer("shop").await;
    let outcome = transaction(&p, msg("t-2"), |_| async { Err::<(), _>("out of stock") })
        .await
        .unwrap();
    assert!(
        matches!(
            outcome,
            TxOutcome::RolledBack {
                error: "out of stock"
            }
        ),
        "{outcome:?}"
    );
    assert_eq!(
        p.get("t-2").await.unwrap().status,
        MessageStatus::RolledBack
    );
    svc.finish().await;
}

#[tokio::test]
async fn a_failed_prepare_is_an_error_and_the_local_transaction_never_runs() {
    let svc = TestApp::spawn(&[]).await;
    let p = svc.producer("shop").await;
    let mut ran = false;
    let err = transaction(&p, Message::new("t-3", "bad topic!", "{}"), |_| {
        ran = true;
        async { Ok::<_, String>(()) }
    })
    .await
    .unwrap_err();
    assert!(matches!(err, Error::Invalid { status: 400, .. }), "{err:?}");
    assert!(!ran);
    svc.finish().await;
}

#[tokio::test]
async fn a_commit_that_cannot_be_delivered_is_left_to_check_back_and_the_message_stays_prepared() {
    let svc = TestApp::spawn(&[]).await;
    let token = svc.register("shop", UNREACHABLE_VERIFY_URL).await;
    let p = Producer::new(&svc.base_url(), "shop", token.clone())
        .unwrap()
        .with_retry(fast_retry(3));
    let TestApp { db, app, .. } = svc;

    // trustmsg goes away during the local transaction.
    let outcome = transaction(&p, msg("t-4"), |_| async move {
        app.stop().await.unwrap();
        Ok::<_, String>("order written")
    })
    .await
    .unwrap();
    assert!(
        outcome.left_to_check_back() && outcome.local_committed(),
        "{outcome:?}"
    );
    match outcome {
        TxOutcome::CommitLeftToCheckBack { value, error } => {
            assert_eq!(value, "order written");
            assert!(
                matches!(error, Error::Unavailable { attempts: 4, .. }),
                "{error:?}"
            );
        }
        other => panic!("{other:?}"),
    }

    // Back up: the message waits, PREPARED, for check-back.
    let svc = TestApp::spawn_on(db, &[]).await;
    let p = Producer::new(&svc.base_url(), "shop", token)
        .unwrap()
        .with_retry(fast_retry(3));
    assert_eq!(p.get("t-4").await.unwrap().status, MessageStatus::Prepared);
    svc.finish().await;
}

async fn orders_table(pool: &MySqlPool) {
    barrier::create_table(pool).await.unwrap();
    sqlx::query("CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY) ENGINE=InnoDB")
        .execute(pool)
        .await
        .unwrap();
}

async fn order_count(pool: &MySqlPool) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM orders")
        .fetch_one(pool)
        .await
        .unwrap()
}

fn write_order(
    id: &'static str,
) -> impl for<'c> FnOnce(
    &'c mut sqlx::MySqlConnection,
) -> barrier::BoxFuture<'c, Result<&'static str, sqlx::Error>> {
    move |conn| {
        Box::pin(async move {
            sqlx::query("INSERT INTO orders (id) VALUES (?)")
                .bind(id)
                .execute(&mut *conn)
                .await?;
            Ok(id)
        })
    }
}

#[tokio::test]
async fn the_barrier_transaction_writes_order_and_marker_and_commits_the_message() {
    let svc = TestApp::spawn(&[]).await;
    let pool = svc.db.pool().await;
    orders_table(&pool).await;
    let p = svc.producer("shop").await;

    let outcome = barrier::transaction(&p, &pool, msg("b-1"), write_order("b-1"))
        .await
        .unwrap();
    assert!(
        matches!(outcome, TxOutcome::Committed { value: "b-1", .. }),
        "{outcome:?}"
    );
    assert_eq!(order_count(&pool).await, 1);
    assert_eq!(
        barrier::check(&pool, "shop", "b-1").await.unwrap(),
        Decision::Commit
    );
    assert_eq!(p.get("b-1").await.unwrap().status, MessageStatus::Committed);
    svc.finish().await;
}

#[tokio::test]
async fn the_barrier_transaction_after_a_rollback_answer_rolls_the_message_back() {
    let svc = TestApp::spawn(&[]).await;
    let pool = svc.db.pool().await;
    orders_table(&pool).await;
    let p = svc.producer("shop").await;

    // Check-back got there first (e.g. the producer stalled after prepare).
    assert_eq!(
        barrier::check(&pool, "shop", "b-2").await.unwrap(),
        Decision::Rollback
    );
    let err = barrier::transaction(&p, &pool, msg("b-2"), write_order("b-2"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::AlreadyRolledBack { message_key } if message_key == "b-2"),
        "{err:?}"
    );
    assert_eq!(order_count(&pool).await, 0);
    assert_eq!(
        p.get("b-2").await.unwrap().status,
        MessageStatus::RolledBack
    );
    svc.finish().await;
}

#[tokio::test]
async fn a_repeated_barrier_transaction_sends_the_commit_for_an_already_committed_key() {
    let svc = TestApp::spawn(&[]).await;
    let pool = svc.db.pool().await;
    orders_table(&pool).await;
    let p = svc.producer("shop").await;

    // The local transaction committed, then the process died before commit.
    let prepared = p.prepare(&msg("b-3")).await.unwrap();
    barrier::run_in_tx(&pool, "shop", "b-3", write_order("b-3"))
        .await
        .unwrap();

    let err = barrier::transaction(&p, &pool, msg("b-3"), write_order("b-3"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::AlreadyCommitted { message_id: Some(id), .. } if *id == prepared.id),
        "{err:?}"
    );
    assert_eq!(order_count(&pool).await, 1, "the work did not run again");
    assert_eq!(
        p.get("b-3").await.unwrap().status,
        MessageStatus::Committed,
        "committed by the helper at once, not left to check-back"
    );
    assert_eq!(
        barrier::check(&pool, "shop", "b-3").await.unwrap(),
        Decision::Commit
    );
    svc.finish().await;
}
