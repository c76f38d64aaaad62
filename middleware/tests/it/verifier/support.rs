//! What only the verifier tests need on top of the kit: producers registered
//! against a `CheckServer`, a verifier the test steps itself, a commit
//! listener that records what it is handed, and fast verifier flags.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use trustmsg::backoff::Backoff;
use trustmsg::handoff::CommitListener;
use trustmsg::net::address_policy::AddressPolicy;
use trustmsg::registry::Registry;
use trustmsg::store::{Message, VerifyLease};
use trustmsg::verifier::{Verifier, VerifierConfig};
use trustmsg_tests::{prepare_body, AlertSink, CheckServer, TestApp};
use trustmsg_verify_api::MessageStatus;

/// Records every commit handed to the forwarder.
#[derive(Default)]
pub(crate) struct RecordingListener {
    pub(crate) committed: Mutex<Vec<Message>>,
}

impl CommitListener for RecordingListener {
    fn committed(&self, message: Message) {
        self.committed.lock().unwrap().push(message);
    }
}

/// Registers a producer pointing at `server` and tells the server its secret.
/// Returns the producer's token.
pub(crate) async fn register(
    app: &TestApp,
    biz_id: &str,
    server: &CheckServer,
    extra: Value,
) -> String {
    let mut settings = json!({"verify_url": server.url(), "first_verify_after_ms": 0});
    for (k, v) in extra.as_object().unwrap() {
        settings[k] = v.clone();
    }
    let (status, body) = app.put_producer(biz_id, &settings).await;
    assert_eq!(status, 201, "register {biz_id}: {body}");
    server.set_secret(body["signing_secret"].as_str().unwrap());
    body["token"].as_str().unwrap().to_string()
}

/// Prepares a message and returns its id.
pub(crate) async fn prepare(app: &TestApp, token: &str, biz_id: &str, key: &str) -> u64 {
    let (status, body) = app.prepare(Some(token), &prepare_body(biz_id, key)).await;
    assert_eq!(status, 201, "prepare {key}: {body}");
    body["id"].as_u64().unwrap()
}

/// The message's row, straight from the store.
pub(crate) async fn message(app: &TestApp, id: u64) -> Message {
    app.store()
        .find_message_by_id(id)
        .await
        .unwrap()
        .expect("message exists")
}

/// Whether every message in `ids` has `status`.
pub(crate) async fn all_have_status(app: &TestApp, ids: &[u64], status: MessageStatus) -> bool {
    for id in ids {
        if message(app, *id).await.status != status {
            return false;
        }
    }
    true
}

/// Settings for a stepped verifier: small delays, generous limits.
pub(crate) fn stepped_config() -> VerifierConfig {
    VerifierConfig {
        interval: Duration::from_millis(20),
        batch: 64,
        // A margin long enough that no queued row is ever given back for
        // lack of time in a stepped test.
        lease: VerifyLease {
            margin: Duration::from_secs(30),
            max_timeout: Duration::from_secs(30),
        },
        concurrency: 64,
        concurrency_per_producer: 64,
        backoff: Backoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(10),
        },
        default_max_attempts: 5,
        send_lease: Duration::from_secs(60),
        shutdown_grace: Duration::from_secs(5),
        statement_timeout: Duration::from_secs(5),
    }
}

/// A verifier over the app's store, stepped by the test with `process_batch`.
pub(crate) fn stepped_verifier(
    app: &TestApp,
    policy: AddressPolicy,
    commits: Arc<dyn CommitListener>,
    cfg: VerifierConfig,
) -> Verifier {
    Verifier::new(
        app.store().clone(),
        Registry::new(app.store().clone(), Duration::from_secs(60)),
        Arc::new(policy),
        commits,
        cfg,
    )
}

/// A stepped verifier with the default address policy and
/// [`stepped_config`], and the listener that records what it commits.
pub(crate) fn recording_verifier(app: &TestApp) -> (Verifier, Arc<RecordingListener>) {
    let listener = Arc::new(RecordingListener::default());
    let verifier = stepped_verifier(
        app,
        AddressPolicy::default(),
        listener.clone(),
        stepped_config(),
    );
    (verifier, listener)
}

/// A producer's settings with its first check `ms` after a prepare.
pub(crate) fn first_check_after_ms(ms: u64) -> Value {
    json!({ "first_verify_after_ms": ms })
}

/// A service whose own verifier runs fast ([`FAST`]) and whose alerts go to
/// a sink of their own.
pub(crate) async fn fast_and_alerting() -> (TestApp, AlertSink) {
    let sink = AlertSink::start().await;
    let webhook = sink.url();
    let app = TestApp::spawn(&[FAST, &["--alert-webhook", &webhook]].concat()).await;
    (app, sink)
}

/// [`FAST`], with 127.0.0.2 denied to check-back and `canary.test`
/// resolving to it, and the producer cache short enough that a
/// re-registration is seen at once.
pub(crate) fn fast_denying_the_canary() -> Vec<&'static str> {
    let mut flags = FAST.to_vec();
    flags.extend([
        "--verify-deny-cidr",
        "127.0.0.2/32",
        "--verify-resolve",
        "canary.test=127.0.0.2",
        "--producer-cache-ttl",
        "50ms",
    ]);
    flags
}

/// Flags for a service whose own verifier runs fast.
pub(crate) const FAST: &[&str] = &[
    "--verify-interval",
    "20ms",
    "--verify-backoff-base",
    "20ms",
    "--verify-backoff-max",
    "100ms",
    "--first-verify-after",
    "0s",
];
