//! The backlog in `/metrics` (the real binary, so its metrics are its own):
//! waiting messages by state and the age of the oldest, refreshed on
//! `--backlog-interval`.

use std::time::Duration;

use trustmsg_client::{Message, Producer};
use trustmsg_tests::{eventually, Metrics, ServiceProcess, TestDb, UNREACHABLE_VERIFY_URL};

use crate::harness::{settings, Kafka};

const TOPIC: &str = "e2e-backlog";

/// The backlog gauge of messages in `status` and `send_status`.
fn backlog(m: &Metrics, status: &str, send_status: &str) -> Option<f64> {
    m.value(
        "trustmsg_backlog_messages",
        &[("status", status), ("send_status", send_status)],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backlog_gauges_count_waiting_messages_and_age_the_oldest() {
    let db = TestDb::create().await;
    let kafka = Kafka::start(&[TOPIC]);
    let service = ServiceProcess::start(
        &db,
        kafka.mock.bootstrap(),
        &[
            "--backlog-interval",
            "200ms",
            "--kafka-message-timeout",
            "1s",
            "--send-lease",
            "2s",
        ],
    )
    .await;
    let (token, _) = service
        .register("shop", settings(UNREACHABLE_VERIFY_URL, 3_600_000, 5))
        .await;
    let producer = Producer::new(&service.url(), "shop", token).unwrap();
    kafka.mock.brokers_down();
    for key in ["old", "new", "stuck"] {
        producer
            .prepare(&Message::new(key, TOPIC, "p"))
            .await
            .unwrap();
        if key == "old" {
            tokio::time::sleep(Duration::from_millis(1200)).await;
        }
    }
    producer.commit("stuck").await.unwrap();

    eventually(20, "the backlog gauges", async || {
        let m = service.metrics().await;
        backlog(&m, "PREPARED", "") == Some(2.0) && backlog(&m, "COMMITTED", "PENDING") == Some(1.0)
    })
    .await;
    let m = service.metrics().await;
    let oldest = m
        .value("trustmsg_backlog_oldest_prepared_seconds", &[])
        .unwrap();
    assert!(
        oldest >= 1.2,
        "the oldest prepare waited 1.2 s at least: {oldest}"
    );
    let pending = m
        .value("trustmsg_backlog_oldest_pending_send_seconds", &[])
        .unwrap();
    assert!(pending < oldest, "{pending} vs {oldest}");
    assert_eq!(backlog(&m, "VERIFY_FAILED", ""), Some(0.0));

    // Kafka back: the send goes out and the gauge follows.
    kafka.mock.brokers_up();
    eventually(30, "no pending send", async || {
        backlog(&service.metrics().await, "COMMITTED", "PENDING") == Some(0.0)
    })
    .await;
    assert_eq!(
        service
            .metric("trustmsg_backlog_oldest_pending_send_seconds", &[])
            .await,
        Some(0.0)
    );
    drop(service);
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_deletes_finished_messages_past_the_window_and_counts_them() {
    let db = TestDb::create().await;
    let kafka = Kafka::start(&[TOPIC]);
    // Partitions of a second: the rolled-back message's is held by the
    // PREPARED one, so it is deleted row by row.
    let service = ServiceProcess::start(
        &db,
        kafka.mock.bootstrap(),
        &["--retention", "1s", "--partition-period", "1s"],
    )
    .await;
    let (token, _) = service
        .register("shop", settings(UNREACHABLE_VERIFY_URL, 3_600_000, 5))
        .await;
    let producer = Producer::new(&service.url(), "shop", token).unwrap();
    let done = producer
        .prepare(&Message::new("done", TOPIC, "p"))
        .await
        .unwrap();
    producer.rollback("done").await.unwrap();
    let waiting = producer
        .prepare(&Message::new("waiting", TOPIC, "p"))
        .await
        .unwrap();

    let pool = db.pool().await;
    let exists = |id: u64| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM messages WHERE id = ?")
                .bind(id)
                .fetch_one(&pool)
                .await
                .unwrap()
                == 1
        }
    };
    eventually(20, "the rolled-back message deleted", async || {
        !exists(done.id).await
    })
    .await;
    assert!(
        exists(waiting.id).await,
        "a PREPARED message is never deleted"
    );
    let audit: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM audit_log WHERE message_id = ?")
        .bind(done.id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(audit, 0, "its audit rows went with it");
    assert_eq!(
        service
            .metric("trustmsg_retention_deleted_total", &[])
            .await,
        Some(1.0)
    );
    pool.close().await;
    drop(service);
    db.drop_db().await;
}
