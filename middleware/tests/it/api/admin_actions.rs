//! The operator's actions: resolve, re-verify, redeliver. Each needs a
//! reason and the admin token, is audited with the operator's name, and is
//! a guarded transition: whoever changes the message first wins, the other
//! gets 409 and changes nothing.

use std::time::Duration;

use serde_json::{json, Value};
use trustmsg_tests::kafka::{MockKafka, RDKafkaApiKey, RDKafkaRespErr, TopicReader};
use trustmsg_tests::{CheckServer, Reply, TestApp, ADMIN_TOKEN, UNREACHABLE_VERIFY_URL};
use trustmsg_verify_api::{MessageStatus, SendStatus};

use crate::forwarder::{body, kafka_flags, prepare, prepare_and_commit, refs, wait_for_row};

/// POSTs an admin action as operator `who`; returns status and body.
async fn act(app: &TestApp, who: &str, id: u64, action: &str, body: Value) -> (u16, Value) {
    let res = app
        .http
        .post(app.url(&format!("/v1/admin/messages/{id}/{action}")))
        .bearer_auth(ADMIN_TOKEN)
        .header("x-trustmsg-operator", who)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// Fast check-back: first check at once, one attempt, then VERIFY_FAILED.
fn fast_verify(flags: &mut Vec<String>) {
    flags.retain(|f| f != "--first-verify-after" && f != "1h");
    flags.extend(
        crate::flags::CHECK_AT_ONCE
            .iter()
            .chain(&[
                "--verify-backoff-base",
                "20ms",
                "--verify-backoff-max",
                "50ms",
            ])
            .map(|f| f.to_string()),
    );
}

/// `id`'s audit trail as "<actor> <action>" lines.
async fn actions_audited(app: &TestApp, id: u64) -> Vec<String> {
    let trail = app.store().audit_trail(id).await.unwrap();
    trail
        .iter()
        .map(|a| format!("{} {}", a.actor, a.action))
        .collect()
}

async fn verify_failed(app: &TestApp, id: u64) {
    wait_for_row(app, id, Duration::from_secs(20), "VERIFY_FAILED", |m| {
        m.status == MessageStatus::VerifyFailed
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolving_a_verify_failed_message_commits_it_and_kafka_gets_it_exactly_once() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 1);
    let mut flags = kafka_flags(kafka.bootstrap());
    fast_verify(&mut flags);
    let app = TestApp::spawn(&refs(&flags)).await;
    let token = app.register_giving_up_after_one_check("shop").await;
    let mut reader = TopicReader::new(kafka.bootstrap(), "orders");
    let id = prepare(&app, &token, body("shop", "stuck", "orders")).await;
    verify_failed(&app, id).await;

    // Refused: no reason, a bad decision, a producer's token, a bad name.
    let (status, e) = act(&app, "alice", id, "resolve", json!({"decision": "commit"})).await;
    assert_eq!(
        (status, &e["error"]["code"]),
        (400, &json!("invalid_reason")),
        "{e}"
    );
    let (status, e) = act(
        &app,
        "alice",
        id,
        "resolve",
        json!({"decision": "yes", "reason": "r"}),
    )
    .await;
    assert_eq!(status, 400, "{e}");
    let (status, e) = act(
        &app,
        &"x".repeat(65),
        id,
        "resolve",
        json!({"decision": "commit", "reason": "r"}),
    )
    .await;
    assert_eq!(
        (status, &e["error"]["code"]),
        (400, &json!("invalid_operator")),
        "{e}"
    );
    let res = app
        .http
        .post(app.url(&format!("/v1/admin/messages/{id}/resolve")))
        .bearer_auth(&token)
        .json(&json!({"decision": "commit", "reason": "r"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert_eq!(
        app.store()
            .find_message_by_id(id)
            .await
            .unwrap()
            .unwrap()
            .status,
        MessageStatus::VerifyFailed,
        "nothing changed"
    );

    let (status, view) = act(
        &app,
        "alice",
        id,
        "resolve",
        json!({"decision": "commit", "reason": "the order is in the shop's database"}),
    )
    .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["status"], "COMMITTED");
    reader
        .read_until(Duration::from_secs(20), "the resolved record", |rs| {
            rs.iter().any(|r| r.message_id == id)
        })
        .await;
    wait_for_row(&app, id, Duration::from_secs(20), "SENT", |m| {
        m.send_status == Some(SendStatus::Sent)
    })
    .await;
    reader.read_for(Duration::from_secs(1)).await;
    assert_eq!(reader.id_counts().get(&id), Some(&1), "exactly once");

    let (status, e) = act(
        &app,
        "bob",
        id,
        "resolve",
        json!({"decision": "rollback", "reason": "r"}),
    )
    .await;
    assert_eq!(
        (status, &e["error"]["code"]),
        (409, &json!("wrong_state")),
        "{e}"
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("COMMITTED"),
        "{e}"
    );
    let trail = app.store().audit_trail(id).await.unwrap();
    let commit = trail
        .iter()
        .find(|a| a.action == "commit")
        .expect("audited");
    assert_eq!(commit.actor, "operator:alice");
    assert_eq!(commit.reason, "the order is in the shop's database");
    assert_eq!(commit.from_status.as_deref(), Some("VERIFY_FAILED"));
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reverified_message_is_checked_again_and_the_new_answer_decides_it() {
    let server = CheckServer::start().await;
    let mut flags: Vec<String> = vec!["--first-verify-after".into(), "1h".into()];
    fast_verify(&mut flags);
    let app = TestApp::spawn(&refs(&flags)).await;
    let (status, reg) = app
        .put_producer("shop", &json!({"verify_url": server.url(), "max_verify_attempts": 2, "first_verify_after_ms": 0}))
        .await;
    assert_eq!(status, 201, "{reg}");
    server.set_secret(reg["signing_secret"].as_str().unwrap());
    server.default_reply(Reply::Decide("unknown"));
    let token = reg["token"].as_str().unwrap().to_string();
    let id = prepare(&app, &token, body("shop", "unsure", "orders")).await;
    verify_failed(&app, id).await;
    assert_eq!(server.calls("unsure"), 2);

    let (status, e) = act(&app, "alice", id, "redeliver", json!({"reason": "r"})).await;
    assert_eq!(
        (status, &e["error"]["code"]),
        (409, &json!("wrong_state")),
        "{e}"
    );
    server.script("unsure", Reply::Decide("rollback"));
    let (status, view) = act(
        &app,
        "alice",
        id,
        "reverify",
        json!({"reason": "the shop fixed its endpoint"}),
    )
    .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(
        (view["status"].clone(), view["verify_attempts"].clone()),
        (json!("PREPARED"), json!(0))
    );
    wait_for_row(
        &app,
        id,
        Duration::from_secs(20),
        "rolled back by check-back",
        |m| m.status == MessageStatus::RolledBack,
    )
    .await;
    let lines = actions_audited(&app, id).await;
    assert_eq!(
        lines,
        [
            "verifier verify_failed",
            "operator:alice reverify",
            "verifier rollback"
        ]
    );
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_failed_messages_are_redelivered_one_or_in_bulk_once_the_cause_is_fixed() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 1);
    let app = TestApp::spawn(&refs(&kafka_flags(kafka.bootstrap()))).await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    let mut reader = TopicReader::new(kafka.bootstrap(), "orders");
    let warm = prepare_and_commit(&app, &token, body("shop", "warm", "orders")).await;
    reader
        .read_until(Duration::from_secs(20), "warm-up", |rs| {
            rs.iter().any(|r| r.message_id == warm)
        })
        .await;
    kafka.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED],
    );
    let id = prepare_and_commit(&app, &token, body("shop", "refused", "orders")).await;
    wait_for_row(&app, id, Duration::from_secs(20), "SEND_FAILED", |m| {
        m.send_status == Some(SendStatus::SendFailed)
    })
    .await;

    // The ACL is fixed (no more injected errors): redeliver.
    let (status, view) = act(
        &app,
        "alice",
        id,
        "redeliver",
        json!({"reason": "ACL fixed"}),
    )
    .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(
        (view["send_status"].clone(), view["send_attempts"].clone()),
        (json!("PENDING"), json!(0))
    );
    wait_for_row(&app, id, Duration::from_secs(20), "SENT", |m| {
        m.send_status == Some(SendStatus::Sent)
    })
    .await;
    reader
        .read_until(Duration::from_secs(20), "the redelivered record", |rs| {
            rs.iter().any(|r| r.message_id == id)
        })
        .await;
    let (status, e) = act(&app, "alice", id, "redeliver", json!({"reason": "again"})).await;
    assert_eq!(status, 409, "{e}");

    // In bulk: two more refused sends of shop and one of another producer,
    // a dry run counts shop's, the real run redelivers both and leaves
    // every row the filter does not match as it was.
    let other = app.register("other", UNREACHABLE_VERIFY_URL).await;
    let mut refused = Vec::new();
    for (biz, token, key) in [
        ("shop", &token, "refused-2"),
        ("shop", &token, "refused-3"),
        ("other", &other, "refused-elsewhere"),
    ] {
        // One refusal per message: a produce request may carry both.
        kafka.request_errors(
            RDKafkaApiKey::Produce,
            &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED],
        );
        let id = prepare_and_commit(&app, token, body(biz, key, "orders")).await;
        wait_for_row(&app, id, Duration::from_secs(20), "SEND_FAILED", |m| {
            m.send_status == Some(SendStatus::SendFailed)
        })
        .await;
        refused.push(id);
    }
    let elsewhere = refused.pop().unwrap();
    let row = async |id: u64| app.store().find_message_by_id(id).await.unwrap().unwrap();
    let trail = async |id: u64| app.store().audit_trail(id).await.unwrap();
    // Not matched: another producer's SEND_FAILED row, shop's SENT rows.
    let untouched = [elsewhere, warm, id];
    let mut before = Vec::new();
    for id in untouched {
        assert_ne!(row(id).await.send_status, Some(SendStatus::Pending));
        before.push((row(id).await, trail(id).await));
    }
    let mut changed = Vec::new();
    for id in &refused {
        let m = row(*id).await;
        assert_eq!(m.send_status, Some(SendStatus::SendFailed), "{m:?}");
        changed.push(m);
    }
    let bulk = |dry_run: bool| {
        let app = &app;
        async move {
            let res = app
                .http
                .post(app.url("/v1/admin/messages/redeliver"))
                .bearer_auth(ADMIN_TOKEN)
                .json(&json!({"filter": {"biz_id": "shop"}, "reason": "ACL fixed", "dry_run": dry_run}))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200);
            res.json::<Value>().await.unwrap()
        }
    };
    assert_eq!(bulk(true).await, json!({"matched": 2, "changed": 0}));
    assert_eq!(bulk(false).await, json!({"matched": 2, "changed": 2}));
    // Each matched row moved on (its version), SEND_FAILED → PENDING by
    // the operator; whether the forwarder has sent it again yet is its own
    // time.
    for was in changed {
        let m = row(was.id).await;
        assert_eq!(m.status, MessageStatus::Committed, "{m:?}");
        assert!(m.version > was.version, "changed: {was:?} → {m:?}");
        let redelivered = trail(was.id)
            .await
            .into_iter()
            .filter(|a| a.action == "redeliver")
            .map(|a| (a.from_send_status, a.to_send_status))
            .collect::<Vec<_>>();
        assert_eq!(
            redelivered,
            [(Some("SEND_FAILED".to_string()), Some("PENDING".to_string()))],
            "{m:?}"
        );
    }
    for (id, (was, audited)) in untouched.into_iter().zip(before) {
        assert_eq!(row(id).await, was, "a row the filter does not match");
        assert_eq!(trail(id).await, audited, "a row the filter does not match");
    }
    for id in refused {
        let trail = app.store().audit_trail(id).await.unwrap();
        let redeliver = trail
            .iter()
            .find(|a| a.action == "redeliver")
            .expect("audited");
        assert_eq!(
            (redeliver.actor.as_str(), redeliver.reason.as_str()),
            ("operator:admin", "ACL fixed")
        );
    }
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolve_racing_the_producers_commit_has_exactly_one_winner() {
    let app = TestApp::spawn(&["--no-verifier"]).await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    for round in 0..10 {
        let key = format!("race-{round}");
        let id = prepare(&app, &token, body("shop", &key, "orders")).await;
        let operator = act(
            &app,
            "alice",
            id,
            "resolve",
            json!({"decision": "rollback", "reason": "r"}),
        );
        let commit = json!({"biz_id": "shop", "message_key": key});
        let producer = app.commit(Some(&token), &commit);
        let ((op_status, op), (pr_status, pr)) = tokio::join!(operator, producer);
        let m = app.store().find_message_by_id(id).await.unwrap().unwrap();
        let decisions = actions_audited(&app, id).await;
        match m.status {
            MessageStatus::RolledBack => {
                assert_eq!(op_status, 200, "{op}");
                assert_eq!(pr_status, 409, "the producer lost: {pr}");
                assert_eq!(decisions, ["operator:alice rollback"]);
            }
            MessageStatus::Committed => {
                assert_eq!(pr_status, 200, "{pr}");
                assert_eq!(op_status, 409, "the operator lost: {op}");
                assert_eq!(decisions, ["producer:shop commit"]);
            }
            other => panic!("undecided after both: {other:?}"),
        }
    }
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_reverify_counts_first_on_a_dry_run_then_changes_only_what_the_filter_matches() {
    // No verifier: a re-verified message is due at once, and nothing may
    // check it back while the test looks.
    let app = TestApp::spawn(&["--no-verifier"]).await;
    let mut tokens = Vec::new();
    for biz in ["shop", "billing"] {
        let (status, reg) = app
            .put_producer(biz, &json!({"verify_url": UNREACHABLE_VERIFY_URL, "max_verify_attempts": 1, "first_verify_after_ms": 3_600_000}))
            .await;
        assert_eq!(status, 201, "{reg}");
        tokens.push(reg["token"].as_str().unwrap().to_string());
    }
    // VERIFY_FAILED through the store's own transition.
    let mut failed = Vec::new();
    for (biz, token, key) in [
        ("shop", &tokens[0], "a"),
        ("shop", &tokens[0], "b"),
        ("billing", &tokens[1], "c"),
    ] {
        let id = prepare(&app, token, body(biz, key, "orders")).await;
        let m = app.store().find_message_by_id(id).await.unwrap().unwrap();
        let t = trustmsg::store::Transition {
            id,
            from: MessageStatus::Prepared,
            version: m.version,
            to: MessageStatus::VerifyFailed,
            send_lease: Duration::from_secs(60),
            verify_attempt: true,
            error: Some("no answer".into()),
            actor: trustmsg::store::Actor::Verifier,
            reason: "test".into(),
        };
        app.store().transition(&t).await.unwrap().unwrap();
        failed.push(id);
    }
    let bulk = |body: Value| {
        let app = &app;
        async move {
            let res = app
                .http
                .post(app.url("/v1/admin/messages/reverify"))
                .bearer_auth(ADMIN_TOKEN)
                .json(&body)
                .send()
                .await
                .unwrap();
            (res.status().as_u16(), res.json::<Value>().await.unwrap())
        }
    };
    for (bad, code) in [
        (json!({"filter": {"biz_id": "shop"}}), "invalid_reason"),
        (
            json!({"filter": {"status": "GONE"}, "reason": "r"}),
            "invalid_filter",
        ),
        (
            json!({"filter": {"limit": "5"}, "reason": "r"}),
            "invalid_filter",
        ),
        (
            json!({"filter": {"biz_id": 7}, "reason": "r"}),
            "invalid_filter",
        ),
    ] {
        let (status, e) = bulk(bad.clone()).await;
        assert_eq!(
            (status, &e["error"]["code"]),
            (400, &json!(code)),
            "{bad}: {e}"
        );
    }
    let (status, dry) =
        bulk(json!({"filter": {"biz_id": "shop"}, "reason": "endpoint fixed", "dry_run": true}))
            .await;
    assert_eq!(status, 200, "{dry}");
    assert_eq!(dry, json!({"matched": 2, "changed": 0}));
    for id in &failed {
        let m = app.store().find_message_by_id(*id).await.unwrap().unwrap();
        assert_eq!(
            m.status,
            MessageStatus::VerifyFailed,
            "a dry run changes nothing"
        );
    }
    let (status, done) =
        bulk(json!({"filter": {"biz_id": "shop"}, "reason": "endpoint fixed"})).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done, json!({"matched": 2, "changed": 2}));
    let statuses: Vec<MessageStatus> = {
        let mut v = Vec::new();
        for id in &failed {
            v.push(
                app.store()
                    .find_message_by_id(*id)
                    .await
                    .unwrap()
                    .unwrap()
                    .status,
            );
        }
        v
    };
    assert_eq!(
        statuses,
        [
            MessageStatus::Prepared,
            MessageStatus::Prepared,
            MessageStatus::VerifyFailed
        ]
    );
    let (_, none) = bulk(json!({"filter": {"status": "PREPARED"}, "reason": "r"})).await;
    assert_eq!(none, json!({"matched": 0, "changed": 0}));
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verify_failed_message_shows_each_check_back_call_with_its_status_and_error() {
    // An endpoint that answers 500, then garbage, then "unknown".
    let calls = trustmsg_tests::Counter::default();
    let seen = calls.clone();
    let endpoint = trustmsg_tests::serve(axum::Router::new().route(
        "/check",
        axum::routing::post(move |axum::Json(req): axum::Json<Value>| {
            let n = seen.bump();
            async move {
                use axum::response::IntoResponse;
                match n {
                    1 => (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response(),
                    2 => (axum::http::StatusCode::OK, "not json").into_response(),
                    _ => {
                        axum::Json(json!({"message_id": req["message_id"], "decision": "unknown"}))
                            .into_response()
                    }
                }
            }
        }),
    ))
    .await;
    let mut flags: Vec<String> = vec!["--first-verify-after".into(), "1h".into()];
    fast_verify(&mut flags);
    let app = TestApp::spawn(&refs(&flags)).await;
    let mut ids = Vec::new();
    for (biz, url, attempts) in [
        ("shop", format!("http://{endpoint}/check"), 3),
        ("gone", UNREACHABLE_VERIFY_URL.to_string(), 1),
    ] {
        let (status, reg) = app
            .put_producer(biz, &json!({"verify_url": url, "max_verify_attempts": attempts, "first_verify_after_ms": 0}))
            .await;
        assert_eq!(status, 201, "{reg}");
        let token = reg["token"].as_str().unwrap().to_string();
        let id = prepare(&app, &token, body(biz, "k", "orders")).await;
        verify_failed(&app, id).await;
        ids.push(id);
    }
    let (status, d) = app
        .get(&format!("/v1/admin/messages/{}", ids[0]), Some(ADMIN_TOKEN))
        .await;
    assert_eq!(status, 200, "{d}");
    let attempts = d["check_attempts"].as_array().unwrap();
    let summary: Vec<(u64, Value, String)> = attempts
        .iter()
        .map(|a| {
            (
                a["attempt"].as_u64().unwrap(),
                a["http_status"].clone(),
                a["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (1, json!(500), "failed".to_string()),
            (2, json!(200), "failed".to_string()),
            (3, json!(200), "unknown".to_string()),
        ]
    );
    assert!(
        attempts[0]["error"].as_str().unwrap().contains("HTTP 500"),
        "{d}"
    );
    assert!(
        attempts[1]["error"].as_str().unwrap().contains("not json"),
        "{d}"
    );
    assert_eq!(attempts[2]["error"], Value::Null);
    assert!(attempts
        .iter()
        .all(|a| a["duration_ms"].is_u64() && a["at"].is_string()));

    let (_, d) = app
        .get(&format!("/v1/admin/messages/{}", ids[1]), Some(ADMIN_TOKEN))
        .await;
    let a = &d["check_attempts"][0];
    assert_eq!(
        (a["http_status"].clone(), a["outcome"].clone()),
        (Value::Null, json!("failed"))
    );
    assert!(a["error"].as_str().unwrap().contains("connect"), "{d}");
    assert_eq!(calls.get(), 3);
    app.finish().await;
}
