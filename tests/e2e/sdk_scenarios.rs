//! The contract kit's scenarios S01, S02, S07 and S11 to S14 for the Rust SDK
//! (client-sdk/conformance/scenarios.json), against the real binary, the
//! real MariaDB and the Kafka mock: what every other SDK's kit tests show
//! for their language. The other scenarios are shown by the tests that
//! name them (`kit coverage` lists them).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use sqlx::MySqlPool;
use trustmsg_client::barrier::{self, BoxFuture, RunError};
use trustmsg_client::inbox::{self, Processed};
use trustmsg_client::{transaction, Error, Message, MessageView, Producer, TxOptions, TxOutcome};
use trustmsg_tests::check_server::CheckServer;
use trustmsg_tests::kafka::{records_in, MockKafka};
use trustmsg_tests::{eventually, PgTestDb, ServiceProcess, TestDb, UNREACHABLE_VERIFY_URL};

use crate::harness::{settings, shop_database, statuses};

const TOPIC: &str = "e2e-sdk-scenarios";

/// The order-writing work of the scenarios, per dialect (`$insert` holds
/// its placeholder): `$order(id, fail)` inserts the order, then fails when
/// asked; `$slow_failing(id)` inserts it, holds its marker for 300 ms, then
/// fails (a transient failure).
macro_rules! order_work {
    ($order:ident, $slow_failing:ident, $conn:ty, $insert:literal) => {
        fn $order(
            id: &'static str,
            fail: bool,
        ) -> impl for<'c> FnOnce(&'c mut $conn) -> BoxFuture<'c, Result<&'static str, String>> {
            move |conn| {
                Box::pin(async move {
                    sqlx::query($insert)
                        .bind(id)
                        .execute(&mut *conn)
                        .await
                        .map_err(|e| e.to_string())?;
                    if fail {
                        return Err(format!("order {id}: out of stock"));
                    }
                    Ok(id)
                })
            }
        }

        fn $slow_failing(
            id: &'static str,
        ) -> impl for<'c> FnOnce(&'c mut $conn) -> BoxFuture<'c, Result<&'static str, String>> {
            move |conn| {
                Box::pin(async move {
                    $order(id, false)(conn).await?;
                    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                    Err(format!("order {id}: payment timed out"))
                })
            }
        }
    };
}

order_work!(
    order,
    slow_failing_order,
    sqlx::MySqlConnection,
    "INSERT INTO orders (id) VALUES (?)"
);
order_work!(
    pg_order,
    pg_slow_failing_order,
    sqlx::PgConnection,
    "INSERT INTO orders (id) VALUES ($1)"
);

/// The consumer's work: a charge row, then success or a failure.
fn charge(
    fail: bool,
) -> impl for<'c> FnOnce(&'c mut sqlx::MySqlConnection) -> BoxFuture<'c, Result<(), String>> {
    move |conn| {
        Box::pin(async move {
            sqlx::query("INSERT INTO orders (id) VALUES (CONCAT('charge-', UUID()))")
                .execute(&mut *conn)
                .await
                .map_err(|e| e.to_string())?;
            if fail {
                return Err("card declined".into());
            }
            Ok(())
        })
    }
}

async fn count(pool: &MySqlPool, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string()))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// S01: a message committed through the barrier's transaction helper
/// reaches Kafka byte for byte (key, binary payload, headers, message id);
/// S02: one whose local transaction fails surfaces the work's own error,
/// leaves no business row and no marker, is ROLLED_BACK and never reaches
/// Kafka; S07: the delivered record, processed through the inbox twice,
/// runs its work once, and failing work leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s01_s02_s07_committed_reaches_kafka_exactly_failed_never_and_the_inbox_runs_work_once() {
    let db = TestDb::create().await;
    let (shop_db, shop) = shop_database().await;
    barrier::create_table(&shop).await.unwrap();
    inbox::create_table(&shop).await.unwrap();
    let kafka = MockKafka::start(1);
    kafka.create_topic(TOPIC, 3);
    let service = ServiceProcess::start(&db, kafka.bootstrap(), &[]).await;
    let (token, _) = service
        .register("shop", settings(UNREACHABLE_VERIFY_URL, 600_000, 3))
        .await;
    let producer = Producer::new(&service.url(), "shop", token).unwrap();

    let payload: Vec<u8> = (0..=255).collect();
    let committed = Message::from_bytes("order-1", TOPIC, &payload)
        .key("customer-7")
        .header("content-type", "application/octet-stream")
        .header("source", "orders");
    let outcome = barrier::transaction(&producer, &shop, committed, order("order-1", false))
        .await
        .unwrap();
    let TxOutcome::Committed { value, .. } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(value, "order-1");

    let failed = Message::new("order-2", TOPIC, "never");
    let outcome = barrier::transaction(&producer, &shop, failed, order("order-2", true))
        .await
        .unwrap();
    match outcome {
        TxOutcome::RolledBack {
            error: RunError::Local(e),
        } => assert_eq!(e, "order order-2: out of stock"),
        other => panic!("the work's own error, not {other:?}"),
    }
    assert_eq!(
        count(&shop, "SELECT COUNT(*) FROM orders WHERE id = 'order-2'").await,
        0
    );
    assert_eq!(
        count(
            &shop,
            "SELECT COUNT(*) FROM trustmsg_barrier WHERE op = 'commit' AND message_key = 'order-2'"
        )
        .await,
        0
    );

    let pool = db.pool().await;
    eventually(30, "order-1 sent", async || {
        statuses(&pool, "shop")
            .await
            .get("order-1")
            .is_some_and(|(_, _, send)| send.as_deref() == Some("SENT"))
    })
    .await;
    let st = statuses(&pool, "shop").await;
    assert_eq!(st["order-2"].1, "ROLLED_BACK");

    let records = records_in(kafka.bootstrap(), TOPIC).await;
    assert_eq!(records.len(), 1, "only order-1 reaches Kafka: {records:?}");
    let record = &records[0];
    assert_eq!(record.key.as_deref(), Some(&b"customer-7"[..]));
    assert_eq!(record.value.as_deref(), Some(&payload[..]));
    assert_eq!(
        record.header("content-type").as_deref(),
        Some("application/octet-stream")
    );
    assert_eq!(record.header("source").as_deref(), Some("orders"));
    let id: u64 = record
        .header("trustmsg-message-id")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(id, st["order-1"].0);

    // The consumer's side, in the same database: the work is an order row.
    let first = inbox::process_id(&shop, "billing", id, charge(false))
        .await
        .unwrap();
    assert!(matches!(first, Processed::Done(())));
    let again = inbox::process_id(&shop, "billing", id, charge(false))
        .await
        .unwrap();
    assert!(matches!(again, Processed::Repeat));
    let other = id + 1_000_000;
    assert!(inbox::process_id(&shop, "billing", other, charge(true))
        .await
        .is_err());
    assert_eq!(
        count(
            &shop,
            "SELECT COUNT(*) FROM orders WHERE id LIKE 'charge-%'"
        )
        .await,
        1
    );
    assert_eq!(count(&shop, "SELECT COUNT(*) FROM trustmsg_inbox").await, 1);

    shop_db.drop_db().await;
    db.drop_db().await;
}

/// The retried requests of issue 58, S11 to S14, on the producer database
/// `$shop` (a pool of either kind) with `$order` (its order-writing work):
/// S11 a retry of an order whose message was rolled back is refused before
/// any local work; S12 a retry that finds its local commit (an earlier run
/// stopped at the crash point) sends the commit at once, with no
/// check-back call; S13 two identical requests at once make one local
/// commit and one message; S14 a prepare answered COMMITTED runs no work.
macro_rules! retried_orders {
    ($shop:expr, $order:ident, $slow_failing:ident, $count:ident, $marker_sql:expr) => {{
        let shop = $shop;
        let db = TestDb::create().await;
        let kafka = MockKafka::start(1);
        kafka.create_topic(TOPIC, 3);
        let service = ServiceProcess::start(&db, kafka.bootstrap(), &[]).await;
        let check = CheckServer::start().await;
        let (token, secret) = service
            .register("shop", settings(&check.url(), 60_000, 3))
            .await;
        check.set_secret(&secret);
        let producer = Producer::new(&service.url(), "shop", token).unwrap();
        let pool = db.pool().await;
        let never = || {
            let ran = Arc::new(AtomicBool::new(false));
            let flag = ran.clone();
            (ran, move |_: MessageView| {
                flag.store(true, Ordering::SeqCst);
                async { Ok::<_, String>(()) }
            })
        };

        // S11: the business step fails, the helper rolls back; the client
        // retries (it never heard the answer) and the step would pass now.
        let outcome = barrier::transaction(&producer, &shop, Message::new("s11", TOPIC, "s11"), $order("s11", true))
            .await
            .unwrap();
        assert!(matches!(outcome, TxOutcome::RolledBack { error: RunError::Local(_) }), "{outcome:?}");
        let err = barrier::transaction(&producer, &shop, Message::new("s11", TOPIC, "s11"), $order("s11", false))
            .await
            .unwrap_err();
        assert!(matches!(&err, Error::AlreadyRolledBack { message_key } if message_key == "s11"), "{err:?}");
        let (ran, work) = never();
        let err = transaction(&producer, Message::new("s11", TOPIC, "s11"), work).await.unwrap_err();
        assert!(matches!(err, Error::AlreadyRolledBack { .. }), "{err:?}");
        assert!(!ran.load(Ordering::SeqCst), "the plain helper ran no work either");
        assert_eq!($count(&shop, "SELECT COUNT(*) FROM orders WHERE id = 's11'").await, 0);
        assert_eq!($count(&shop, &format!("{} = 's11'", $marker_sql)).await, 0, "no commit marker");
        assert_eq!(statuses(&pool, "shop").await["s11"].1, "ROLLED_BACK");

        // S12: stopped at the crash point, then retried.
        let crash = TxOptions::new().after_local_commit(|key| Err(format!("crash after {key}")));
        let err = barrier::transaction_with(&producer, &shop, Message::new("s12", TOPIC, "s12"), &crash, $order("s12", false))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::StoppedAfterLocalCommit { .. }), "{err:?}");
        assert_eq!(statuses(&pool, "shop").await["s12"].1, "PREPARED");
        let err = barrier::transaction(&producer, &shop, Message::new("s12", TOPIC, "s12"), $order("s12", false))
            .await
            .unwrap_err();
        let id = statuses(&pool, "shop").await["s12"].0;
        assert!(matches!(err, Error::AlreadyCommitted { message_id: Some(m), .. } if m == id), "{err:?}");
        assert_eq!(statuses(&pool, "shop").await["s12"].1, "COMMITTED", "committed when the call returns");
        assert_eq!($count(&shop, "SELECT COUNT(*) FROM orders WHERE id = 's12'").await, 1);

        // S13: the same request twice at the same moment.
        let (a, b) = tokio::join!(
            barrier::transaction(&producer, &shop, Message::new("s13", TOPIC, "s13"), $order("s13", false)),
            barrier::transaction(&producer, &shop, Message::new("s13", TOPIC, "s13"), $order("s13", false)),
        );
        let placed = [&a, &b].iter().filter(|r| matches!(r, Ok(TxOutcome::Committed { .. }))).count();
        let before = [&a, &b].iter().filter(|r| matches!(r, Err(Error::AlreadyCommitted { .. }))).count();
        assert_eq!((placed, before), (1, 1), "{a:?} {b:?}");
        assert_eq!($count(&shop, "SELECT COUNT(*) FROM orders WHERE id = 's13'").await, 1);

        // S13 with one of the two failing (a transient failure): the
        // other, waiting on the first one's marker, must not commit locally
        // after the rollback; whichever reaches the barrier first decides.
        let failing = barrier::transaction(&producer, &shop, Message::new("s13f", TOPIC, "s13f"), $slow_failing("s13f"));
        let passing = async {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            barrier::transaction(&producer, &shop, Message::new("s13f", TOPIC, "s13f"), $order("s13f", false)).await
        };
        let (failed, other) = tokio::join!(failing, passing);
        let rows = $count(&shop, "SELECT COUNT(*) FROM orders WHERE id = 's13f'").await;
        let status = statuses(&pool, "shop").await["s13f"].1.clone();
        match (&failed, &other) {
            (Ok(TxOutcome::RolledBack { .. }), Err(Error::AlreadyRolledBack { .. })) => {
                assert_eq!((rows, status.as_str()), (0, "ROLLED_BACK"));
            }
            (Err(Error::AlreadyCommitted { .. }), Ok(TxOutcome::Committed { .. })) => {
                assert_eq!((rows, status.as_str()), (1, "COMMITTED"));
            }
            _ => panic!("one failing, one passing: {failed:?} / {other:?} ({rows} rows, {status})"),
        }

        // S14: a committed order's request again.
        let (ran, work) = never();
        let err = transaction(&producer, Message::new("s13", TOPIC, "s13"), work).await.unwrap_err();
        assert!(matches!(err, Error::AlreadyCommitted { message_id: Some(_), .. }), "{err:?}");
        assert!(!ran.load(Ordering::SeqCst), "the work was never entered");
        let entered = Arc::new(AtomicBool::new(false));
        let flag = entered.clone();
        let err = barrier::transaction(&producer, &shop, Message::new("s13", TOPIC, "s13"), move |conn| {
            flag.store(true, Ordering::SeqCst);
            $order("s13", false)(conn)
        })
        .await
        .unwrap_err();
        assert!(matches!(err, Error::AlreadyCommitted { .. }), "{err:?}");
        assert!(!entered.load(Ordering::SeqCst), "the barrier's work was never entered");

        eventually(30, "s12 and s13 sent", async || {
            let st = statuses(&pool, "shop").await;
            ["s12", "s13"].iter().all(|k| st[*k].2.as_deref() == Some("SENT"))
        })
        .await;
        let records = records_in(kafka.bootstrap(), TOPIC).await;
        let mut ids: Vec<(String, String)> = records
            .iter()
            .map(|r| (String::from_utf8_lossy(r.value.as_deref().unwrap()).into_owned(), r.header("trustmsg-message-id").unwrap()))
            .collect();
        ids.sort();
        ids.dedup();
        let keys: Vec<&str> = ids.iter().map(|(k, _)| k.as_str()).collect();
        let keys: Vec<&str> = keys.into_iter().filter(|k| *k != "s13f").collect();
        assert_eq!(keys, ["s12", "s13"], "one message id each, none for s11: {ids:?}");
        assert_eq!(check.total(), 0, "no check-back was needed");
        db.drop_db().await;
    }};
}

async fn pg_count(pool: &sqlx::PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string()))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// S11, S12, S13 and S14 with the producer's database on MariaDB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_s12_s13_s14_retried_orders_run_no_work_for_a_decided_message_mysql() {
    let (shop_db, shop) = shop_database().await;
    barrier::create_table(&shop).await.unwrap();
    retried_orders!(
        shop,
        order,
        slow_failing_order,
        count,
        "SELECT COUNT(*) FROM trustmsg_barrier WHERE op = 'commit' AND message_key"
    );
    shop_db.drop_db().await;
}

/// S11, S12, S13 and S14 with the producer's database on PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_s12_s13_s14_retried_orders_run_no_work_for_a_decided_message_postgres() {
    let shop_db = PgTestDb::create().await;
    let shop = shop_db.pool().await;
    barrier::create_table(&shop).await.unwrap();
    sqlx::query("CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY)")
        .execute(&shop)
        .await
        .unwrap();
    retried_orders!(
        shop,
        pg_order,
        pg_slow_failing_order,
        pg_count,
        "SELECT COUNT(*) FROM trustmsg_barrier WHERE op = 'commit' AND message_key"
    );
    shop_db.drop_db().await;
}
