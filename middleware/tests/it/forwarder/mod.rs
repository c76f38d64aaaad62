//! Forwarder tests: the real service on port 0 over a fresh MariaDB database,
//! publishing to librdkafka's mock cluster; every assertion about Kafka reads
//! the topic back.

mod broker_restart;
mod claims;
mod delivery;
mod faults;
mod frozen_db;
mod handoff;
mod record_size;
mod shutdown;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use trustmsg::store::Message;
use trustmsg_tests::flags::flags;
use trustmsg_tests::{TestApp, FAST_SEND};

pub(crate) use trustmsg_tests::flags::{refs, set_flag};

/// Flags for an instance forwarding to `bootstrap` with fast sends
/// ([`FAST_SEND`]) and no check-back for an hour.
pub(crate) fn kafka_flags(bootstrap: &str) -> Vec<String> {
    flags(&[
        &["--kafka-brokers", bootstrap],
        FAST_SEND,
        &["--first-verify-after", "1h"],
    ])
}

/// Prepares and commits (or only prepares, or rolls back) one message; returns its id.
pub(crate) async fn prepare(app: &TestApp, token: &str, body: Value) -> u64 {
    let (status, view) = app.prepare(Some(token), &body).await;
    assert_eq!(status, 201, "prepare: {view}");
    view["id"].as_u64().unwrap()
}

pub(crate) async fn decide(app: &TestApp, token: &str, biz_id: &str, key: &str, commit: bool) {
    let body = json!({"biz_id": biz_id, "message_key": key});
    let (status, view) = if commit {
        app.commit(Some(token), &body).await
    } else {
        app.rollback(Some(token), &body).await
    };
    assert_eq!(status, 200, "commit {commit}: {view}");
}

pub(crate) async fn prepare_and_commit(app: &TestApp, token: &str, body: Value) -> u64 {
    let biz = body["biz_id"].as_str().unwrap().to_string();
    let key = body["message_key"].as_str().unwrap().to_string();
    let id = prepare(app, token, body).await;
    decide(app, token, &biz, &key, true).await;
    id
}

/// A simple message body on `topic`.
pub(crate) fn body(biz_id: &str, key: &str, topic: &str) -> Value {
    json!({
        "biz_id": biz_id,
        "message_key": key,
        "topic": topic,
        "key": format!("k-{key}"),
        "payload": format!("payload of {key}"),
    })
}

/// Polls the row until `done` holds, failing after `deadline`.
pub(crate) async fn wait_for_row(
    app: &TestApp,
    id: u64,
    deadline: Duration,
    what: &str,
    done: impl Fn(&Message) -> bool,
) -> Message {
    let start = Instant::now();
    loop {
        let m = app
            .store()
            .find_message_by_id(id)
            .await
            .unwrap()
            .expect("row exists");
        if done(&m) {
            return m;
        }
        assert!(
            start.elapsed() < deadline,
            "timed out waiting for message {id} to be {what}: {m:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
