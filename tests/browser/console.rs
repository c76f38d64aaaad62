//! What a person on call does in the console, in a real browser.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use trustmsg_tests::flags::SHORT_SEND_TIMEOUTS;
use trustmsg_tests::kafka::{MockKafka, RDKafkaApiKey, RDKafkaRespErr};
use trustmsg_tests::{
    decision_body, eventually, prepare_body, serve, TestApp, ADMIN_TOKEN, UNREACHABLE_VERIFY_URL,
};
use trustmsg_verify_api::{MessageStatus, SendStatus};

use crate::harness::Browser;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_in_while_the_service_is_unreachable_says_so_and_keeps_no_token() {
    let app = TestApp::spawn_sqlite(&["--no-verifier"]).await;
    let browser = Browser::start(1280, 900).await;
    browser.goto(&app.url("/console")).await;
    browser.element("#token").await;
    // The page is loaded; now the service goes away.
    let url = app.url("/console");
    app.finish().await;
    browser.fill("#token", "test-admin-token").await;
    browser.click("#sign-in").await;
    let text = browser.until_text("could not be reached").await;
    assert!(text.contains("Sign in"), "{text}");
    let kept: serde_json::Value = browser
        .execute("return sessionStorage.getItem('trustmsg.admin_token')")
        .await;
    assert_eq!(
        kept,
        serde_json::Value::Null,
        "a refused sign-in keeps no token ({url})"
    );
    browser.finish().await;
}

/// A service with one producer whose messages end in every state the read
/// side shows: committed (PENDING: no Kafka here), rolled back, prepared,
/// VERIFY_FAILED (its check endpoint does not answer); one payload is an
/// XSS attempt. Returns the service and the id of that payload's message.
async fn service_with_messages() -> (TestApp, u64) {
    let app = TestApp::spawn_sqlite(&[
        "--verify-interval",
        "20ms",
        "--verify-backoff-base",
        "20ms",
        "--verify-backoff-max",
        "50ms",
        "--verify-timeout",
        "200ms",
    ])
    .await;
    let token = app
        .register_with("shop", &checked_back_once_at_once())
        .await;
    let billing = app
        .register_with(
            "billing",
            &json!({"verify_url": UNREACHABLE_VERIFY_URL, "first_verify_after_ms": 3_600_000,
                    "topics": ["invoices", "billing.*"]}),
        )
        .await;
    let mut xss = 0;
    for (i, payload) in ["{\"amount\":1}", XSS, "{\"amount\":3}"].iter().enumerate() {
        let (status, view) = app
            .prepare(
                Some(&billing),
                &json!({"biz_id": "billing", "message_key": format!("b-{i}"), "topic": "invoices",
                        "payload": payload, "headers": {"x-note": XSS}}),
            )
            .await;
        assert_eq!(status, 201, "{view}");
        if i == 1 {
            xss = view["id"].as_u64().unwrap();
        }
    }
    let (status, _) = app
        .commit(Some(&billing), &decision_body("billing", "b-0"))
        .await;
    assert_eq!(status, 200);
    let (status, _) = app
        .rollback(Some(&billing), &decision_body("billing", "b-2"))
        .await;
    assert_eq!(status, 200);
    let (status, view) = app
        .prepare(Some(&token), &prepare_body("shop", "lost"))
        .await;
    assert_eq!(status, 201, "{view}");
    let lost = view["id"].as_u64().unwrap();
    eventually(20, "the shop's message VERIFY_FAILED", async || {
        app.store()
            .find_message_by_id(lost)
            .await
            .unwrap()
            .is_some_and(|m| m.status == MessageStatus::VerifyFailed)
    })
    .await;
    (app, xss)
}

const XSS: &str =
    "<img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>";

async fn signed_in(app: &TestApp, width: u32, height: u32) -> Browser {
    let browser = Browser::start(width, height).await;
    browser.goto(&app.url("/console")).await;
    browser.fill("#token", ADMIN_TOKEN).await;
    browser.fill("#operator", "alice").await;
    browser.click("#sign-in").await;
    browser.until_text("Oldest pending send").await;
    browser
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_refused_plainly_and_the_right_one_shows_the_overview() {
    let (app, _) = service_with_messages().await;
    let browser = Browser::start(1280, 900).await;
    browser.goto(&app.url("/console")).await;
    browser.fill("#token", "not-the-admin-token").await;
    browser.click("#sign-in").await;
    let text = browser.until_text("That token was refused").await;
    assert!(text.contains("401"), "{text}");
    browser.fill("#token", ADMIN_TOKEN).await;
    browser.click("#sign-in").await;
    let overview = browser.until_text("Oldest pending send").await;
    for producer in ["shop", "billing"] {
        assert!(overview.contains(producer), "{overview}");
    }
    // The failed count is highlighted.
    let bad = browser.element("td.bad").await.text().await.unwrap();
    assert_eq!(bad, "1");
    browser.finish().await;
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_says_when_commits_submitted_through_kafka_wait_for_their_prepare() {
    let (app, _) = service_with_messages().await;
    // What the Kafka way in parks when a commit is read before its prepare.
    let parked = trustmsg::store::NewWaitingCommit {
        biz_id: "shop".into(),
        message_key: "early".into(),
        partition: 1,
        offset: 9,
        record_key: None,
        headers: Vec::new(),
        wait: std::time::Duration::from_secs(300),
    };
    assert!(app.store().park_commit(&parked).await.unwrap());
    let browser = signed_in(&app, 1280, 900).await;
    let text = browser
        .until_text("submitted through Kafka wait for their prepare")
        .await;
    assert!(text.contains("1 commit(s)"), "{text}");
    browser.finish().await;
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_failed_message_comes_first_and_a_hostile_payload_stays_text() {
    let (app, xss) = service_with_messages().await;
    let browser = signed_in(&app, 1280, 900).await;
    browser.goto(&app.url("/console#/messages")).await;
    let text = browser.until_text("Needs attention (1)").await;
    assert!(text.contains("VERIFY_FAILED"), "{text}");
    assert!(text.contains("All matching, newest first"), "{text}");

    browser
        .goto(&app.url(&format!("/console#/messages/{xss}")))
        .await;
    browser.until_text(&format!("Message {xss}")).await;
    let shown = browser.element("#payload").await.text().await.unwrap();
    assert_eq!(shown, XSS, "the payload is shown as text, exactly");
    let page = browser.page_text().await;
    assert!(page.contains("x-note"), "{page}");
    assert!(
        page.contains("Message key\nb-1"),
        "the facts are laid out: {page}"
    );
    assert!(!page.contains("[object"), "{page}");
    let (title, images, scripts): (serde_json::Value, serde_json::Value, serde_json::Value) = (
        browser.execute("return document.title").await,
        browser
            .execute("return document.querySelectorAll('main img').length")
            .await,
        browser
            .execute("return document.querySelectorAll('main script').length")
            .await,
    );
    assert_eq!(title, "trustmsg console", "no injected script ran");
    assert_eq!(
        (images, scripts),
        (json!(0), json!(0)),
        "no injected element"
    );
    browser.finish().await;
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_are_listed_and_the_pages_fit_a_phone_screen() {
    let (app, _) = service_with_messages().await;
    let browser = signed_in(&app, 390, 844).await;
    browser.goto(&app.url("/console#/producers")).await;
    let text = browser.until_text("Register a producer").await;
    assert!(text.contains("billing") && text.contains("shop"), "{text}");
    // The producer registered without topics carries the warning badge, the
    // one with a list shows it, and the page says which one needs a list.
    let badges: serde_json::Value = browser
        .execute(
            "return Array.from(document.querySelectorAll('tbody tr')).map(r => \
             [r.querySelector('th').textContent, r.querySelector('td.topics').textContent, \
              !!r.querySelector('td.topics .badge.warn')])",
        )
        .await;
    assert_eq!(
        badges,
        json!([
            ["billing", "invoices, billing.*", false],
            ["shop", "any topic (no allow-list)", true]
        ])
    );
    let warning = browser
        .element("#unlisted-warning")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        warning.contains("1 producer has no topic allow-list")
            && warning.ends_with("shop. Open each one and list its topics."),
        "{warning}"
    );
    let overflow: serde_json::Value = browser
        .execute("return document.documentElement.scrollWidth > window.innerWidth + 1")
        .await;
    assert_eq!(
        overflow,
        json!(false),
        "the page scrolls sideways on a phone"
    );
    browser.finish().await;
    app.finish().await;
}

/// Takes a screenshot of each page into `$TRUSTMSG_CONSOLE_SCREENSHOTS`
/// (`scripts/console-screenshots` runs it for `docs/console/`), over three
/// producers and a few hundred messages in every state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a tool, run by scripts/console-screenshots"]
async fn screenshots_of_every_page() {
    let dir = std::path::PathBuf::from(
        std::env::var("TRUSTMSG_CONSOLE_SCREENSHOTS").expect("TRUSTMSG_CONSOLE_SCREENSHOTS=dir"),
    );
    std::fs::create_dir_all(&dir).unwrap();
    let (app, kafka, shop) = service_with_kafka().await;
    let mut tokens = vec![("shop", shop)];
    for biz in ["billing", "payments"] {
        let (status, body) = app
            .put_producer(
                biz,
                &json!({"verify_url": UNREACHABLE_VERIFY_URL, "first_verify_after_ms": 3_600_000}),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        tokens.push((biz, body["token"].as_str().unwrap().to_string()));
    }
    for (biz, token) in &tokens {
        for i in 0..100 {
            let key = format!("{biz}-{i:03}");
            let body = json!({"biz_id": biz, "message_key": key, "topic": "orders",
                              "key": format!("customer-{}", i % 17),
                              "payload": format!("{{\"order\":{i},\"total\":{}}}", i * 7),
                              "headers": {"content-type": "application/json"}});
            let (status, view) = app.prepare(Some(token), &body).await;
            assert_eq!(status, 201, "{view}");
            let decision = decision_body(biz, &key);
            if i == 50 {
                kafka.request_errors(
                    RDKafkaApiKey::Produce,
                    &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE],
                );
            }
            match i % 5 {
                0 | 1 => {
                    app.commit(Some(token), &decision).await;
                }
                2 => {
                    app.rollback(Some(token), &decision).await;
                }
                _ => {}
            }
        }
    }
    eventually(30, "every send done (SENT or SEND_FAILED)", async || {
        app.store()
            .list_messages(
                &trustmsg::store::MessageFilter {
                    send_status: Some(SendStatus::Pending),
                    ..Default::default()
                },
                1,
                None,
            )
            .await
            .unwrap()
            .is_empty()
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let failed = first_verify_failed(&app).await;
    let browser = Browser::start(1280, 800).await;
    browser.goto(&app.url("/console")).await;
    browser.element("#token").await;
    browser.screenshot(&dir.join("sign-in.png")).await;
    browser.fill("#token", ADMIN_TOKEN).await;
    browser.click("#sign-in").await;
    browser.until_text("Oldest pending send").await;
    browser.screenshot(&dir.join("overview.png")).await;
    // The charts, once the flow of the traffic above is in.
    browser.until_text("committed: 120 in 60 min").await;
    browser
        .execute("document.getElementById('flow').scrollIntoView()")
        .await;
    browser.screenshot(&dir.join("flow.png")).await;
    for (page, wait, file) in [
        ("#/messages", "All matching", "messages.png"),
        (
            &format!("#/messages/{failed}") as &str,
            "Check-back attempts",
            "message.png",
        ),
        ("#/producers", "Register a producer", "producers.png"),
    ] {
        browser.goto(&app.url(&format!("/console{page}"))).await;
        browser.until_text(wait).await;
        browser.screenshot(&dir.join(file)).await;
    }
    browser.finish().await;
    app.finish().await;
}

/// A service forwarding to a Kafka mock cluster (topic `orders`), counting
/// its flow and backlog every `every`, with `extra` flags.
async fn kafka_service(every: &str, extra: &[&str]) -> (TestApp, MockKafka) {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 1);
    let mut flags = vec!["--kafka-brokers", kafka.bootstrap()];
    flags.extend(SHORT_SEND_TIMEOUTS);
    flags.extend([
        "--sweep-interval",
        "200ms",
        "--verify-interval",
        "20ms",
        "--flow-interval",
        every,
        "--backlog-interval",
        every,
    ]);
    flags.extend(extra);
    let app = TestApp::spawn_sqlite(&flags).await;
    (app, kafka)
}

/// A service forwarding to a Kafka mock cluster (topic `orders`), with a
/// producer `shop` never checked back; returns it, the cluster and the token.
async fn service_with_kafka() -> (TestApp, MockKafka, String) {
    let (app, kafka) = kafka_service("500ms", &["--verify-backoff-base", "20ms"]).await;
    let token = app
        .register_with("shop", &checked_back_once_at_once())
        .await;
    (app, kafka, token)
}

/// A producer's settings: checked back at once, once, at an address that
/// answers nothing (so an undecided message is VERIFY_FAILED at once).
fn checked_back_once_at_once() -> serde_json::Value {
    json!({"verify_url": UNREACHABLE_VERIFY_URL, "first_verify_after_ms": 0,
           "max_verify_attempts": 1})
}

/// The id of the first VERIFY_FAILED message `app` stores.
async fn first_verify_failed(app: &TestApp) -> u64 {
    let filter = trustmsg::store::MessageFilter {
        status: Some(MessageStatus::VerifyFailed),
        ..Default::default()
    };
    app.store().list_messages(&filter, 1, None).await.unwrap()[0].id
}

async fn until_send_status(app: &TestApp, id: u64, want: SendStatus) {
    eventually(20, &format!("message {id} {want:?}"), async || {
        app.store()
            .find_message_by_id(id)
            .await
            .unwrap()
            .is_some_and(|m| m.send_status == Some(want))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolved_commit_is_seen_sent_and_a_send_failed_message_is_redelivered_from_the_console()
{
    let (app, kafka, token) = service_with_kafka().await;
    // One message check-back gives up on, one Kafka refuses.
    let (_, view) = app
        .prepare(Some(&token), &prepare_body("shop", "unsure"))
        .await;
    let unsure = view["id"].as_u64().unwrap();
    eventually(20, "VERIFY_FAILED", async || {
        app.store()
            .find_message_by_id(unsure)
            .await
            .unwrap()
            .is_some_and(|m| m.status == MessageStatus::VerifyFailed)
    })
    .await;
    kafka.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED],
    );
    let (_, view) = app
        .prepare(Some(&token), &prepare_body("shop", "refused"))
        .await;
    let refused = view["id"].as_u64().unwrap();
    app.commit(Some(&token), &decision_body("shop", "refused"))
        .await;
    until_send_status(&app, refused, SendStatus::SendFailed).await;

    let browser = signed_in(&app, 1280, 900).await;
    for (id, button, reason) in [
        (unsure, "#action-resolve-commit", "the order exists"),
        (refused, "#action-redeliver", "ACL fixed"),
    ] {
        browser
            .goto(&app.url(&format!("/console#/messages/{id}")))
            .await;
        browser.until_text("Actions").await;
        browser.fill("#reason", reason).await;
        browser.click(button).await;
        browser.click("#confirm").await;
        browser
            .until_text("Done: the message is now COMMITTED / PENDING")
            .await;
        until_send_status(&app, id, SendStatus::Sent).await;
        // The page reloads itself after an action; once more to be sure it
        // shows the send as Kafka acknowledged it.
        browser.client.refresh().await.unwrap();
        let text = browser.until_text("Kafka partition / offset").await;
        assert!(text.contains("SENT"), "{text}");
        assert!(!text.contains("not sent yet"), "{text}");
    }
    browser.finish().await;
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_message_shows_when_it_is_due_and_is_sent_now_from_the_console() {
    let (app, _kafka, token) = service_with_kafka().await;
    let mut body = prepare_body("shop", "reminder");
    body["deliver_after_ms"] = json!(3_600_000);
    let (status, view) = app.prepare(Some(&token), &body).await;
    assert_eq!(status, 201, "{view}");
    let id = view["id"].as_u64().unwrap();
    app.commit(Some(&token), &decision_body("shop", "reminder"))
        .await;

    let browser = signed_in(&app, 1280, 900).await;
    browser
        .goto(&app.url("/console#/messages?biz_id=shop"))
        .await;
    let list = browser.until_text("due at").await;
    assert!(list.contains("reminder"), "{list}");
    browser
        .goto(&app.url(&format!("/console#/messages/{id}")))
        .await;
    let page = browser.until_text("Actions").await;
    assert!(
        page.contains("Delivery time") && page.contains("due at"),
        "{page}"
    );
    browser.fill("#reason", "customer asked").await;
    browser.click("#action-send-now").await;
    browser.click("#confirm").await;
    browser
        .until_text("Done: the message is now COMMITTED / PENDING")
        .await;
    until_send_status(&app, id, SendStatus::Sent).await;
    let trail = app.store().audit_trail(id).await.unwrap();
    let last = trail.last().unwrap();
    assert_eq!(
        (
            last.action.as_str(),
            last.actor.as_str(),
            last.reason.as_str()
        ),
        ("send_now", "operator:alice", "customer asked")
    );
    browser.finish().await;
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_resolves_a_failed_message_with_a_reason_and_sees_the_result() {
    let (app, _) = service_with_messages().await;
    let failed = first_verify_failed(&app).await;
    let browser = signed_in(&app, 1280, 900).await;
    browser
        .goto(&app.url(&format!("/console#/messages/{failed}")))
        .await;
    browser.until_text("Actions").await;
    // The check-back call that failed, in the attempts table.
    let attempt = browser.element("tr.failed").await.text().await.unwrap();
    assert!(
        attempt.contains("failed") && attempt.contains("cannot connect"),
        "{attempt}"
    );
    // No reason: refused on the page, nothing sent.
    browser.click("#action-resolve-commit").await;
    browser.until_text("A reason is required").await;
    browser
        .fill("#reason", "the order exists in the shop")
        .await;
    browser.click("#action-resolve-commit").await;
    browser
        .until_text(&format!("Commit message {failed}"))
        .await;
    browser.click("#confirm").await;
    browser
        .until_text("Done: the message is now COMMITTED")
        .await;
    let m = app
        .store()
        .find_message_by_id(failed)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.status, MessageStatus::Committed);
    let trail = app.store().audit_trail(failed).await.unwrap();
    let last = trail.last().unwrap();
    assert_eq!(
        (last.actor.as_str(), last.reason.as_str()),
        ("operator:alice", "the order exists in the shop")
    );
    // The page reloads the message: the timeline shows the operator's commit.
    browser.until_text("commit by operator:alice").await;
    browser.finish().await;
    app.finish().await;
}

/// The service with messages, and a signed-in console on its form for a
/// new producer, `biz_id` checked back at an address that answers nothing.
async fn new_producer_form(biz_id: &str) -> (TestApp, Browser) {
    let (app, _) = service_with_messages().await;
    let browser = signed_in(&app, 1280, 900).await;
    browser.goto(&app.url("/console#/producers/new")).await;
    browser.fill("#p-biz_id", biz_id).await;
    browser
        .fill("#p-verify_url", "http://127.0.0.1:9/check")
        .await;
    (app, browser)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_is_registered_its_token_rotated_and_deleted_from_the_console() {
    let (app, browser) = new_producer_form("payments").await;
    browser.fill("#p-max_verify_attempts", "4").await;
    browser.fill("#p-topics", "payments, pay.*").await;
    browser.click("#save-producer").await;
    browser.until_text("Registered payments").await;
    let first = browser.element("#new-token").await.text().await.unwrap();
    assert!(first.starts_with("tm_"), "the token is shown once: {first}");
    let secret = browser
        .element("#new-signing-secret")
        .await
        .text()
        .await
        .unwrap();
    let stored = app
        .store()
        .find_producer("payments")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.max_verify_attempts, 4);
    assert_eq!(
        stored.topics,
        Some(vec!["payments".to_string(), "pay.*".to_string()])
    );
    assert_eq!(secret, stored.signing_secret);

    browser.goto(&app.url("/console#/producers/payments")).await;
    browser.until_text("Token and registration").await;
    let page = browser.element("main").await.text().await.unwrap();
    assert!(
        !page.contains(&stored.signing_secret),
        "the secret is not shown until asked for"
    );
    browser.click("#reveal-signing-secret").await;
    let revealed = browser
        .element("#signing-secret")
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(revealed, stored.signing_secret);
    browser.click("#rotate-token").await;
    browser.until_text("stops working at once").await;
    browser.click("#confirm").await;
    let rotated = browser.element("#new-token").await.text().await.unwrap();
    assert!(rotated.starts_with("tm_") && rotated != first, "{rotated}");
    // The old token no longer works, the new one does.
    let (old, _) = app.get("/v1/messages/payments/k", Some(&first)).await;
    let (new, _) = app.get("/v1/messages/payments/k", Some(&rotated)).await;
    assert_eq!((old, new), (401, 404));

    browser.click("#delete-producer").await;
    browser
        .until_text("Delete the registration of payments?")
        .await;
    browser.click("#confirm").await;
    browser.until_text("Register a producer").await;
    assert_eq!(app.store().find_producer("payments").await.unwrap(), None);
    browser.finish().await;
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alert_the_webhook_refuses_is_listed_as_pending_with_why_and_links_its_message() {
    let sink = trustmsg_tests::AlertSink::start().await;
    sink.answer(axum::http::StatusCode::SERVICE_UNAVAILABLE);
    let webhook = sink.url();
    let app = TestApp::spawn_sqlite(&[
        "--verify-interval",
        "20ms",
        "--verify-timeout",
        "200ms",
        "--alert-webhook",
        &webhook,
    ])
    .await;
    let token = app
        .register_with("shop", &checked_back_once_at_once())
        .await;
    let (_, view) = app
        .prepare(Some(&token), &prepare_body("shop", "stuck"))
        .await;
    let id = view["id"].as_u64().unwrap();
    eventually(20, "the webhook refused the alert", async || {
        sink.refused() >= 1
    })
    .await;

    let browser = signed_in(&app, 1280, 900).await;
    browser.click("a[data-page=alerts]").await;
    let text = browser.until_text("verify_failed").await;
    for cell in ["pending", "stuck", "503"] {
        assert!(text.contains(cell), "{cell} in {text}");
    }
    browser.click(&format!("a[href='#/messages/{id}']")).await;
    browser.until_text("VERIFY_FAILED").await;
    browser.finish().await;
    app.finish().await;
}

/// A front for the service that answers `/v1/admin/summary` `delay` late
/// (everything else passes straight through) and counts the summary
/// requests in flight: the slow server the overview must not pile up on.
struct SlowSummary {
    url: String,
    started: Arc<AtomicU32>,
    most_in_flight: Arc<AtomicU32>,
}

impl SlowSummary {
    async fn start(app: &TestApp, delay: Duration) -> Self {
        let (started, in_flight, most): (Arc<AtomicU32>, Arc<AtomicU32>, Arc<AtomicU32>) =
            Default::default();
        let upstream = app.url("");
        let http = trustmsg_tests::http_client();
        let counters = (
            Arc::clone(&started),
            Arc::clone(&in_flight),
            Arc::clone(&most),
        );
        let handler = move |req: axum::extract::Request| {
            let (upstream, http) = (upstream.clone(), http.clone());
            let (started, in_flight, most) =
                (counters.0.clone(), counters.1.clone(), counters.2.clone());
            async move {
                let summary = req.uri().path() == "/v1/admin/summary";
                if summary {
                    started.fetch_add(1, Ordering::SeqCst);
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(delay).await;
                }
                let (parts, body) = req.into_parts();
                let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
                let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
                let mut headers = parts.headers.clone();
                headers.remove(axum::http::header::HOST);
                let answer = http
                    .request(parts.method, format!("{upstream}{path}"))
                    .headers(headers)
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                let mut out = axum::http::Response::builder().status(answer.status());
                for (k, v) in answer.headers() {
                    if k != axum::http::header::TRANSFER_ENCODING
                        && k != axum::http::header::CONTENT_LENGTH
                    {
                        out = out.header(k, v);
                    }
                }
                let out = out
                    .body(axum::body::Body::from(answer.bytes().await.unwrap()))
                    .unwrap();
                if summary {
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                }
                out
            }
        };
        let addr = serve(axum::Router::new().fallback(handler)).await;
        Self {
            url: format!("http://{addr}"),
            started,
            most_in_flight: most,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_waits_for_a_slow_summary_before_asking_again() {
    let (app, _) = service_with_messages().await;
    // Longer than the 5 s refresh: a timer that ignores the answer would
    // have a second request out before the first is back.
    let slow = SlowSummary::start(&app, Duration::from_secs(7)).await;
    let browser = Browser::start(1280, 900).await;
    browser.goto(&format!("{}/console", slow.url)).await;
    browser.fill("#token", ADMIN_TOKEN).await;
    browser.click("#sign-in").await;
    // Sign-in's own check, then the overview's first load and two refreshes
    // (a timer that ignores answers has had 2 out at once by the third).
    eventually(60, "four summary requests", async || {
        slow.started.load(Ordering::SeqCst) >= 4
    })
    .await;
    assert_eq!(
        slow.most_in_flight.load(Ordering::SeqCst),
        1,
        "summary requests overlapped"
    );
    assert!(browser.page_text().await.contains("shop"));
    browser.finish().await;
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordered_producer_is_registered_and_a_blocked_key_is_released_from_the_console() {
    let (app, browser) = new_producer_form("ledger").await;
    browser.fill("#p-topics", "orders").await;
    browser.click("#p-ordered").await;
    browser.click("#save-producer").await;
    browser.until_text("Registered ledger").await;
    let token = browser.element("#new-token").await.text().await.unwrap();
    let stored = app.store().find_producer("ledger").await.unwrap().unwrap();
    assert!(stored.ordered);
    browser.goto(&app.url("/console#/producers")).await;
    browser.until_text("in order per key").await;

    // Two messages of one record key; the first fails for good (set here:
    // this service has no Kafka), the second waits behind it.
    let mut ids = Vec::new();
    for key in ["l-1", "l-2"] {
        let (status, view) = app
            .prepare(Some(&token), &prepare_body("ledger", key))
            .await;
        assert_eq!(status, 201, "{view}");
        ids.push(view["id"].as_u64().unwrap());
        app.commit(Some(&token), &decision_body("ledger", key))
            .await;
    }
    let head = app
        .store()
        .find_message_by_id(ids[0])
        .await
        .unwrap()
        .unwrap();
    app.store()
        .mark_send_failed(
            head.id,
            head.version,
            "record too large",
            &trustmsg::store::Actor::Forwarder,
        )
        .await
        .unwrap()
        .expect("the head goes SEND_FAILED");

    browser
        .goto(&app.url(&format!("/console#/messages/{}", ids[1])))
        .await;
    let text = browser.until_text("Blocked by").await;
    assert!(text.contains(&format!("message {}", ids[0])), "{text}");
    browser.click("#blocked-by a").await;
    browser.until_text(&format!("Message {}", ids[0])).await;
    browser.fill("#reason", "the record cannot be sent").await;
    browser.click("#action-skip").await;
    browser.click("#confirm").await;
    browser
        .until_text("Done: the message is now COMMITTED / SEND_FAILED")
        .await;
    browser
        .goto(&app.url(&format!("/console#/messages/{}", ids[1])))
        .await;
    let text = browser.until_text("Place in its key").await;
    assert!(!text.contains("Blocked by"), "{text}");
    browser.finish().await;
}

/// Sums each series' dots over the charts (`data-value` per minute), and
/// reads what a CSP violation listener saw.
const CHART_SUMS: &str = "const sums = {}; \
    for (const c of document.querySelectorAll('#flow circle[data-series]')) { \
      const k = c.dataset.series; const v = Number(c.dataset.value); \
      if (k.startsWith('backlog_')) sums[k] = v; else sums[k] = (sums[k] || 0) + v; } \
    return sums;";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_charts_the_flow_of_real_traffic_and_a_message_page_tells_its_story() {
    let (app, _kafka) = kafka_service("200ms", &["--verify-timeout", "200ms"]).await;
    // `shop` is never checked back during the test; `lost` is checked at
    // once, gives up after one failed call: VERIFY_FAILED.
    let shop = app
        .register_with(
            "shop",
            &json!({"verify_url": UNREACHABLE_VERIFY_URL, "first_verify_after_ms": 3_600_000}),
        )
        .await;
    let lost = app
        .register_with(
            "lost",
            &json!({"verify_url": UNREACHABLE_VERIFY_URL, "first_verify_after_ms": 0,
                    "max_verify_attempts": 1}),
        )
        .await;
    // Watch for CSP violations from the first page on.
    let browser = Browser::start(1280, 1000).await;
    browser.goto(&app.url("/console")).await;
    browser
        .execute(
            "window.cspViolations = []; document.addEventListener('securitypolicyviolation', \
             e => window.cspViolations.push(e.violatedDirective + ' ' + e.blockedURI));",
        )
        .await;

    let mut ids = Vec::new();
    for i in 0..5 {
        let body = json!({"biz_id": "shop", "message_key": format!("o-{i}"), "topic": "orders",
                          "payload": "{}"});
        let (status, view) = app.prepare(Some(&shop), &body).await;
        assert_eq!(status, 201, "{view}");
        ids.push(view["id"].as_u64().unwrap());
    }
    // A repeated prepare creates nothing and is not counted.
    let again = json!({"biz_id": "shop", "message_key": "o-0", "topic": "orders", "payload": "{}"});
    assert_eq!(app.prepare(Some(&shop), &again).await.0, 200);
    for i in 0..3 {
        let (status, _) = app
            .commit(Some(&shop), &decision_body("shop", &format!("o-{i}")))
            .await;
        assert_eq!(status, 200);
    }
    assert_eq!(
        app.rollback(Some(&shop), &decision_body("shop", "o-3"))
            .await
            .0,
        200
    );
    let (status, view) = app.prepare(Some(&lost), &prepare_body("lost", "l-0")).await;
    assert_eq!(status, 201, "{view}");
    let lost_id = view["id"].as_u64().unwrap();
    for id in &ids[..3] {
        until_send_status(&app, *id, SendStatus::Sent).await;
    }
    eventually(20, "the lost message VERIFY_FAILED", async || {
        app.store()
            .find_message_by_id(lost_id)
            .await
            .unwrap()
            .is_some_and(|m| m.status == MessageStatus::VerifyFailed)
    })
    .await;

    browser.fill("#token", ADMIN_TOKEN).await;
    browser.click("#sign-in").await;
    browser.until_text("Messages per minute").await;
    // What was done: 6 prepared, 3 committed and sent, 1 VERIFY_FAILED after
    // one failed check-back; o-4 is still PREPARED and nothing is PENDING.
    let want = json!({
        "prepared": 6, "committed": 3, "sent": 3, "failed": 1,
        "checks_commit": 0, "checks_rollback": 0, "checks_unknown": 0, "checks_failed": 1,
        "backlog_prepared": 1, "backlog_pending": 0,
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let sums = browser.execute(CHART_SUMS).await;
        if sums == want {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the charts never showed what was done: {sums} (want {want})"
        );
        // The overview redraws every 5 s.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (status, flow) = app
        .get("/v1/admin/flow?minutes=60", Some(ADMIN_TOKEN))
        .await;
    assert_eq!(status, 200, "{flow}");
    assert_eq!(flow["minutes"].as_array().unwrap().len(), 60);
    let rolled_back: u64 = flow["minutes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["rolled_back"].as_u64().unwrap())
        .sum();
    assert_eq!(rolled_back, 1, "{flow}");
    // Each chart has its axes labelled and a legend with the hour's figures.
    let text = browser.page_text().await;
    for label in [
        "Backlog",
        "Check-back answers per minute",
        "messages / min",
        "minute (UTC)",
        "committed: 3 in 60 min",
        "failed (no answer): 1 in 60 min",
        "PREPARED: now 1",
    ] {
        assert!(text.contains(label), "{label:?} missing: {text}");
    }
    let titled: serde_json::Value = browser.execute("return Array.from(document.querySelectorAll('#chart-messages circle[data-series=sent]')) \
             .filter(c => c.dataset.value !== '0').map(c => c.querySelector('title').textContent)").await;
    assert!(
        titled
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.as_str().unwrap().contains("UTC · sent: ")),
        "each dot says its minute and value: {titled}"
    );
    // No consumer group is registered: no Consumers table.
    assert!(!text.contains("Consumers"), "{text}");

    // The story of a sent message: prepared, decided, sent, in that order.
    browser
        .goto(&app.url(&format!("/console#/messages/{}", ids[0])))
        .await;
    browser.until_text("Story").await;
    let steps: serde_json::Value = browser
        .execute(
            "return Array.from(document.querySelectorAll('#story li')) \
             .map(li => [li.dataset.step, li.textContent])",
        )
        .await;
    let steps = steps.as_array().unwrap();
    assert_eq!(
        steps
            .iter()
            .map(|s| s[0].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["prepared", "decided", "sent"],
        "{steps:?}"
    );
    let text = |i: usize| steps[i][1].as_str().unwrap().to_string();
    assert!(
        text(0).starts_with("Prepared by producer shop at "),
        "{}",
        text(0)
    );
    assert!(
        text(1).starts_with("Committed by producer:shop at "),
        "{}",
        text(1)
    );
    assert!(
        text(2).starts_with("Sent to orders, partition 0, offset "),
        "{}",
        text(2)
    );
    // And of the one check-back gave up on.
    browser
        .goto(&app.url(&format!("/console#/messages/{lost_id}")))
        .await;
    browser.until_text("Story").await;
    let story = browser.element("#story").await.text().await.unwrap();
    assert!(
        story.contains("No decision from check-back: VERIFY_FAILED"),
        "{story}"
    );

    let violations = browser.execute("return window.cspViolations").await;
    assert_eq!(violations, json!([]), "the charts keep to the CSP");
    browser.finish().await;
    app.finish().await;
}

/// "Did billing process order 42?" and "is anything backing up?": with two
/// consumer groups on the consumption ledger, the message page says which
/// group processed the message and which keeps failing it (attempts, last
/// error), and the overview's Consumers table counts each group's
/// processed, failing and lag, all from the real API's answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_message_page_says_which_group_processed_it_and_which_fails_and_the_overview_counts_them(
) {
    let (app, _kafka, token) = service_with_kafka().await;
    // Not checked back during the test (the kit's producer is, at once).
    let (status, body) = app
        .put_producer(
            "shop",
            &json!({"verify_url": UNREACHABLE_VERIFY_URL, "first_verify_after_ms": 3_600_000}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let http = trustmsg_tests::http_client();
    for group in ["billing", "analytics"] {
        let res = http
            .put(app.url(&format!("/v1/consumer-groups/{group}")))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({"topics": ["orders"]}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    }
    let mut ids = Vec::new();
    for key in ["order-42", "order-43"] {
        let (status, view) = app.prepare(Some(&token), &prepare_body("shop", key)).await;
        assert_eq!(status, 201, "{view}");
        let (status, view) = app.commit(Some(&token), &decision_body("shop", key)).await;
        assert_eq!(status, 200, "{view}");
        ids.push(view["id"].as_u64().unwrap());
    }
    for id in &ids {
        until_send_status(&app, *id, SendStatus::Sent).await;
    }
    // billing processes order 42; analytics fails it twice; nobody has
    // processed order 43 yet.
    let ledger = async |path: &str, body: serde_json::Value| {
        let (status, answer) = app.post(path, Some(ADMIN_TOKEN), &body).await;
        assert_eq!(status, 200, "{path} {body}: {answer}");
        answer
    };
    let order_42 = ids[0];
    let go = ledger(
        "/v1/consumptions/begin",
        json!({"group": "billing", "message_id": order_42}),
    )
    .await;
    assert_eq!(go["state"], "go", "{go}");
    ledger(
        "/v1/consumptions/finish",
        json!({"group": "billing", "message_id": order_42, "ok": true}),
    )
    .await;
    for attempt in 1..=2 {
        let go = ledger(
            "/v1/consumptions/begin",
            json!({"group": "analytics", "message_id": order_42}),
        )
        .await;
        assert_eq!(go["state"], "go", "{go}");
        ledger(
            "/v1/consumptions/finish",
            json!({"group": "analytics", "message_id": order_42, "ok": false,
                   "error": format!("warehouse unreachable (try {attempt})")}),
        )
        .await;
    }

    let browser = signed_in(&app, 1280, 1000).await;
    // The overview's table, refreshed every 5 s from counts at most 2 s old.
    let want = json!([
        ["analytics", "orders", "0", "1", "0", "2"],
        ["billing", "orders", "1", "0", "0", "1"],
    ]);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let rows = browser
            .execute(
                "return Array.from(document.querySelectorAll('#consumers tbody tr')) \
                 .map(tr => Array.from(tr.children).map(c => c.textContent.trim()))",
            )
            .await;
        if rows == want {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the Consumers table never showed the ledger: {rows} (want {want})"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    browser
        .goto(&app.url(&format!("/console#/messages/{order_42}")))
        .await;
    browser.until_text("Processed by billing").await;
    let steps: serde_json::Value = browser
        .execute(
            "return Array.from(document.querySelectorAll('#story li')) \
             .map(li => [li.dataset.step, li.textContent])",
        )
        .await;
    let steps = steps.as_array().unwrap();
    let kinds: Vec<&str> = steps.iter().map(|s| s[0].as_str().unwrap()).collect();
    assert_eq!(&kinds[..3], ["prepared", "decided", "sent"], "{steps:?}");
    let mut consumed: Vec<&str> = kinds[3..].to_vec();
    consumed.sort_unstable();
    assert_eq!(consumed, ["consume-failed", "consumed"], "{steps:?}");
    let line = |kind: &str| {
        steps
            .iter()
            .find(|s| s[0] == kind)
            .and_then(|s| s[1].as_str())
            .unwrap()
            .to_string()
    };
    let done = line("consumed");
    assert!(
        done.starts_with("Processed by billing at ") && done.ends_with("(1 attempt)"),
        "{done}"
    );
    let failing = line("consume-failed");
    assert!(
        failing.starts_with("Failing in analytics (2 attempts, last at ")
            && failing.contains("last error: warehouse unreachable (try 2)"),
        "{failing}"
    );
    browser.finish().await;
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_retries_and_gives_up_failed_outbox_rows_from_the_console() {
    let table = trustmsg_tests::OutboxTable::create().await;
    let source = table.source("shop");
    // On MariaDB: a SQLite store cannot record a failed row yet (its alerts
    // table's CHECK on kind lacks outbox_failed).
    let app = TestApp::spawn(&[
        "--outbox-source",
        &source,
        "--outbox-interval",
        "20ms",
        "--backlog-interval",
        "100ms",
    ])
    .await;
    app.register("shop", UNREACHABLE_VERIFY_URL).await;
    table.insert("order-1", "orders", "{}").await;
    let fixed = table.insert("order-2", "bad topic!", "{}").await;
    // A hostile key stays text on the page.
    let dropped = table.insert(XSS, "bad topic!", "{}").await;
    eventually(20, "two failed rows counted", async || {
        let (_, list) = app.get("/v1/admin/outbox-sources", Some(ADMIN_TOKEN)).await;
        list["items"][0]["failed_rows"] == 2 && list["items"][0]["relayed_total"] == 1
    })
    .await;

    let browser = signed_in(&app, 1280, 900).await;
    browser.click("a[data-page=outbox]").await;
    let text = browser.until_text("Producer shop").await;
    for shown in ["relaying", "bad topic!", "invalid_topic", XSS] {
        assert!(text.contains(shown), "{shown} in {text}");
    }
    let failed = browser.element("#outbox-failed-shop").await;
    assert_eq!(failed.text().await.unwrap(), "2");

    // The producer fixes one row; the operator retries it, with a reason.
    table.set_topic(fixed, "orders").await;
    browser.click(&format!("#outbox-retry-shop-{fixed}")).await;
    browser.until_text(&format!("Retry row {fixed}")).await;
    browser.click("#outbox-confirm-shop").await;
    browser.until_text("A reason is required").await;
    browser.fill("#outbox-reason-shop", "topic fixed").await;
    browser.click("#outbox-confirm-shop").await;
    browser
        .until_text(&format!("Done: row {fixed} is now"))
        .await;
    eventually(20, "the retried row relayed", async || {
        table.status(fixed).await == 2
    })
    .await;
    // The page reloads: the retried row is no longer among the failed ones.
    eventually(
        20,
        "the page reloaded without the retried row",
        async || {
            let text = browser.page_text().await;
            !text.contains("Done:") && !text.contains("order-2") && text.contains("Producer shop")
        },
    )
    .await;

    browser
        .click(&format!("#outbox-give-up-shop-{dropped}"))
        .await;
    browser.until_text(&format!("Give up row {dropped}")).await;
    browser
        .fill("#outbox-reason-shop", "a test row, never to be sent")
        .await;
    browser.click("#outbox-confirm-shop").await;
    browser
        .until_text(&format!("Done: row {dropped} is now given_up"))
        .await;
    assert_eq!(table.status(dropped).await, 4);
    browser.until_text("No failed row.").await;

    let title: serde_json::Value = browser.execute("return document.title").await;
    assert_eq!(title, "trustmsg console", "nothing a row held ran");
    for (row, action, reason) in [
        (
            fixed,
            trustmsg::store::OutboxActionKind::Retry,
            "topic fixed",
        ),
        (
            dropped,
            trustmsg::store::OutboxActionKind::GiveUp,
            "a test row, never to be sent",
        ),
    ] {
        let audit = app.store().outbox_actions("shop", row).await.unwrap();
        assert_eq!(
            audit
                .iter()
                .map(|a| (a.action, a.actor.as_str(), a.reason.as_str()))
                .collect::<Vec<_>>(),
            [(action, "operator:alice", reason)]
        );
    }
    browser.finish().await;
    app.finish().await;
    table.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_shows_what_the_tables_hold_and_warns_when_retention_is_off() {
    let (app, _) = service_with_messages().await;
    let browser = signed_in(&app, 1280, 900).await;
    // The default keeps a week; the messages table holds the three rows
    // (SQLite counts them exactly).
    let text = browser.until_text("Retention 7d0h").await;
    let storage = browser.element("#storage").await.text().await.unwrap();
    assert!(storage.contains("messages"), "{storage}");
    assert!(storage.contains("Oldest message"), "{storage}");
    let warned = browser
        .execute("return document.querySelectorAll('#storage p.warning').length;")
        .await;
    assert_eq!(warned, 0, "no warning while retention is on: {text}");
    browser.finish().await;
    app.finish().await;

    // Nothing stored yet, and nothing ever deleted.
    let app = TestApp::spawn_sqlite(&["--retention", "0"]).await;
    let browser = Browser::start(1280, 900).await;
    browser.goto(&app.url("/console")).await;
    browser.fill("#token", ADMIN_TOKEN).await;
    browser.click("#sign-in").await;
    let text = browser.until_text("Retention is off").await;
    let warning = browser
        .element("#storage p.warning")
        .await
        .text()
        .await
        .unwrap();
    assert!(warning.contains("--retention"), "{warning}");
    assert!(text.contains("grow without bound"), "{text}");
    browser.finish().await;
    app.finish().await;
}
