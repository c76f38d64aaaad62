//! The SSRF corpus (issue 10): every spelling of one forbidden address that
//! URL parsers, resolvers and redirects allow, each tried at registration,
//! written straight into a registration (as if made before the rule, or by
//! a hand edit) and as a redirect target, plus a DNS answer that changes
//! between one call and the next. 100 % must be refused, and a canary
//! listening on the forbidden address must see no connection at all.
//! 127.0.0.2 plays the forbidden internal service (`--verify-deny-cidr
//! 127.0.0.2/32`); every dial stays on loopback.

use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;
use trustmsg::net::address_policy::{AddressPolicy, HostResolver};
use trustmsg::verifier::Outcome;
use trustmsg_tests::{eventually, Canary, CheckServer, Reply, TestApp};
use trustmsg_verify_api::MessageStatus;

use super::support::*;

/// Every way we know to write 127.0.0.2 (port `p`) in a URL.
fn spellings(p: u16) -> Vec<String> {
    [
        "127.0.0.2",
        "2130706434",
        "0177.0.0.2",
        "0177.0000.0000.0002",
        "0x7f000002",
        "0x7f.0.0.2",
        "0x7F.0x0.0x0.0x2",
        "127.2",
        "127.0.2",
        "127.0.0.2.",
        "%31%32%37.0.0.2",
        "[::ffff:127.0.0.2]",
        "[::ffff:7f00:2]",
        "[0:0:0:0:0:ffff:127.0.0.2]",
        "[::127.0.0.2]",
        "[::7f00:2]",
        "[2002:7f00:2::]",
        "[2002:7f00:0002:1234::1]",
        "[64:ff9b::7f00:2]",
        "[64:ff9b::127.0.0.2]",
        "canary.test",
        "CANARY.test",
        "canary.test.",
        "user:pass@127.0.0.2",
        "127.0.0.1@127.0.0.2",
        "127.0.0.1:80@0x7f000002",
    ]
    .iter()
    .map(|h| format!("http://{h}:{p}/check"))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spelling_of_a_denied_address_is_refused_at_registration_at_call_time_and_as_a_redirect(
) {
    let canary = Canary::start(("127.0.0.2", 0)).await;
    let corpus = spellings(canary.addr.port());
    let app = TestApp::spawn(&fast_denying_the_canary()).await;

    // 1. Registration refuses every spelling.
    let mut refused = 0;
    for url in &corpus {
        let (status, body) = app
            .put_producer("evil", &json!({ "verify_url": url }))
            .await;
        assert_eq!(status, 400, "{url} was registered: {body}");
        assert_eq!(body["error"]["code"], "invalid_verify_url", "{url}: {body}");
        refused += 1;
    }

    // 2. Registrations that already point there (written before the rule, or
    //    by hand), and 3. endpoints (allowed) that redirect there: refused
    //    when called.
    let server = CheckServer::start().await;
    let targets = Arc::new(corpus.clone());
    let redirector = trustmsg_tests::serve(axum::Router::new().route(
        "/r/{i}",
        axum::routing::post(move |axum::extract::Path(i): axum::extract::Path<usize>| {
            let to = targets[i].clone();
            async move { axum::response::Redirect::temporary(&to) }
        }),
    ))
    .await;
    let pool = app.db.pool().await;
    let mut ids = Vec::new();
    for (i, url) in corpus.iter().enumerate() {
        let biz = format!("stored-{i}");
        let token = register(&app, &biz, &server, json!({})).await;
        sqlx::query("UPDATE producers SET verify_url = ? WHERE biz_id = ?")
            .bind(url)
            .bind(&biz)
            .execute(&pool)
            .await
            .unwrap();
        ids.push((
            url.clone(),
            "stored",
            prepare_later(&app, &token, &biz).await,
        ));

        let biz = format!("redirect-{i}");
        let (status, body) = app
            .put_producer(
                &biz,
                &json!({"verify_url": format!("http://{redirector}/r/{i}"), "first_verify_after_ms": 0}),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        let token = body["token"].as_str().unwrap();
        ids.push((
            url.clone(),
            "redirect",
            prepare(&app, token, &biz, "r").await,
        ));
    }
    for (url, how, id) in &ids {
        eventually(20, &format!("{how} {url}: two attempts"), async || {
            message(&app, *id).await.verify_attempts >= 2
        })
        .await;
        let m = message(&app, *id).await;
        assert!(
            matches!(
                m.status,
                MessageStatus::Prepared | MessageStatus::VerifyFailed
            ),
            "{how} {url}: decided {:?}",
            m.status
        );
        let err = m.last_error.unwrap_or_default();
        let expected: &[&str] = if *how == "redirect" {
            &["redirect (HTTP 307"]
        } else {
            &[
                "refused",
                "denied",
                "resolve",
                "credentials",
                "not a URL",
                "no address",
            ]
        };
        assert!(
            expected.iter().any(|e| err.contains(e)),
            "{how} {url}: {err}"
        );
        refused += 1;
    }
    assert_eq!(canary.connections(), 0, "the denied address was dialled");
    eprintln!(
        "SSRF corpus: {} spellings, {refused} of {} attempts refused, {} connections to the canary",
        corpus.len(),
        corpus.len() * 3,
        canary.connections()
    );
    assert_eq!(refused, corpus.len() * 3);
    pool.close().await;
    app.finish().await;
}

/// A prepare whose registration was just rewritten: first check-back only
/// after the registry cache (50 ms) has let go of the old URL.
async fn prepare_later(app: &TestApp, token: &str, biz: &str) -> u64 {
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    prepare(app, token, biz, "k").await
}

/// The registration saw the name resolve to an allowed address; at dial
/// time it answers the denied address first and the allowed one after it,
/// then only the denied one: what a rebinding attacker's DNS does.
struct Rebinding {
    lookups: AtomicUsize,
}

#[async_trait]
impl HostResolver for Rebinding {
    async fn lookup(&self, _host: &str) -> std::io::Result<Vec<IpAddr>> {
        let allowed: IpAddr = "127.0.0.1".parse().unwrap();
        let denied: IpAddr = "127.0.0.2".parse().unwrap();
        Ok(match self.lookups.fetch_add(1, Ordering::SeqCst) {
            0 => vec![denied, allowed],
            _ => vec![denied],
        })
    }
}

#[tokio::test]
async fn a_dns_answer_that_changes_between_check_and_dial_never_reaches_the_denied_address() {
    let server = CheckServer::start().await;
    let port = server.addr.port();
    let canary = Canary::start(("127.0.0.2", port)).await;
    let resolver = Arc::new(Rebinding {
        lookups: AtomicUsize::new(0),
    });
    let app = TestApp::spawn(&["--no-verifier", "--verify-resolve", "rebind.test=127.0.0.1"]).await;
    let (status, body) = app
        .put_producer(
            "orders",
            &json!({"verify_url": format!("http://rebind.test:{port}/check"), "first_verify_after_ms": 0, "max_verify_attempts": 1000}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    server.set_secret(body["signing_secret"].as_str().unwrap());
    server.default_reply(Reply::Decide("unknown"));
    let token = body["token"].as_str().unwrap().to_string();
    let id = prepare(&app, &token, "orders", "o-1").await;

    let policy = AddressPolicy::new(Vec::new(), vec!["127.0.0.2/32".parse().unwrap()])
        .with_resolver(resolver.clone());
    let mut cfg = stepped_config();
    cfg.backoff.base = std::time::Duration::from_millis(1);
    cfg.backoff.max = std::time::Duration::from_millis(1);
    let verifier = stepped_verifier(&app, policy, Arc::new(RecordingListener::default()), cfg);
    let mut outcomes = Vec::new();
    for _ in 0..30 {
        let report = verifier.process_batch().await.unwrap();
        outcomes.extend(report.outcomes);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(resolver.lookups.load(Ordering::SeqCst) >= 1);
    assert!(
        outcomes.iter().all(|o| *o == Outcome::Rescheduled),
        "{outcomes:?}"
    );
    assert!(server.total() >= 1, "the allowed address was used");
    assert_eq!(canary.connections(), 0, "the denied answer was dialled");
    let m = message(&app, id).await;
    assert_eq!(m.status, MessageStatus::Prepared);
    app.finish().await;
}
