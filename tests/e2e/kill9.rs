//! kill -9 in the middle of a stream of commits: of the service (over
//! MariaDB and over PostgreSQL), and of PostgreSQL itself under the
//! service (a private server of the test's own, its postmaster and every
//! backend killed, then started again on the same data). After the restart
//! the ledger still shows zero lost and zero wrong publishes, and every
//! decision acknowledged before the kill is on record as the producer's own
//! (check-back answers from the producer's intent, so a commit the kill lost
//! and check-back then re-decided would otherwise pass unseen).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use trustmsg_client::{check_router, Decision, Error, Message, MessageView, Producer};
use trustmsg_tests::ServiceProcess;
use trustmsg_tests::{deciders, eventually, message_states, open_store, within, Endpoint};
use trustmsg_tests::{flags, Database, PgTestDb, PrivateDb, TestDb};

use crate::harness::{settings, Kafka, FAST_VERIFY};

const TOPIC: &str = "e2e-kill";
const N: usize = 400;

fn commits(i: usize) -> bool {
    !i.is_multiple_of(5)
}

/// Retries a call until the service answers (it is down for a while), for
/// at most 120 s.
async fn until_answered<F, Fut>(mut call: F) -> MessageView
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<MessageView, Error>>,
{
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match call().await {
            Ok(v) => return v,
            Err(e) if e.is_unavailable() => {
                assert!(Instant::now() < deadline, "no answer for 120 s: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => panic!("unexpected answer: {e}"),
        }
    }
}

/// What the kill hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Victim {
    /// The `trustmsg serve` process, over the shared server.
    Service,
    /// The database server under it, a private one.
    Database,
}

/// trustmsg's database: one of the shared servers' (the service is
/// killed), or a private server (killed itself).
enum Home {
    MariaDb(TestDb),
    Postgres(PgTestDb),
    Private(PrivateDb),
}

impl Home {
    async fn new(database: Database, victim: Victim) -> Self {
        match (database, victim) {
            (Database::MariaDb, Victim::Service) => Self::MariaDb(TestDb::create().await),
            (Database::Postgres, Victim::Service) => Self::Postgres(PgTestDb::named()),
            (_, Victim::Database) => Self::Private(PrivateDb::start(database).await),
        }
    }

    fn url(&self) -> String {
        match self {
            Self::MariaDb(db) => db.url.clone(),
            Self::Postgres(db) => db.url.clone(),
            Self::Private(server) => server.url("kill9"),
        }
    }

    async fn drop_db(self) {
        match self {
            Self::MariaDb(db) => db.drop_db().await,
            Self::Postgres(db) => db.drop_db().await,
            Self::Private(_) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_mid_stream_loses_nothing_and_publishes_nothing_wrong() {
    kill_9_mid_stream(Database::MariaDb, Victim::Service).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_postgresql_kill_9_of_the_service_mid_stream_loses_nothing_and_publishes_nothing_wrong()
{
    kill_9_mid_stream(Database::Postgres, Victim::Service).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_of_postgresql_itself_mid_stream_loses_nothing_and_publishes_nothing_wrong() {
    kill_9_mid_stream(Database::Postgres, Victim::Database).await;
}

/// N messages, a fifth rolled back, 16 at a time; the kill once a third
/// are decided, 1.5 s down, then the restart; then the ledger.
async fn kill_9_mid_stream(database: Database, victim: Victim) {
    let mut home = Home::new(database, victim).await;
    let url = home.url();
    let kafka = Kafka::start(&[TOPIC]);
    // A send claim the killed instance held runs out in 6 s, not the
    // default 60 s, which the wait for every committed message below
    // would only just outlast.
    let flags = flags::flags(&[
        FAST_VERIFY,
        &["--kafka-message-timeout", "2s", "--send-lease", "6s"],
    ]);
    let flags = flags::refs(&flags);
    let mut service =
        ServiceProcess::start_logged(&url, kafka.mock.bootstrap(), &flags, None).await;

    // Check-back answers from the producer's own ledger (what it decided).
    let endpoint = Endpoint::bind().await;
    let check_url = endpoint.url(trustmsg_client::DEFAULT_CHECK_PATH);
    let (token, secret) = service
        .register("shop", settings(&check_url, 3_000, 15))
        .await;
    let router = check_router(secret, |req: trustmsg_client::CheckRequest| async move {
        let i: usize = req.message_key.trim_start_matches("k-").parse().unwrap();
        Ok::<_, std::convert::Infallible>(if commits(i) {
            Decision::Commit
        } else {
            Decision::Rollback
        })
    });
    endpoint.serve(router);

    let producer = Producer::new(&service.url(), "shop", token).unwrap();
    let decided = Arc::new(AtomicUsize::new(0));
    let stream = {
        let (producer, decided) = (producer.clone(), decided.clone());
        tokio::spawn(async move {
            let work = (0..N).map(|i| {
                let (producer, decided) = (producer.clone(), decided.clone());
                async move {
                    let key = format!("k-{i}");
                    let message = Message::new(key.clone(), TOPIC, format!("payload {i}"));
                    let view = until_answered(|| producer.prepare(&message)).await;
                    if commits(i) {
                        until_answered(|| producer.commit(&key)).await;
                    } else {
                        until_answered(|| producer.rollback(&key)).await;
                    }
                    let acked = Instant::now();
                    decided.fetch_add(1, Ordering::Relaxed);
                    (key, (view.id, acked))
                }
            });
            futures::stream::iter(work)
                .buffer_unordered(16)
                .collect::<Vec<_>>()
                .await
        })
    };

    // Kill in the middle of the stream, stay down a moment, come back.
    eventually(60, "a third of the stream decided", async || {
        decided.load(Ordering::Relaxed) >= N / 3
    })
    .await;
    let killed_at = Instant::now();
    match (&mut home, victim) {
        (_, Victim::Service) => service.kill_9(),
        (Home::Private(server), Victim::Database) => server.kill_9(),
        _ => unreachable!("a killed database is a private one"),
    }
    let at_kill = decided.load(Ordering::Relaxed);
    // Down for a while (the scenario, not a wait for something).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    match (&mut home, victim) {
        (_, Victim::Service) => service.restart().await,
        (Home::Private(server), Victim::Database) => server.restart().await,
        _ => unreachable!("a killed database is a private one"),
    }
    let answers: HashMap<String, (u64, Instant)> = stream.await.unwrap().into_iter().collect();
    assert!(at_kill < N, "the kill happened mid-stream");
    let ids: HashMap<String, u64> = answers
        .iter()
        .map(|(k, (id, _))| (k.clone(), *id))
        .collect();

    let store = open_store(&url).await;
    let want_sent = (0..N).filter(|i| commits(*i)).count();
    eventually(60, "every committed message sent", async || {
        message_states(&store, "shop")
            .await
            .values()
            .filter(|(_, _, s)| s.as_deref() == Some("SENT"))
            .count()
            == want_sent
    })
    .await;
    // Every committed message read back from Kafka (what is still missing
    // after 30 s is reported as lost below).
    within(30, async || {
        let deliveries = kafka.deliveries();
        ids.iter()
            .filter(|(k, _)| commits(k.trim_start_matches("k-").parse().unwrap()))
            .all(|(_, id)| deliveries.contains_key(id))
    })
    .await;

    let st = message_states(&store, "shop").await;
    let deliveries = kafka.deliveries();
    let records = kafka.records();
    let (mut lost, mut wrong) = (Vec::new(), Vec::new());
    for i in 0..N {
        let key = format!("k-{i}");
        let id = ids[&key];
        let delivered = deliveries.get(&id).copied().unwrap_or(0);
        let (_, status, _) = &st[&key];
        if commits(i) {
            if delivered == 0 {
                lost.push(key.clone());
            }
            assert_eq!(status, "COMMITTED", "{key}");
        } else {
            if delivered > 0 {
                wrong.push(key.clone());
            }
            assert_eq!(status, "ROLLED_BACK", "{key}");
        }
    }
    for r in &records {
        let i: usize = ids
            .iter()
            .find(|(_, id)| **id == r.message_id)
            .map(|(k, _)| k.trim_start_matches("k-").parse().unwrap())
            .expect("a record of this test");
        assert_eq!(r.payload, Some(format!("payload {i}").into_bytes()));
    }
    assert!(lost.is_empty(), "lost: {lost:?}");
    assert!(wrong.is_empty(), "wrongly published: {wrong:?}");

    // What the producer was told before the kill is its own decision on
    // record, never check-back's (a lost commit re-decided by check-back
    // would have the verifier as its actor).
    let by = deciders(&url, "shop").await;
    let before_kill: Vec<&String> = answers
        .iter()
        .filter(|(_, (_, acked))| *acked < killed_at)
        .map(|(k, _)| k)
        .collect();
    assert!(
        !before_kill.is_empty(),
        "decisions acknowledged before the kill"
    );
    let not_own: Vec<String> = before_kill
        .iter()
        .filter_map(|k| {
            let actors = by.get(&ids[*k]).cloned().unwrap_or_default();
            (actors != ["producer:shop"]).then(|| format!("{k}: {actors:?}"))
        })
        .collect();
    assert!(
        not_own.is_empty(),
        "acknowledged before the kill, yet not decided by the producer's call: {not_own:?}"
    );
    drop(service);
    home.drop_db().await;
}
