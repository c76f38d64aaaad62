//! The SSRF guard end to end: an address the operator denies is never
//! dialled, however the URL reaches it. 127.0.0.2 plays the forbidden
//! internal service; a canary listener there counts connections.

use std::sync::Arc;

use serde_json::json;
use trustmsg::net::address_policy::{AddressPolicy, StaticResolver};
use trustmsg::verifier::Outcome;
use trustmsg_tests::{eventually, Canary, CheckServer, Reply, TestApp};
use trustmsg_verify_api::MessageStatus;

use super::support::*;

#[tokio::test]
async fn a_denied_address_is_never_dialled_by_registration_hostname_or_redirect() {
    let canary = Canary::start(("127.0.0.2", 0)).await;
    let port = canary.addr.port();
    let app = TestApp::spawn(&fast_denying_the_canary()).await;

    // Registration refuses the address in any spelling, and a name for it.
    for url in [
        format!("http://127.0.0.2:{port}/check"),
        format!("http://[::ffff:127.0.0.2]:{port}/check"),
        format!("http://canary.test:{port}/check"),
    ] {
        let (status, body) = app
            .put_producer("evil", &json!({ "verify_url": url }))
            .await;
        assert_eq!(status, 400, "{url} was registered: {body}");
        assert_eq!(body["error"]["code"], "invalid_verify_url", "{body}");
        let msg = body["error"]["message"].as_str().unwrap();
        assert!(msg.contains("--verify-deny-cidr"), "{url}: {msg}");
    }

    // Registrations that pointed somewhere allowed and now point at the
    // canary (written before the rule, or DNS moved): refused at call time.
    let server = CheckServer::start().await;
    let pool = app.db.pool().await;
    let mut ids = Vec::new();
    for (biz, target) in [
        ("by-name", format!("http://canary.test:{port}/check")),
        ("by-ip", format!("http://127.0.0.2:{port}/check")),
    ] {
        let token = register(&app, biz, &server, json!({})).await;
        sqlx::query("UPDATE producers SET verify_url = ? WHERE biz_id = ?")
            .bind(&target)
            .bind(biz)
            .execute(&pool)
            .await
            .unwrap();
        // Give the 50 ms cache entry time to expire before the message is due.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        ids.push((biz, prepare(&app, &token, biz, "k").await));
    }
    // A producer whose endpoint redirects to the canary.
    let token = register(&app, "redirects", &server, json!({})).await;
    server.script(
        "r",
        Reply::Redirect(format!("http://127.0.0.2:{port}/check")),
    );
    ids.push(("redirects", prepare(&app, &token, "redirects", "r").await));

    for (biz, id) in &ids {
        eventually(10, &format!("{biz}: two refused attempts"), async || {
            message(&app, *id).await.verify_attempts >= 2
        })
        .await;
        let m = message(&app, *id).await;
        assert_eq!(m.status, MessageStatus::Prepared);
        let err = m.last_error.unwrap();
        let expected = match *biz {
            "by-name" => "canary.test resolves only to refused addresses",
            "by-ip" => "denied by --verify-deny-cidr",
            _ => "redirect (HTTP 307",
        };
        assert!(err.contains(expected), "{biz}: {err}");
    }
    assert_eq!(server.calls("k"), 0);
    assert!(server.calls("r") >= 2);
    assert_eq!(canary.connections(), 0, "the canary was dialled");
    pool.close().await;
    app.finish().await;
}

#[tokio::test]
async fn dns_rebinding_after_registration_is_refused_at_dial_time() {
    let app = TestApp::spawn(&[
        "--no-verifier",
        "--verify-deny-cidr",
        "127.0.0.2/32",
        "--verify-resolve",
        "rebind.test=127.0.0.1",
    ])
    .await;
    let server = CheckServer::start().await;
    let port = server.addr.port();
    // The canary listens where the name will point next, on the same port.
    let canary = Canary::start(("127.0.0.2", port)).await;
    let token = {
        let (status, body) = app.put_producer("orders", &json!({"verify_url": format!("http://rebind.test:{port}/check"), "first_verify_after_ms": 0}),
        )
        .await;
        assert_eq!(
            status, 201,
            "rebind.test resolved to 127.0.0.1 at registration: {body}"
        );
        server.set_secret(body["signing_secret"].as_str().unwrap());
        body["token"].as_str().unwrap().to_string()
    };
    let id = prepare(&app, &token, "orders", "o-1").await;

    // Now the name resolves to the denied address.
    let rebound = || {
        Arc::new(StaticResolver::new(
            [("rebind.test".to_string(), "127.0.0.2".parse().unwrap())],
            None,
        ))
    };
    let guarded = AddressPolicy::new(Vec::new(), vec!["127.0.0.2/32".parse().unwrap()])
        .with_resolver(rebound());
    let mut cfg = stepped_config();
    cfg.backoff.base = std::time::Duration::from_millis(1);
    let verifier = stepped_verifier(
        &app,
        guarded,
        Arc::new(RecordingListener::default()),
        cfg.clone(),
    );
    let report = verifier.process_batch().await.unwrap();
    assert_eq!(report.outcomes, vec![Outcome::Rescheduled]);
    let err = message(&app, id).await.last_error.unwrap();
    assert!(err.contains("refused"), "{err}");
    assert_eq!(canary.connections(), 0, "the rebound address was dialled");
    assert_eq!(server.total(), 0);

    // Control: without the deny rule the same call does reach the canary, so
    // the zero above is the guard's doing.
    let open = AddressPolicy::default().with_resolver(rebound());
    let unguarded = stepped_verifier(&app, open, Arc::new(RecordingListener::default()), cfg);
    eventually(5, "the control call", async || {
        unguarded.process_batch().await.unwrap().claimed == 1
    })
    .await;
    assert!(canary.connections() >= 1);
    app.finish().await;
}
