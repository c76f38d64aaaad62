//! The verifier reads producers through the moka registry the API invalidates.

use serde_json::json;
use trustmsg_tests::{eventually, CheckServer, Reply, TestApp};
use trustmsg_verify_api::MessageStatus;

use super::support::*;

#[tokio::test]
async fn a_registry_update_is_seen_by_the_next_check_not_after_the_ttl() {
    let mut flags = FAST.to_vec();
    flags.extend(["--producer-cache-ttl", "1h"]);
    let app = TestApp::spawn(&flags).await;
    let old = CheckServer::start().await; // answers unknown
    let new = CheckServer::start().await;
    new.default_reply(Reply::Decide("commit"));
    let token = register(&app, "orders", &old, json!({"max_verify_attempts": 1000})).await;
    let id = prepare(&app, &token, "orders", "o-1").await;
    eventually(10, "a check at the old URL", async || old.calls("o-1") > 0).await;

    // The new endpoint knows the producer's signing secret before the
    // producer points at it: the verifier may call it at once.
    let (status, secret) = app
        .post(
            "/v1/producers/orders/reveal-signing-secret",
            Some(trustmsg_tests::ADMIN_TOKEN),
            &json!(null),
        )
        .await;
    assert_eq!(status, 200, "{secret}");
    new.set_secret(secret["signing_secret"].as_str().unwrap());
    let (status, body) = app.put_producer("orders", &json!({"verify_url": new.url(), "first_verify_after_ms": 0, "max_verify_attempts": 1000}),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // With a one-hour TTL, only the invalidation can make this happen.
    eventually(10, "committed through the new URL", async || {
        message(&app, id).await.status == MessageStatus::Committed
    })
    .await;
    assert_eq!(new.calls("o-1"), 1);
    assert_eq!(new.bad_signatures(), 0);
    let old_calls = old.calls("o-1");
    app.after_rounds("trustmsg_verify_rounds_total", 5).await;
    assert_eq!(old.calls("o-1"), old_calls, "the old URL is still called");
    app.finish().await;
}
