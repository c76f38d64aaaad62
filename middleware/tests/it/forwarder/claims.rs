//! Claims and leases: several instances, dead owners, stale writes.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use trustmsg::config::ServeArgs;
use trustmsg::startup::Application;
use trustmsg::store::{Actor, Message, PayloadRoom, Reschedule, SentMark};
use trustmsg_tests::kafka::{MockKafka, TopicReader};
use trustmsg_tests::{TestApp, TestDb, UNREACHABLE_VERIFY_URL};
use trustmsg_verify_api::SendStatus;

use super::{body, kafka_flags, prepare_and_commit, refs, wait_for_row};

fn same_db(db: &TestDb) -> TestDb {
    db.share()
}

/// Claims `id` through the store as a sweeper would, once its current claim has run out.
async fn claim_when_due(app: &TestApp, id: u64, lease: Duration) -> Message {
    let start = Instant::now();
    loop {
        let claimed = app
            .store()
            .claim_due_sends(100, PayloadRoom::UNBOUNDED, lease)
            .await
            .unwrap();
        if let Some(m) = claimed.messages.into_iter().find(|m| m.id == id) {
            return m;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "message {id} never came due"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_forwarders_on_one_database_deliver_every_message_exactly_once() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 3);
    let flags = kafka_flags(kafka.bootstrap());
    let a = TestApp::spawn(&refs(&flags)).await;
    let b = TestApp::spawn_on(same_db(&a.db), &refs(&flags)).await;
    // An API-only instance whose commits hold a claim for only 100 ms and
    // nobody sends them: both forwarders' sweepers race for those rows.
    let api_only = TestApp::spawn_on(same_db(&a.db), &["--send-lease", "100ms"]).await;
    let token = a.register("shop", UNREACHABLE_VERIFY_URL).await;

    let mut ids = BTreeSet::new();
    for i in 0..20 {
        for (name, app) in [("a", &a), ("b", &b), ("swept", &api_only)] {
            ids.insert(
                prepare_and_commit(app, &token, body("shop", &format!("{name}-{i}"), "orders"))
                    .await,
            );
        }
    }
    let mut reader = TopicReader::new(kafka.bootstrap(), "orders");
    reader
        .read_until(Duration::from_secs(60), "every committed message", |rs| {
            rs.iter().map(|r| r.message_id).collect::<BTreeSet<_>>() == ids
        })
        .await;
    for id in &ids {
        wait_for_row(&a, *id, Duration::from_secs(20), "SENT", |m| {
            m.send_status == Some(SendStatus::Sent)
        })
        .await;
    }
    // More than a few sweeps later nothing was sent a second time.
    reader.read_for(Duration::from_secs(2)).await;
    let twice: Vec<_> = reader
        .id_counts()
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    assert!(twice.is_empty(), "sent more than once: {twice:?}");
    assert_eq!(reader.records.len(), ids.len());

    api_only.app.stop().await.unwrap();
    b.app.stop().await.unwrap();
    a.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_owner_died_is_resent_after_the_lease() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 1);
    // Commit through an instance without a forwarder; its commit claim lapses fast.
    let api_only = TestApp::spawn(&["--send-lease", "100ms"]).await;
    let token = api_only.register("shop", UNREACHABLE_VERIFY_URL).await;
    let id = prepare_and_commit(&api_only, &token, body("shop", "orphan", "orders")).await;

    // A worker claims the row for 3 s, then dies without sending or marking.
    let claim = claim_when_due(&api_only, id, Duration::from_secs(3)).await;
    let lease_end = claim.next_send_at.expect("a claim sets the lease");

    let forwarder = TestApp::spawn_on(
        same_db(&api_only.db),
        &refs(&kafka_flags(kafka.bootstrap())),
    )
    .await;
    let mut reader = TopicReader::new(kafka.bootstrap(), "orders");
    reader
        .read_until(Duration::from_secs(30), "the orphaned message", |rs| {
            rs.iter().any(|r| r.message_id == id)
        })
        .await;
    let row = wait_for_row(&forwarder, id, Duration::from_secs(10), "SENT", |m| {
        m.send_status == Some(SendStatus::Sent)
    })
    .await;
    // Not before the dead owner's lease ran out (both times are the database clock).
    let sent_at = row.sent_at.expect("sent_at is set");
    assert!(
        sent_at >= lease_end,
        "sent at {sent_at} inside the lease ending {lease_end}"
    );
    assert!(row.version > claim.version, "re-claimed by the sweeper");
    reader.read_for(Duration::from_secs(1)).await;
    assert_eq!(reader.records.len(), 1);

    forwarder.app.stop().await.unwrap();
    api_only.finish().await;
}

#[tokio::test]
async fn a_stale_owners_writes_match_nothing_after_another_owner_reclaimed() {
    let app = TestApp::spawn(&["--send-lease", "100ms"]).await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    let id = prepare_and_commit(&app, &token, body("shop", "contested", "orders")).await;

    let stale = claim_when_due(&app, id, Duration::from_millis(100)).await;
    let fresh = claim_when_due(&app, id, Duration::from_secs(60)).await;
    assert!(fresh.version > stale.version);
    let audit_before = app.store().audit_trail(id).await.unwrap().len();

    let stale_mark = SentMark {
        id,
        version: stale.version,
        partition: 0,
        offset: 41,
        order: None,
    };
    assert_eq!(app.store().mark_sent(&[stale_mark]).await.unwrap(), 0);
    assert!(!app
        .store()
        .reschedule_send(&Reschedule {
            id,
            version: stale.version,
            error: "stale".into(),
            delay: Duration::ZERO
        })
        .await
        .unwrap());
    assert!(app
        .store()
        .mark_send_failed(id, stale.version, "stale", &Actor::Forwarder)
        .await
        .unwrap()
        .is_none());
    let row = app.store().find_message_by_id(id).await.unwrap().unwrap();
    assert_eq!(row.send_status, Some(SendStatus::Pending));
    assert_eq!(row.version, fresh.version, "untouched by the stale owner");
    assert_eq!(row.kafka_offset, None);
    assert_eq!(
        app.store().audit_trail(id).await.unwrap().len(),
        audit_before
    );

    // The current owner's mark wins, in a batch with the stale one.
    let fresh_mark = SentMark {
        version: fresh.version,
        offset: 42,
        order: None,
        ..stale_mark
    };
    assert_eq!(
        app.store()
            .mark_sent(&[stale_mark, fresh_mark])
            .await
            .unwrap(),
        1
    );
    let row = app.store().find_message_by_id(id).await.unwrap().unwrap();
    assert_eq!(row.send_status, Some(SendStatus::Sent));
    assert_eq!((row.kafka_partition, row.kafka_offset), (Some(0), Some(42)));
    app.finish().await;
}

#[tokio::test]
async fn a_send_lease_not_longer_than_the_kafka_message_timeout_is_refused() {
    let db = TestDb::create().await;
    let args = ServeArgs::from_args([
        "--database-url",
        &db.url,
        "--listen",
        "127.0.0.1:0",
        "--insecure-no-auth",
        "--auto-migrate",
        "--kafka-brokers",
        "127.0.0.1:9",
        "--kafka-message-timeout",
        "30s",
        "--send-lease",
        "30s",
    ])
    .unwrap();
    let err = Application::build(args)
        .await
        .err()
        .expect("start-up refused");
    assert!(err.to_string().contains("--send-lease"), "{err:#}");
    db.drop_db().await;
}
