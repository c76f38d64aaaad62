//! Time partitions through the real binary (issue 60), on MariaDB and
//! PostgreSQL, with two instances both keeping them (`--partition-period
//! 1s`, `--retention 2s`): a prepare is idempotent across a partition
//! boundary (the same content: the stored message; other content: 409); a
//! partition past retention held by a PREPARED message keeps it while its
//! finished rows go one by one, and goes whole once it is settled; the key
//! of a message that went is free again.

use trustmsg_client::{Error, Message, Producer};
use trustmsg_tests::{
    eventually, open_store, PgTestDb, ServiceProcess, TestDb, UNREACHABLE_VERIFY_URL,
};

use crate::harness::{settings, Kafka};

const TOPIC: &str = "e2e-partitions";
const FLAGS: &[&str] = &["--partition-period", "1s", "--retention", "2s"];

fn period(id: u64) -> u64 {
    id >> 32
}

async fn two_instances_across_partition_boundaries(database_url: &str) {
    let kafka = Kafka::start(&[TOPIC]);
    let one = ServiceProcess::start_logged(database_url, kafka.mock.bootstrap(), FLAGS, None).await;
    let two = ServiceProcess::start_logged(database_url, kafka.mock.bootstrap(), FLAGS, None).await;
    // Whether the message row `id` is there, asked of the database behind
    // the services' back (once they have migrated it).
    let store = open_store(database_url).await;
    let exists = |id: u64| {
        let store = store.clone();
        async move { store.find_message_by_id(id).await.unwrap().is_some() }
    };
    let (token, _) = one
        .register("shop", settings(UNREACHABLE_VERIFY_URL, 3_600_000, 5))
        .await;
    let p1 = Producer::new(&one.url(), "shop", token.clone()).unwrap();
    let p2 = Producer::new(&two.url(), "shop", token).unwrap();

    let old = p1
        .prepare(&Message::new("old", TOPIC, "first"))
        .await
        .unwrap();
    let held = p1.prepare(&Message::new("held", TOPIC, "h")).await.unwrap();
    let gone = p1.prepare(&Message::new("gone", TOPIC, "g")).await.unwrap();
    p1.rollback("gone").await.unwrap();

    // The ids move on to the next period's partition.
    let mut probe = 0;
    eventually(30, "a new message in a later partition", async || {
        probe += 1;
        let m = p2
            .prepare(&Message::new(format!("probe-{probe}"), TOPIC, "p"))
            .await
            .unwrap();
        period(m.id) > period(old.id)
    })
    .await;

    // Across the boundary, the old key is the old message.
    let again = p2
        .prepare(&Message::new("old", TOPIC, "first"))
        .await
        .unwrap();
    assert_eq!(again.id, old.id, "the stored message, not a second one");
    match p2.prepare(&Message::new("old", TOPIC, "other")).await {
        Err(Error::Conflict { code, .. }) => assert_eq!(code, "prepare_conflict"),
        other => panic!("other content for an old key: {other:?}"),
    }
    p2.commit("old").await.unwrap();

    // Past retention, the PREPARED message holds its partition; the
    // finished ones go row by row meanwhile.
    eventually(30, "the rolled-back message deleted", async || {
        !exists(gone.id).await
    })
    .await;
    assert!(exists(held.id).await, "a PREPARED message is never dropped");

    // Settled, it goes with its partition, and its key is free.
    // (Row by row, or with it: the probes, still PREPARED, hold the next
    // partition, and the rows below it go one by one meanwhile.)
    p1.rollback("held").await.unwrap();
    eventually(30, "the settled message gone", async || {
        !exists(held.id).await
    })
    .await;
    eventually(30, "its partition dropped", async || {
        let dropped = one.metric("trustmsg_partitions_dropped_total", &[]).await;
        let also = two.metric("trustmsg_partitions_dropped_total", &[]).await;
        dropped.unwrap_or(0.0) + also.unwrap_or(0.0) >= 1.0
    })
    .await;
    let mut fresh = None;
    eventually(
        30,
        "the key of a message that went is free again",
        async || match p1.prepare(&Message::new("held", TOPIC, "h")).await {
            Ok(m) => {
                fresh = Some(m);
                true
            }
            Err(_) => false,
        },
    )
    .await;
    assert!(fresh.unwrap().id > held.id);
    drop((one, two));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mariadb_a_prepare_is_idempotent_across_partitions_and_a_held_one_waits() {
    let db = TestDb::create().await;
    two_instances_across_partition_boundaries(&db.url).await;
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_prepare_is_idempotent_across_partitions_and_a_held_one_waits() {
    let db = PgTestDb::migrated().await;
    two_instances_across_partition_boundaries(&db.url).await;
}
