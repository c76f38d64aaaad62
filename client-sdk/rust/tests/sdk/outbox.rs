//! The local message table on the real MariaDB/MySQL server (and on a
//! SQLite file): a row enqueued in a committed transaction is in the table
//! with exactly the message's fields, a rolled-back transaction leaves none,
//! a second row under one message key is a clear error, and what trustmsg
//! would refuse is refused before anything is written.

use std::time::Duration;

use chrono::{NaiveDateTime, TimeZone, Utc};
use sqlx::{MySqlPool, SqlitePool};
use trustmsg_client::outbox::{self, Dialect, EnqueueError};
use trustmsg_client::Message;
use trustmsg_tests::TestDb;

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

async fn setup() -> (TestDb, MySqlPool) {
    let db = TestDb::create().await;
    let pool = db.pool().await;
    outbox::create_table(&pool).await.unwrap();
    outbox::create_table(&pool)
        .await
        .expect("create_table is idempotent");
    sqlx::query("CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY) ENGINE=InnoDB")
        .execute(&pool)
        .await
        .unwrap();
    (db, pool)
}

/// A row as stored: message_key, topic, record_key, payload, headers,
/// content_type, deliver_at, traceparent, status, retry_count.
type Stored = (
    Vec<u8>,
    Vec<u8>,
    Option<Vec<u8>>,
    Vec<u8>,
    Option<String>,
    Option<Vec<u8>>,
    Option<NaiveDateTime>,
    Option<Vec<u8>>,
    i64,
    i64,
);

async fn stored(pool: &MySqlPool, key: &str) -> Option<Stored> {
    sqlx::query_as(
        "SELECT message_key, topic, record_key, payload, CAST(headers AS CHAR), content_type, \
         deliver_at, traceparent, CAST(status AS SIGNED), CAST(retry_count AS SIGNED) \
         FROM trustmsg_outbox WHERE message_key = ?",
    )
    .bind(key)
    .fetch_optional(pool)
    .await
    .unwrap()
}

async fn rows(pool: &MySqlPool) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM trustmsg_outbox")
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn orders(pool: &MySqlPool) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM orders")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The order `id` and its message, in the transaction `tx`.
async fn place(
    tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
    id: &str,
    message: &Message,
) -> Result<u64, EnqueueError> {
    sqlx::query("INSERT INTO orders (id) VALUES (?)")
        .bind(id)
        .execute(&mut **tx)
        .await
        .unwrap();
    outbox::enqueue(tx, message).await
}

#[tokio::test]
async fn a_row_enqueued_in_a_committed_transaction_holds_the_message_exactly() {
    let (db, pool) = setup().await;
    // Three days ahead, in whole milliseconds (what the column keeps).
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
    assert_eq!(rows(&pool).await, 0, "invisible until the commit");
    tx.commit().await.unwrap();

    let row = stored(&pool, "order-1").await.expect("the row");
    assert_eq!(
        row,
        (
            b"order-1".to_vec(),
            b"orders".to_vec(),
            Some(b"customer-7".to_vec()),
            vec![0, 159, 146, 150, 255],
            Some(r#"{"content-type":"application/octet-stream","source":"shop"}"#.to_string()),
            None,
            Some(at.naive_utc()),
            Some(TRACEPARENT.as_bytes().to_vec()),
            0,
            0,
        )
    );
    let row_id: u64 = sqlx::query_scalar("SELECT id FROM trustmsg_outbox WHERE message_key = ?")
        .bind("order-1")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(id, row_id, "enqueue returns the row's id");

    // The least a row needs: only what the message has is written.
    let mut tx = pool.begin().await.unwrap();
    place(&mut tx, "2", &Message::new("order-2", "orders", "{}"))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let (_, _, record_key, payload, headers, _, deliver_at, traceparent, status, _) =
        stored(&pool, "order-2").await.unwrap();
    assert_eq!(
        (
            record_key,
            payload,
            headers,
            deliver_at,
            traceparent,
            status
        ),
        (None, b"{}".to_vec(), None, None, None, 0)
    );
    db.drop_db().await;
}

#[tokio::test]
async fn a_rolled_back_transaction_leaves_no_row() {
    let (db, pool) = setup().await;
    let mut tx = pool.begin().await.unwrap();
    place(&mut tx, "1", &Message::new("order-1", "orders", "{}"))
        .await
        .unwrap();
    tx.rollback().await.unwrap();

    // Dropped without a commit: rolled back as well.
    let mut tx = pool.begin().await.unwrap();
    place(&mut tx, "2", &Message::new("order-2", "orders", "{}"))
        .await
        .unwrap();
    drop(tx);

    assert_eq!((rows(&pool).await, orders(&pool).await), (0, 0));
    // The keys are free: their messages were never written.
    let mut tx = pool.begin().await.unwrap();
    place(&mut tx, "1", &Message::new("order-1", "orders", "{}"))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(rows(&pool).await, 1);
    db.drop_db().await;
}

#[tokio::test]
async fn a_second_row_with_the_same_message_key_is_a_duplicate_error() {
    let (db, pool) = setup().await;
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
    let EnqueueError::Duplicate {
        ref message_key, ..
    } = err
    else {
        panic!("not a duplicate: {err:?}");
    };
    assert_eq!(message_key, "order-1");
    let said = err.to_string();
    assert!(
        said.contains("\"order-1\"") && said.contains("unique key"),
        "{said}"
    );
    // The failed INSERT left the transaction open: the caller decides.
    assert_eq!(orders(&pool).await, 1, "1-again not committed yet");
    tx.rollback().await.unwrap();
    let (_, _, _, payload, ..) = stored(&pool, "order-1").await.unwrap();
    assert_eq!(payload, b"first", "the first row is untouched");
    assert_eq!(rows(&pool).await, 1);
    db.drop_db().await;
}

#[tokio::test]
async fn a_key_held_by_an_open_transaction_waits_and_is_a_duplicate_once_it_commits() {
    let (db, pool) = setup().await;
    let mut first = pool.begin().await.unwrap();
    place(&mut first, "1", &Message::new("order-1", "orders", "first"))
        .await
        .unwrap();

    let second = tokio::spawn({
        let pool = pool.clone();
        async move {
            let mut tx = pool.begin().await.unwrap();
            outbox::enqueue(&mut tx, &Message::new("order-1", "orders", "second")).await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!second.is_finished(), "the second INSERT waits on the key");
    first.commit().await.unwrap();
    let err = second.await.unwrap().unwrap_err();
    assert!(matches!(err, EnqueueError::Duplicate { .. }), "{err:?}");
    db.drop_db().await;
}

#[tokio::test]
async fn a_delay_is_counted_from_the_insert_by_the_databases_clock() {
    let (db, pool) = setup().await;
    let mut tx = pool.begin().await.unwrap();
    outbox::enqueue(
        &mut tx,
        &Message::new("later", "orders", "{}").deliver_after(Duration::from_millis(3_600_250)),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let (ahead_ms, created_ms): (i64, i64) = sqlx::query_as(
        "SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(3), deliver_at) DIV 1000, \
         TIMESTAMPDIFF(MICROSECOND, gmt_create, NOW(3)) DIV 1000 \
         FROM trustmsg_outbox WHERE message_key = 'later'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(
        (3_600_250 - 10_000..=3_600_250).contains(&ahead_ms),
        "deliver_at is {ahead_ms} ms ahead (written {created_ms} ms ago)"
    );
    db.drop_db().await;
}

#[tokio::test]
async fn what_trustmsg_would_refuse_is_refused_before_anything_is_written() {
    let (db, pool) = setup().await;
    let mut tx = pool.begin().await.unwrap();
    let refused = [
        (Message::new("order-1", "orders/eu", "{}"), "invalid_topic"),
        (
            Message::new("order-1", "orders", "{}").header("trustmsg-message-id", "7"),
            "invalid_headers",
        ),
        (Message::new("", "orders", "{}"), "invalid_message_key"),
        (
            Message::new("order-1", "orders", "{}").deliver_after(Duration::from_secs(8 * 86400)),
            "invalid_deliver_after_ms",
        ),
    ];
    for (message, expected) in refused {
        match outbox::enqueue(&mut tx, &message).await {
            Err(EnqueueError::Invalid { code, .. }) => assert_eq!(code, expected),
            other => panic!("{message:?} not refused as {expected}: {other:?}"),
        }
    }
    // The transaction goes on: the valid message is written.
    outbox::enqueue(&mut tx, &Message::new("order-1", "orders", "{}"))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(rows(&pool).await, 1);
    db.drop_db().await;
}

#[tokio::test]
async fn a_chosen_table_name_is_written_to_and_a_bad_one_is_refused() {
    let db = TestDb::create().await;
    let pool = db.pool().await;
    outbox::create_table_named(&pool, "orders_outbox")
        .await
        .unwrap();
    let mut conn = pool.acquire().await.unwrap();
    outbox::enqueue_into(
        &mut conn,
        "orders_outbox",
        &Message::new("k", "orders", "{}"),
    )
    .await
    .unwrap();
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orders_outbox")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 1);
    let err = outbox::enqueue_into(
        &pool,
        "orders_outbox; DROP TABLE x",
        &Message::new("k2", "t", ""),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, EnqueueError::Invalid { code, .. } if code == "invalid_table"),
        "{err:?}"
    );
    // Without the table: the database's error, not a panic.
    let err = outbox::enqueue(&pool, &Message::new("k", "orders", "{}"))
        .await
        .unwrap_err();
    assert!(matches!(err, EnqueueError::Database(_)), "{err:?}");
    db.drop_db().await;
}

#[tokio::test]
async fn on_sqlite_the_row_commits_and_rolls_back_with_the_transaction() {
    let db = TestDb::sqlite();
    let pool = SqlitePool::connect(&db.url).await.unwrap();
    outbox::create_table(&pool).await.unwrap();
    outbox::create_table(&pool).await.unwrap();

    let at = Utc
        .timestamp_millis_opt(Utc::now().timestamp_millis() + 60_000)
        .unwrap();
    let mut tx = pool.begin().await.unwrap();
    outbox::enqueue(
        &mut tx,
        &Message::from_bytes("order-1", "orders", &[0, 255])
            .key("customer-7")
            .header("source", "shop")
            .deliver_at(at),
    )
    .await
    .unwrap();
    outbox::enqueue(
        &mut tx,
        &Message::new("order-2", "orders", "{}").deliver_after(Duration::from_millis(90_500)),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let mut tx = pool.begin().await.unwrap();
    outbox::enqueue(&mut tx, &Message::new("order-3", "orders", "{}"))
        .await
        .unwrap();
    tx.rollback().await.unwrap();

    type Row = (
        String,
        Vec<u8>,
        Option<String>,
        Option<String>,
        Option<NaiveDateTime>,
        i64,
    );
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT message_key, payload, record_key, headers, deliver_at, status \
         FROM trustmsg_outbox ORDER BY id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(
        rows[0],
        (
            "order-1".to_string(),
            vec![0, 255],
            Some("customer-7".to_string()),
            Some(r#"{"source":"shop"}"#.to_string()),
            Some(at.naive_utc()),
            0
        )
    );
    let ahead = rows[1].4.expect("a delay is a time") - Utc::now().naive_utc();
    assert!(
        (80_000..=90_500).contains(&ahead.num_milliseconds()),
        "{ahead:?}"
    );

    let err = outbox::enqueue(&pool, &Message::new("order-1", "orders", "again"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, EnqueueError::Duplicate { message_key, .. } if message_key == "order-1"),
        "{err:?}"
    );
}

#[test]
fn the_shipped_sql_is_the_repositorys() {
    assert_eq!(
        outbox::MYSQL_MIGRATION,
        include_str!("../../../../migrations/outbox/mysql.sql")
    );
    assert_eq!(
        outbox::SQLITE_MIGRATION,
        include_str!("../../../../migrations/outbox/sqlite.sql")
    );
    assert_eq!(
        outbox::POSTGRES_MIGRATION,
        include_str!("../../../../migrations/outbox/postgres.sql")
    );
    let renamed = outbox::schema(Dialect::Sqlite, "shop_outbox").unwrap();
    assert!(!renamed.contains("trustmsg_outbox"), "{renamed}");
}
