//! What a check-back answer does to a message.

use std::sync::Arc;

use serde_json::json;
use trustmsg::net::address_policy::AddressPolicy;
use trustmsg::verifier::Outcome;
use trustmsg_tests::{decision_body, eventually, CheckServer, Reply, TestApp};
use trustmsg_verify_api::{MessageStatus, SendStatus};

use super::support::*;

#[tokio::test]
async fn a_commit_answer_commits_and_enters_the_forwarder_fast_path() {
    let app = TestApp::spawn(&["--no-verifier"]).await;
    let server = CheckServer::start().await;
    let token = register(&app, "orders", &server, json!({})).await;
    // Scripted before prepare: with no first-check delay the call may come at once.
    server.script("o-1", Reply::Decide("commit"));
    let id = prepare(&app, &token, "orders", "o-1").await;
    let (verifier, listener) = recording_verifier(&app);

    let report = verifier.process_batch().await.unwrap();
    assert_eq!(report.outcomes, vec![Outcome::Committed]);

    let m = message(&app, id).await;
    assert_eq!(m.status, MessageStatus::Committed);
    assert_eq!(m.send_status, Some(SendStatus::Pending));
    assert!(
        m.next_send_at.is_some(),
        "the commit claims the row for sending"
    );
    assert_eq!(m.verify_attempts, 1);
    let handed = listener.committed.lock().unwrap().clone();
    assert_eq!(handed.len(), 1, "the forwarder is told at once");
    // Built from the claimed row without reading it back: it must be the
    // row as stored, since the forwarder sends and marks exactly that.
    assert_eq!(handed[0], m, "the row handed over is the row as stored");
    let audit = app.store().audit_trail(id).await.unwrap();
    let last = audit.last().unwrap();
    assert_eq!(
        (last.actor.as_str(), last.to_status.as_deref()),
        ("verifier", Some("COMMITTED"))
    );
    assert_eq!(server.attempts("o-1"), vec![1]);
    assert_eq!(server.bad_signatures(), 0);

    // Decided: never checked again.
    let again = verifier.process_batch().await.unwrap();
    assert_eq!(again.claimed, 0);
    app.finish().await;
}

/// Check-back commits that come back together are written as one batch,
/// whose rows are built from the claimed rows instead of read back: each row
/// handed to the forwarder must still be the row as stored.
#[tokio::test]
async fn commits_decided_together_hand_the_forwarder_each_row_as_stored() {
    let app = TestApp::spawn(&["--no-verifier"]).await;
    let server = CheckServer::start().await;
    let token = register(&app, "orders", &server, json!({})).await;
    let mut ids = Vec::new();
    for i in 0..16 {
        let key = format!("t-{i}");
        server.script(&key, Reply::Decide("commit"));
        ids.push(prepare(&app, &token, "orders", &key).await);
    }
    let (verifier, listener) = recording_verifier(&app);
    let report = verifier.process_batch().await.unwrap();
    assert_eq!(report.outcomes, vec![Outcome::Committed; 16]);
    let mut handed = listener.committed.lock().unwrap().clone();
    handed.sort_by_key(|m| m.id);
    assert_eq!(handed.len(), 16, "each commit is handed over once");
    for (row, id) in handed.iter().zip(&ids) {
        let stored = message(&app, *id).await;
        assert_eq!(row, &stored, "the row handed over is the row as stored");
        assert_eq!(stored.verify_attempts, 1);
    }
    app.finish().await;
}

/// A claim that ran out before the answer was written (the database slower
/// than the margin, and another instance took the row over meanwhile) does
/// not lose the answer: the row, still PREPARED under a newer version, takes
/// it. A row the producer decided meanwhile keeps that decision.
#[tokio::test]
async fn an_answer_written_after_its_claim_ran_out_still_decides_a_row_nobody_decided() {
    let app = TestApp::spawn(&["--no-verifier"]).await;
    let server = CheckServer::start().await;
    let token = register(&app, "orders", &server, json!({})).await;
    server.default_reply(Reply::GatedCommit);
    let taken_over = prepare(&app, &token, "orders", "taken-over").await;
    let decided = prepare(&app, &token, "orders", "decided").await;
    let (verifier, listener) = recording_verifier(&app);
    let round = tokio::spawn(async move { verifier.process_batch().await });
    eventually(15, "both calls in flight", async || {
        server.per_key_calls().len() == 2
    })
    .await;
    // Another claim on the one (a release bumps the version as a claim
    // does); the producer's own rollback of the other.
    let m = message(&app, taken_over).await;
    let moved = app
        .store()
        .release_verifies(&[(m.id, m.version)], std::time::Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(moved, 1);
    let (status, _) = app
        .rollback(Some(&token), &decision_body("orders", "decided"))
        .await;
    assert_eq!(status, 200);
    server.open_gate();

    let mut outcomes = round.await.unwrap().unwrap().outcomes;
    outcomes.sort_by_key(|o| *o != Outcome::Committed);
    assert_eq!(outcomes, vec![Outcome::Committed, Outcome::Lost]);
    let m = message(&app, taken_over).await;
    assert_eq!(m.status, MessageStatus::Committed, "{m:?}");
    assert_eq!(m.verify_attempts, 1, "one call, one attempt: {m:?}");
    assert_eq!(
        listener.committed.lock().unwrap().clone(),
        vec![m],
        "the commit is handed to the forwarder as stored"
    );
    let d = message(&app, decided).await;
    assert_eq!(
        d.status,
        MessageStatus::RolledBack,
        "the producer's own decision stands"
    );
    assert_eq!(d.verify_attempts, 0);
    app.finish().await;
}

#[tokio::test]
async fn a_rollback_answer_rolls_back_through_the_running_service() {
    let app = TestApp::spawn(FAST).await;
    let server = CheckServer::start().await;
    let token = register(&app, "orders", &server, json!({})).await;
    // Scripted before prepare: with no first-check delay the call may come at once.
    server.script("o-2", Reply::Decide("rollback"));
    let id = prepare(&app, &token, "orders", "o-2").await;

    eventually(10, "rolled back by check-back", async || {
        message(&app, id).await.status == MessageStatus::RolledBack
    })
    .await;
    let m = message(&app, id).await;
    assert_eq!(m.send_status, None);
    assert_eq!(server.calls("o-2"), 1);
    assert_eq!(server.bad_signatures(), 0);
    // A late commit of a rolled-back message is a conflict, never a change.
    let (status, _) = app
        .commit(Some(&token), &decision_body("orders", "o-2"))
        .await;
    assert_eq!(status, 409);
    app.finish().await;
}

#[tokio::test]
async fn unknown_forever_ends_in_verify_failed_after_exactly_max_attempts_with_one_alert() {
    let (app, sink) = fast_and_alerting().await;
    let server = CheckServer::start().await;
    let token = register(&app, "orders", &server, json!({"max_verify_attempts": 3})).await;
    let id = prepare(&app, &token, "orders", "o-3").await;

    eventually(10, "VERIFY_FAILED", async || {
        message(&app, id).await.status == MessageStatus::VerifyFailed
    })
    .await;
    eventually(5, "the alert webhook call", async || {
        !sink.alerts().is_empty()
    })
    .await;
    // Many verifier rounds later nothing more has happened.
    app.after_rounds("trustmsg_verify_rounds_total", 10).await;
    assert_eq!(server.attempts("o-3"), vec![1, 2, 3]);
    let alerts = sink.alerts();
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert_eq!(alerts[0]["kind"], "verify_failed");
    assert_eq!(alerts[0]["message_id"], id);
    assert_eq!(alerts[0]["attempts"], 3);
    let m = message(&app, id).await;
    assert_eq!(m.verify_attempts, 3);
    assert!(m.send_status.is_none(), "nothing is decided by default");
    let err = m.last_error.unwrap();
    assert!(err.contains("3/3") && err.contains("unknown"), "{err}");

    // A late producer commit is accepted and audited.
    let (status, view) = app
        .commit(Some(&token), &decision_body("orders", "o-3"))
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["status"], "COMMITTED");
    let audit = app.store().audit_trail(id).await.unwrap();
    let steps: Vec<_> = audit
        .iter()
        .map(|a| {
            (
                a.actor.clone(),
                a.from_status.clone().unwrap_or_default(),
                a.to_status.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        steps[steps.len() - 2..],
        [
            (
                "verifier".to_string(),
                "PREPARED".to_string(),
                "VERIFY_FAILED".to_string()
            ),
            (
                "producer:orders".to_string(),
                "VERIFY_FAILED".to_string(),
                "COMMITTED".to_string()
            ),
        ]
    );
    app.finish().await;
}

#[tokio::test]
async fn the_endpoint_verifies_the_signature_and_a_wrong_secret_decides_nothing() {
    let app = TestApp::spawn(&["--no-verifier"]).await;
    let server = CheckServer::start().await;
    let token = register(&app, "orders", &server, json!({})).await;
    // Scripted before prepare: with no first-check delay the call may come at once.
    server.script("o-4", Reply::Decide("commit"));
    let id = prepare(&app, &token, "orders", "o-4").await;
    let mut cfg = stepped_config();
    cfg.backoff.base = std::time::Duration::from_millis(1);
    let verifier = stepped_verifier(
        &app,
        AddressPolicy::default(),
        Arc::new(RecordingListener::default()),
        cfg,
    );

    // The endpoint holds another secret: it refuses, and nothing is decided.
    server.set_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
    let report = verifier.process_batch().await.unwrap();
    assert_eq!(report.outcomes, vec![Outcome::Rescheduled]);
    assert_eq!(server.bad_signatures(), 1);
    let m = message(&app, id).await;
    assert_eq!(m.status, MessageStatus::Prepared);
    assert!(m.last_error.unwrap().contains("401"));

    // With the shared secret the same endpoint accepts the call.
    let (_, producer) = app
        .post(
            "/v1/producers/orders/reveal-signing-secret",
            Some(trustmsg_tests::ADMIN_TOKEN),
            &serde_json::Value::Null,
        )
        .await;
    server.set_secret(producer["signing_secret"].as_str().unwrap());
    eventually(5, "the retry", async || {
        verifier.process_batch().await.unwrap().claimed > 0
    })
    .await;
    assert_eq!(message(&app, id).await.status, MessageStatus::Committed);
    assert_eq!(server.attempts("o-4"), vec![2]);
    app.finish().await;
}
