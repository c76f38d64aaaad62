//! Garbage answers never decide anything: each is a failed attempt with its
//! reason stored, and the message stays PREPARED.

use std::time::Duration;

use serde_json::json;
use trustmsg::verifier::Outcome;
use trustmsg_tests::{CheckServer, Reply, TestApp};
use trustmsg_verify_api::MessageStatus;

use super::support::*;

#[tokio::test]
async fn garbage_answers_never_decide_and_each_leaves_a_stored_reason() {
    let app = TestApp::spawn(&["--no-verifier"]).await;
    let server = CheckServer::start().await;
    // Another server a redirect points to: it must never be called.
    let elsewhere = CheckServer::start().await;
    elsewhere.default_reply(Reply::Decide("commit"));
    let token = register(&app, "orders", &server, json!({"verify_timeout_ms": 500})).await;
    elsewhere.set_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");

    let cases: Vec<(&str, Reply, &str)> = vec![
        ("html", Reply::Html, "not {\"message_id\""),
        ("empty", Reply::Empty, "empty body"),
        ("wrong-id", Reply::WrongId, "answer is for message"),
        ("word", Reply::Word("yes"), "unknown variant `yes`"),
        (
            "redirect",
            Reply::Redirect(elsewhere.url()),
            "redirect (HTTP 307 Temporary Redirect)",
        ),
        ("status-500", Reply::Status(500), "HTTP 500"),
        (
            "hang",
            Reply::Hang(Duration::from_secs(20)),
            "no complete answer within 500 ms",
        ),
        ("huge", Reply::Huge, "over the 65536-byte limit"),
        ("utf8", Reply::InvalidUtf8, "not valid UTF-8"),
    ];
    let mut ids = Vec::new();
    for (key, reply, _) in &cases {
        server.script(key, reply.clone());
        ids.push(prepare(&app, &token, "orders", key).await);
    }
    let (verifier, _) = recording_verifier(&app);

    let report = verifier.process_batch().await.unwrap();
    assert_eq!(report.claimed, cases.len());
    assert_eq!(
        report.count(Outcome::Rescheduled),
        cases.len(),
        "{report:?}"
    );

    for ((key, _, reason), id) in cases.iter().zip(&ids) {
        let m = message(&app, *id).await;
        assert_eq!(m.status, MessageStatus::Prepared, "{key} decided something");
        assert_eq!(m.verify_attempts, 1, "{key}");
        let err = m.last_error.unwrap_or_default();
        assert!(err.contains(reason), "{key}: {err:?} lacks {reason:?}");
        assert!(err.starts_with("check-back 1/"), "{key}: {err}");
        assert_eq!(server.calls(key), 1, "{key}");
    }
    assert_eq!(server.bad_signatures(), 0);
    assert_eq!(elsewhere.total(), 0, "a redirect was followed");
    // The reader hung up after 64 KiB: the 50 MiB answer was never produced
    // in full (socket buffers take a few MiB at most).
    assert!(
        server.huge_chunks_sent() < 50,
        "the whole 50 MiB answer was read ({} MiB sent)",
        server.huge_chunks_sent()
    );
    app.finish().await;
}

#[tokio::test]
async fn an_unregistered_producer_counts_as_a_failed_attempt() {
    let app = TestApp::spawn(&["--no-verifier"]).await;
    let server = CheckServer::start().await;
    let token = register(&app, "orders", &server, json!({})).await;
    let id = prepare(&app, &token, "orders", "o-1").await;
    let (status, _) = app
        .http
        .delete(app.url("/v1/producers/orders"))
        .bearer_auth(trustmsg_tests::ADMIN_TOKEN)
        .send()
        .await
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!(status, 204);
    let (verifier, _) = recording_verifier(&app);
    let report = verifier.process_batch().await.unwrap();
    assert_eq!(report.outcomes, vec![Outcome::Rescheduled]);
    let m = message(&app, id).await;
    assert_eq!(m.status, MessageStatus::Prepared);
    assert!(m.last_error.unwrap().contains("not registered"));
    assert_eq!(server.total(), 0);
    app.finish().await;
}
