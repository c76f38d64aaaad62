//! When checks happen: never before the first-check delay (by the database
//! clock), and further apart after each attempt that decided nothing.

use std::time::Duration;

use serde_json::json;
use trustmsg::verifier::Outcome;
use trustmsg_tests::{eventually, CheckServer, TestApp};
use trustmsg_verify_api::MessageStatus;

use super::support::*;

#[tokio::test]
async fn no_check_happens_before_the_first_check_delay_by_the_database_clock() {
    let app = TestApp::spawn(&["--no-verifier"]).await;
    let server = CheckServer::start().await;
    let token = register(&app, "orders", &server, first_check_after_ms(2000)).await;
    let id = prepare(&app, &token, "orders", "o-1").await;
    let (verifier, _) = recording_verifier(&app);
    let created = message(&app, id).await.created_at;
    let due = created + chrono::Duration::milliseconds(2000);
    assert_eq!(message(&app, id).await.next_verify_at, Some(due));

    // Step the verifier until the database clock passes the due time: before
    // it, nothing is claimed and nothing is called.
    let mut rounds_before = 0;
    loop {
        let before = app.store().now().await.unwrap();
        let report = verifier.process_batch().await.unwrap();
        let after = app.store().now().await.unwrap();
        if report.claimed > 0 {
            assert!(after >= due, "checked at {after}, due at {due}");
            assert_eq!(report.outcomes, vec![Outcome::Rescheduled]);
            break;
        }
        assert_eq!(server.total(), 0);
        assert!(before < due + chrono::Duration::seconds(5), "never claimed");
        rounds_before += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(rounds_before > 0, "the first round already found it due");
    assert_eq!(server.attempts("o-1"), vec![1]);
    app.finish().await;
}

#[tokio::test]
async fn the_backoff_grows_after_each_attempt_that_decides_nothing() {
    let app = TestApp::spawn(&["--no-verifier"]).await;
    let server = CheckServer::start().await;
    let token = register(&app, "orders", &server, json!({"max_verify_attempts": 10})).await;
    let id = prepare(&app, &token, "orders", "o-1").await;
    // stepped_config: a backoff base of 100 ms, doubling.
    let (verifier, _) = recording_verifier(&app);

    let mut delays = Vec::new();
    for attempt in 1..=4u32 {
        eventually(10, "the next check to fall due", async || {
            verifier.process_batch().await.unwrap().claimed == 1
        })
        .await;
        let m = message(&app, id).await;
        assert_eq!(m.verify_attempts, attempt);
        let scheduled = m.next_verify_at.unwrap() - m.updated_at;
        let ms = scheduled.num_milliseconds();
        let nominal = 100 * 2i64.pow(attempt - 1);
        assert!(
            (nominal * 8 / 10 - 1..=nominal * 12 / 10 + 1).contains(&ms),
            "attempt {attempt}: next check in {ms} ms, expected {nominal} ms ± 20 %"
        );
        delays.push(ms);
    }
    assert!(delays.windows(2).all(|w| w[1] > w[0]), "{delays:?}");
    assert_eq!(server.attempts("o-1"), vec![1, 2, 3, 4]);
    app.finish().await;
}

#[tokio::test]
async fn a_backlog_larger_than_the_call_slots_is_worked_off_well_within_one_interval() {
    // Prepared while no verifier runs, so the whole backlog is due when the
    // checking instance starts; its first round runs at start, the next tick
    // only after 10 s.
    let writer = TestApp::spawn(&["--no-verifier"]).await;
    let server = CheckServer::start().await;
    server.default_reply(trustmsg_tests::Reply::Decide("commit"));
    let token = register(&writer, "orders", &server, json!({})).await;
    const N: usize = 40;
    let mut ids = Vec::new();
    for i in 0..N {
        ids.push(prepare(&writer, &token, "orders", &format!("o-{i}")).await);
    }

    let checker = TestApp::spawn_on(
        writer.db.share(),
        &[
            "--verify-interval",
            "10s",
            "--verify-concurrency",
            "4",
            "--verify-concurrency-per-producer",
            "4",
            "--first-verify-after",
            "0s",
        ],
    )
    .await;
    // Ten rounds of four calls that answer at once take far less than one
    // interval; one round per interval would take 90 s.
    eventually(5, "the whole backlog committed", async || {
        all_have_status(&writer, &ids, MessageStatus::Committed).await
    })
    .await;
    assert_eq!(server.per_key_calls().len(), N);
    checker.app.stop().await.unwrap();
    writer.finish().await;
}
