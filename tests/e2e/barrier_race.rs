//! The barrier race: check-back arrives while the producer's local transaction
//! is still open. The SDK barrier makes the answer exact, so business state and
//! message state must agree every time.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use rand::RngExt;
use trustmsg_client::{barrier, check_router, Message, Producer};
use trustmsg_tests::{eventually, Endpoint, ServiceProcess, TestDb};

use crate::harness::{settings, statuses, Kafka, FAST_VERIFY};

const TOPIC: &str = "e2e-barrier";
const RUNS: usize = 200;

/// Contract kit scenarios S03 and S04 for the Rust SDK: the producer never
/// calls commit or rollback, check-back alone decides through the barrier,
/// while local transactions are open and after they commit or roll back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn check_back_during_an_open_local_transaction_is_always_answered_right() {
    let db = TestDb::create().await;
    let shop_db = TestDb::create().await;
    // Room for every open local transaction plus the check-backs waiting on them.
    let shop = shop_db.pool_of(64).await;
    barrier::create_table(&shop).await.unwrap();
    sqlx::query("CREATE TABLE orders (order_key VARCHAR(128) PRIMARY KEY) ENGINE=InnoDB")
        .execute(&shop)
        .await
        .unwrap();

    let kafka = Kafka::start(&[TOPIC]);
    // Each check-back blocks on the open transaction's marker row; let enough of
    // them run at once that they land while transactions are open.
    let mut flags = FAST_VERIFY.to_vec();
    flags.extend(["--verify-concurrency-per-producer", "64"]);
    let service = ServiceProcess::start(&db, kafka.mock.bootstrap(), &flags).await;

    // Which keys have a local transaction open right now, and how many
    // check-backs arrived while theirs was open.
    let open: Arc<Mutex<HashSet<String>>> = Arc::default();
    let overlaps = Arc::new(AtomicUsize::new(0));

    let endpoint = Endpoint::bind().await;
    let url = endpoint.url(trustmsg_client::DEFAULT_CHECK_PATH);
    let (token, secret) = service.register("shop", settings(&url, 100, 15)).await;
    let router = {
        let (shop, open, overlaps) = (shop.clone(), open.clone(), overlaps.clone());
        check_router(secret, move |req: trustmsg_client::CheckRequest| {
            let (shop, open, overlaps) = (shop.clone(), open.clone(), overlaps.clone());
            async move {
                if open.lock().unwrap().contains(&req.message_key) {
                    overlaps.fetch_add(1, Ordering::Relaxed);
                }
                barrier::check(&shop, &req.biz_id, &req.message_key).await
            }
        })
    };
    endpoint.serve(router);

    let producer = Producer::new(&service.url(), "shop", token).unwrap();
    let runs = (0..RUNS).map(|i| {
        let (producer, shop, open) = (producer.clone(), shop.clone(), open.clone());
        async move {
            let key = format!("race-{i}");
            producer
                .prepare(&Message::new(key.clone(), TOPIC, format!("order {i}")))
                .await
                .expect("prepare");
            // The local transaction: barrier marker + business row, held open for
            // a random time while check-back (due at once) arrives, then
            // committed or rolled back at random. The producer then "crashes":
            // it never tells trustmsg, so check-back alone decides.
            let (hold, commit) = {
                let mut rng = rand::rng();
                (
                    Duration::from_millis(rng.random_range(0..400)),
                    rng.random_bool(0.5),
                )
            };
            let mut tx = shop.begin().await.unwrap();
            open.lock().unwrap().insert(key.clone());
            let marker = barrier::insert(&mut tx, "shop", &key).await;
            if marker.is_ok() {
                sqlx::query("INSERT INTO orders (order_key) VALUES (?)")
                    .bind(&key)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                tokio::time::sleep(hold).await;
            }
            if marker.is_ok() && commit {
                tx.commit().await.unwrap();
            } else {
                tx.rollback().await.unwrap();
            }
            open.lock().unwrap().remove(&key);
        }
    });
    futures::stream::iter(runs)
        .buffer_unordered(25)
        .collect::<Vec<_>>()
        .await;

    let pool = db.pool().await;
    eventually(90, "check-back decided every message", async || {
        statuses(&pool, "shop")
            .await
            .values()
            .all(|(_, s, _)| s != "PREPARED")
    })
    .await;
    let st = statuses(&pool, "shop").await;
    let committed_ids: HashSet<u64> = st
        .values()
        .filter(|(_, s, _)| s == "COMMITTED")
        .map(|(id, _, _)| *id)
        .collect();
    eventually(30, "committed messages delivered", async || {
        committed_ids
            .iter()
            .all(|id| kafka.deliveries().contains_key(id))
    })
    .await;

    let orders: HashSet<String> = sqlx::query_scalar::<_, String>("SELECT order_key FROM orders")
        .fetch_all(&shop)
        .await
        .unwrap()
        .into_iter()
        .collect();
    let deliveries = kafka.deliveries();
    let mut mismatches = Vec::new();
    for i in 0..RUNS {
        let key = format!("race-{i}");
        let (id, status, _) = &st[&key];
        let business = orders.contains(&key);
        let message = status == "COMMITTED";
        let delivered = deliveries.contains_key(id);
        if business != message || message != delivered {
            mismatches.push(format!(
                "{key}: order row {business}, message {status}, delivered {delivered}"
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    // The race was really run: many check-backs came while their transaction was open.
    let overlapped = overlaps.load(Ordering::Relaxed);
    eprintln!(
        "barrier race: {RUNS} runs, {overlapped} check-backs during an open transaction, \
         {} local commits, 0 mismatches",
        orders.len()
    );
    assert!(
        overlapped >= RUNS / 10,
        "only {overlapped} check-backs overlapped a local transaction"
    );
    assert!(
        !orders.is_empty() && orders.len() < RUNS,
        "both outcomes happened"
    );
    drop(service);
    db.drop_db().await;
    shop_db.drop_db().await;
}
