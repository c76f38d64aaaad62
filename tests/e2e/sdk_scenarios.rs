//! The contract kit's scenarios S01, S02 and S07 for the Rust SDK
//! (client-sdk/conformance/scenarios.json), against the real binary, the
//! real MariaDB and the Kafka mock: what every other SDK's kit tests show
//! for their language. The other scenarios are shown by the tests that
//! name them (`kit coverage` lists them).

use sqlx::MySqlPool;
use trustmsg_client::barrier::{self, BoxFuture, RunError};
use trustmsg_client::inbox::{self, Processed};
use trustmsg_client::{Message, Producer, TxOutcome};
use trustmsg_tests::kafka::{records_in, MockKafka};
use trustmsg_tests::{eventually, ServiceProcess, TestDb, UNREACHABLE_VERIFY_URL};

use crate::harness::{settings, statuses};

const TOPIC: &str = "e2e-sdk-scenarios";

fn order(
    id: &'static str,
    fail: bool,
) -> impl for<'c> FnOnce(&'c mut sqlx::MySqlConnection) -> BoxFuture<'c, Result<&'static str, String>>
{
    move |conn| {
        Box::pin(async move {
            sqlx::query("INSERT INTO orders (id) VALUES (?)")
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
    let shop_db = TestDb::create().await;
    let shop = shop_db.pool().await;
    barrier::create_table(&shop).await.unwrap();
    inbox::create_table(&shop).await.unwrap();
    sqlx::query("CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY) ENGINE=InnoDB")
        .execute(&shop)
        .await
        .unwrap();
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
            "SELECT COUNT(*) FROM trustmsg_barrier WHERE message_key = 'order-2'"
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
