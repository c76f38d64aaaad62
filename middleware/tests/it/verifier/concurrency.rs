//! Several instances and several producers at once.

use std::collections::BTreeSet;
use std::time::Duration;

use trustmsg::store::Message;

use serde_json::json;
use trustmsg_tests::{eventually, CheckServer, Reply, TestApp};
use trustmsg_verify_api::MessageStatus;

use super::support::*;

#[tokio::test]
async fn two_instances_on_one_database_never_check_a_message_twice_in_one_round() {
    let flags = [
        "--verify-interval",
        "10ms",
        "--verify-batch",
        "4",
        "--verify-backoff-base",
        "1h",
        "--first-verify-after",
        "0s",
    ];
    let first = TestApp::spawn(&flags).await;
    let shared = first.db.share();
    let second = TestApp::spawn_on(shared, &flags).await;
    let server = CheckServer::start().await;
    server.default_reply(Reply::SlowUnknown(Duration::from_millis(30)));
    let token = register(&first, "orders", &server, json!({})).await;
    const N: usize = 40;
    let mut ids = Vec::new();
    for i in 0..N {
        ids.push(prepare(&first, &token, "orders", &format!("o-{i}")).await);
    }

    eventually(20, "every message checked", async || {
        server.per_key_calls().len() == N
    })
    .await;
    // Both instances keep polling (about five rounds each); nothing is due
    // again for an hour.
    first.after_rounds("trustmsg_verify_rounds_total", 10).await;
    let calls = server.per_key_calls();
    let twice: Vec<_> = calls.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "checked more than once: {twice:?}");
    for id in ids {
        assert_eq!(message(&first, id).await.verify_attempts, 1);
    }
    assert_eq!(server.bad_signatures(), 0);
    second.app.stop().await.unwrap();
    first.finish().await;
}

#[tokio::test]
async fn a_slow_producer_is_held_to_its_share_and_cannot_starve_the_others() {
    let app = TestApp::spawn(&[
        "--verify-interval",
        "20ms",
        "--verify-concurrency",
        "8",
        "--verify-concurrency-per-producer",
        "2",
        "--first-verify-after",
        "0s",
        "--shutdown-grace",
        "1s",
    ])
    .await;
    let slow = CheckServer::start().await;
    slow.default_reply(Reply::GatedCommit);
    let fast = CheckServer::start().await;
    fast.default_reply(Reply::Decide("commit"));
    let slow_token = register(&app, "slow", &slow, json!({"verify_timeout_ms": 60000})).await;
    let fast_token = register(&app, "fast", &fast, json!({})).await;
    let mut slow_ids = Vec::new();
    for i in 0..12 {
        slow_ids.push(prepare(&app, &slow_token, "slow", &format!("s-{i}")).await);
    }
    let mut fast_ids = Vec::new();
    for i in 0..6 {
        fast_ids.push(prepare(&app, &fast_token, "fast", &format!("f-{i}")).await);
    }

    // The slow producer holds every call it gets until the gate opens; the
    // fast one must be served meanwhile.
    eventually(15, "the fast producer's messages committed", async || {
        all_have_status(&app, &fast_ids, MessageStatus::Committed).await
    })
    .await;
    assert!(slow.max_in_flight() <= 2, "{}", slow.max_in_flight());
    assert!(slow.max_in_flight() >= 1);

    slow.open_gate();
    eventually(15, "the slow producer's messages committed", async || {
        all_have_status(&app, &slow_ids, MessageStatus::Committed).await
    })
    .await;
    assert!(slow.max_in_flight() <= 2, "{}", slow.max_in_flight());
    app.finish().await;
}

/// Prepares `n` messages for `biz_id` and returns their ids.
async fn prepare_many(app: &TestApp, token: &str, biz_id: &str, n: usize) -> Vec<u64> {
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(prepare(app, token, biz_id, &format!("{biz_id}-{i}")).await);
    }
    ids
}

#[tokio::test]
async fn a_producer_answering_quickly_gets_more_calls_and_a_slow_one_does_not() {
    let app = TestApp::spawn(&[
        "--verify-interval",
        "20ms",
        "--verify-concurrency",
        "64",
        "--verify-concurrency-per-producer",
        "24",
        "--first-verify-after",
        "0s",
        "--verify-backoff-base",
        "1h",
    ])
    .await;
    // Answers in 150 ms, well within its 5 s timeout: its limit grows from
    // 8. (Long enough for its calls to overlap: with answers in a few ms, a
    // loaded machine claims rows slower than they are answered, and fewer
    // than 8 are ever in flight whatever the limit.)
    let fast = CheckServer::start().await;
    fast.default_reply(Reply::SlowUnknown(Duration::from_millis(150)));
    // Answers commit in 120 ms, more than half its 200 ms timeout: a sign of
    // overload, so its limit halves from 8 instead of growing.
    let slow = CheckServer::start().await;
    slow.default_reply(Reply::Hang(Duration::from_millis(120)));
    let fast_token = register(&app, "fast", &fast, json!({"verify_timeout_ms": 5000})).await;
    let slow_token = register(&app, "slow", &slow, json!({"verify_timeout_ms": 200})).await;
    let fast_ids = prepare_many(&app, &fast_token, "fast", 200).await;
    let slow_ids = prepare_many(&app, &slow_token, "slow", 40).await;

    eventually(30, "every message checked once", async || {
        fast.per_key_calls().len() == fast_ids.len() && slow.per_key_calls().len() == slow_ids.len()
    })
    .await;
    assert!(
        fast.max_in_flight() > 8 && fast.max_in_flight() <= 24,
        "the quick producer's calls in flight: {}",
        fast.max_in_flight()
    );
    assert!(
        slow.max_in_flight() <= 8,
        "the slow producer's calls in flight: {}",
        slow.max_in_flight()
    );
    for id in &fast_ids {
        let m = message(&app, *id).await;
        assert_eq!(m.status, MessageStatus::Prepared);
        assert_eq!(m.verify_attempts, 1, "checked once, then backed off");
    }
    eventually(10, "the slow producer's messages committed", async || {
        all_have_status(&app, &slow_ids, MessageStatus::Committed).await
    })
    .await;
    app.finish().await;
}

/// Flags for a service whose verifier makes one call at a time per producer,
/// with rows due at once.
const ONE_CALL_PER_PRODUCER: &[&str] = &[
    "--verify-interval",
    "20ms",
    "--verify-concurrency",
    "8",
    "--verify-concurrency-per-producer",
    "1",
    "--first-verify-after",
    "0s",
];

/// A service started with [`ONE_CALL_PER_PRODUCER`] and `flags`, and a
/// producer "held" (check-back timeout `timeout_ms`) whose gated endpoint
/// holds every call open, with `n` messages prepared. Returns once the first
/// call is held: the service, the endpoint, the message ids and the id of
/// the message that call asks about.
async fn held_producer(
    flags: &[&str],
    timeout_ms: u64,
    n: usize,
) -> (TestApp, CheckServer, Vec<u64>, u64) {
    let app = TestApp::spawn(&[ONE_CALL_PER_PRODUCER, flags].concat()).await;
    let server = CheckServer::start().await;
    server.default_reply(Reply::GatedCommit);
    let token = register(
        &app,
        "held",
        &server,
        json!({"verify_timeout_ms": timeout_ms}),
    )
    .await;
    let ids = prepare_many(&app, &token, "held", n).await;
    eventually(15, "the first check-back call", async || {
        server.per_key_calls().len() == 1
    })
    .await;
    let called_key = server.per_key_calls().into_keys().next().unwrap();
    let called = app
        .store()
        .find_message("held", &called_key)
        .await
        .unwrap()
        .expect("the called message exists")
        .id;
    (app, server, ids, called)
}

#[tokio::test]
async fn rows_beyond_a_producers_limit_wait_in_its_queue_and_go_back_at_shutdown() {
    // Holds its one call until the end: the producer stays at its limit.
    let (app, server, ids, called) = held_producer(&["--shutdown-grace", "200ms"], 60_000, 4).await;

    // The rows under a claim (60 s timeout + 5 s margin: a due time more
    // than 30 s ahead) other than the called one, with the claim's version.
    let held = async || {
        let soon = app.store().now().await.unwrap() + chrono::Duration::seconds(30);
        let mut held = BTreeSet::new();
        for id in ids.iter().filter(|id| **id != called) {
            let m = message(&app, *id).await;
            if m.next_verify_at.is_some_and(|t| t > soon) {
                held.insert((m.id, m.version));
            }
        }
        held
    };
    // A row given back is claimed again next round (a new version); the
    // queued row keeps its one claim, round after round. The claim that
    // queues a row also holds (for a moment) whatever it then gives back, so
    // once any row is held the queued one is.
    eventually(15, "a claimed row besides the called one", async || {
        !held().await.is_empty()
    })
    .await;
    let before = held().await;
    app.after_rounds("trustmsg_verify_rounds_total", 5).await;
    let after = held().await;
    let queued: Vec<_> = before.intersection(&after).collect();
    assert_eq!(
        queued.len(),
        1,
        "exactly one row (the producer's limit) waits in the queue: {before:?} then {after:?}"
    );
    let (queued_id, queued_version) = *queued[0];
    assert_eq!(server.per_key_calls().len(), 1, "no call beyond the limit");

    let store = app.store().clone();
    app.app.stop().await.expect("clean shutdown");
    let now = store.now().await.unwrap();
    let m = store.find_message_by_id(queued_id).await.unwrap().unwrap();
    assert!(
        m.next_verify_at
            .is_some_and(|t| t <= now + chrono::Duration::seconds(1)),
        "the queued row was given back at shutdown, due again at once: {m:?}"
    );
    assert_eq!(m.version, queued_version + 1);
    assert_eq!(m.verify_attempts, 0, "a row given back was not checked");
    assert_eq!(m.status, MessageStatus::Prepared);
    server.open_gate();
    app.db.drop_db().await;
}

/// Waits for both `ids` to be committed; returns the row `queued` then.
async fn once_both_committed(app: &TestApp, ids: &[u64], queued: u64) -> Message {
    eventually(15, "both rows committed", async || {
        all_have_status(app, ids, MessageStatus::Committed).await
    })
    .await;
    message(app, queued).await
}

/// A row queued for its producer's slot is held for its own producer's call
/// plus the margin, not for the longest call any producer may register, and
/// starts on that claim when a slot frees up within the first half of the
/// margin.
#[tokio::test]
async fn a_queued_row_is_held_for_its_own_producers_call_and_starts_on_that_claim() {
    // 3 s timeout + 5 s margin (the default), with calls of up to 2 min
    // allowed (the default --verify-timeout-max).
    let (app, server, ids, called) = held_producer(&[], 3000, 2).await;
    let queued = *ids.iter().find(|id| **id != called).unwrap();
    let mut claim = None;
    eventually(15, "the other row claimed and queued", async || {
        let now = app.store().now().await.unwrap();
        let m = message(&app, queued).await;
        claim = m
            .next_verify_at
            .filter(|t| *t > now + chrono::Duration::seconds(2))
            .map(|t| (m.version, t - now));
        claim.is_some()
    })
    .await;
    let (queued_version, left) = claim.unwrap();
    assert!(
        left <= chrono::Duration::seconds(8),
        "claimed for its producer's 3 s call plus the 5 s margin, not longer: {left}"
    );
    // It waits a while for the producer's one slot, less than the half of
    // the margin it may wait.
    tokio::time::sleep(Duration::from_secs(1)).await;
    server.open_gate();
    let m = once_both_committed(&app, &ids, queued).await;
    assert_eq!(
        m.version,
        queued_version + 1,
        "called and committed on the claim it was queued with: {m:?}"
    );
    assert_eq!(m.verify_attempts, 1, "{m:?}");
    let calls = server.per_key_calls();
    assert!(
        calls.len() == 2 && calls.values().all(|n| *n == 1),
        "each row called once: {calls:?}"
    );
    app.finish().await;
}

/// A row queued for its producer's slot keeps its claim while it waits; once
/// that claim could no longer outlast its call (its producer's timeout plus
/// half the margin), the row is given back and claimed anew before it is
/// called, never called on the old claim.
#[tokio::test]
async fn a_queued_row_whose_claim_grew_too_old_is_given_back_and_claimed_anew_before_its_call() {
    // A call may start up to 1 s after its claim: 3 s timeout + 2 s margin,
    // half of which is left for the writes after the call.
    let (app, server, ids, called) = held_producer(&["--verify-lease-margin", "2s"], 3000, 2).await;
    let queued = *ids.iter().find(|id| **id != called).unwrap();
    // The other row waits in the queue under a claim (due far ahead).
    let mut claim = None;
    eventually(15, "the other row claimed and queued", async || {
        let soon = app.store().now().await.unwrap() + chrono::Duration::seconds(2);
        let m = message(&app, queued).await;
        claim = m
            .next_verify_at
            .is_some_and(|t| t > soon)
            .then_some(m.version);
        claim.is_some()
    })
    .await;
    let queued_version = claim.unwrap();
    // Past the second a queued claim is good for, the call ends.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        message(&app, queued).await.version,
        queued_version,
        "still queued"
    );
    server.open_gate();

    let m = once_both_committed(&app, &ids, queued).await;
    assert_eq!(
        m.version,
        queued_version + 3,
        "given back (+1), claimed anew (+1), then committed (+1), not committed on the old claim: {m:?}"
    );
    assert_eq!(m.verify_attempts, 1, "called once: {m:?}");
    let calls = server.per_key_calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(
        calls.values().all(|n| *n == 1),
        "each row called once: {calls:?}"
    );
    app.finish().await;
}
