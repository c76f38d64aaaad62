//! The database goes away under a running service (through a proxy only this
//! service uses; the shared server is never touched): every request answers
//! 503 with `Retry-After` within `--request-timeout`, whether the database
//! refuses (killed) or hangs (partition), work whose caller has gone is
//! skipped, and the service recovers when the database is back.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::Value;
use trustmsg_tests::{
    decision_body, eventually, prepare_body, DbProxy, TestApp, TestDb, UNREACHABLE_VERIFY_URL,
};

/// The `--request-timeout` these tests run with.
const TIMEOUT: Duration = Duration::from_secs(2);
/// What a 503 may take beyond the timeout: scheduling on a loaded machine.
const SLACK: Duration = Duration::from_millis(1500);

/// The service over a fresh database it reaches only through `proxy`.
async fn spawn_behind(proxy: &DbProxy, extra: &[&str]) -> TestApp {
    let db = TestDb::create().await;
    let mut via_proxy = db.share();
    via_proxy.url = proxy.url_of(&db);
    let mut flags = vec!["--request-timeout", "2s", "--no-verifier"];
    flags.extend_from_slice(extra);
    TestApp::spawn_on(via_proxy, &flags).await
}

/// The service behind `proxy` with one write batcher, a producer `shop`
/// and one message `before` prepared while the database answered; returns
/// the service and the producer's token.
async fn one_batcher_with_a_message(proxy: &DbProxy) -> (TestApp, String) {
    let app = spawn_behind(proxy, &["--write-workers", "1"]).await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    let (status, view) = app
        .prepare(Some(&token), &prepare_body("shop", "before"))
        .await;
    assert_eq!(status, 201, "{view}");
    (app, token)
}

/// Sends one request and checks it is a 503 with `Retry-After`, answered in
/// time; returns the error code.
async fn unavailable_in_time(
    app: &TestApp,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> String {
    let http = trustmsg_tests::http_client_builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut req = http.request(method, app.url(path)).bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let start = Instant::now();
    let res = req.send().await;
    let took = start.elapsed();
    let res = res.unwrap_or_else(|e| panic!("{path}: no answer after {took:?}: {e}"));
    assert!(
        took <= TIMEOUT + SLACK,
        "{path}: answered after {took:?}, more than --request-timeout {TIMEOUT:?}"
    );
    assert_eq!(
        res.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "{path} after {took:?}"
    );
    let retry_after = res
        .headers()
        .get("retry-after")
        .unwrap_or_else(|| panic!("{path}: a 503 without Retry-After"))
        .to_str()
        .unwrap()
        .parse::<u64>()
        .unwrap_or_else(|e| panic!("{path}: Retry-After is not seconds: {e}"));
    assert!(retry_after >= 1, "{path}: Retry-After {retry_after}");
    let body: Value = res.json().await.unwrap_or(Value::Null);
    body["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_database_refusing_connections_every_request_answers_503_with_retry_after_in_time()
{
    let proxy = DbProxy::start().await;
    let app = spawn_behind(&proxy, &[]).await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    // Registered through this instance, so its entry is not cached: its token
    // check has to ask the database.
    let cold = app.register("cold", UNREACHABLE_VERIFY_URL).await;
    let (status, view) = app
        .prepare(Some(&token), &prepare_body("shop", "before"))
        .await;
    assert_eq!(status, 201, "{view}");

    proxy.refuse();
    let mut codes = Vec::new();
    let prepare = Some(prepare_body("shop", "during"));
    codes.push(
        unavailable_in_time(&app, Method::POST, "/v1/messages/prepare", &token, prepare).await,
    );
    let commit = Some(decision_body("shop", "before"));
    codes
        .push(unavailable_in_time(&app, Method::POST, "/v1/messages/commit", &token, commit).await);
    codes.push(
        unavailable_in_time(&app, Method::GET, "/v1/messages/shop/before", &token, None).await,
    );
    let token_check = Some(prepare_body("cold", "during"));
    codes.push(
        unavailable_in_time(
            &app,
            Method::POST,
            "/v1/messages/prepare",
            &cold,
            token_check,
        )
        .await,
    );
    unavailable_in_time(&app, Method::GET, "/readyz", &token, None).await;
    for code in &codes {
        assert!(
            code == "store_unavailable" || code == "request_timeout",
            "{codes:?}"
        );
    }

    proxy.restore();
    eventually(20, "a commit once the database is back", async || {
        app.commit(Some(&token), &decision_body("shop", "before"))
            .await
            .0
            == 200
    })
    .await;
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_database_hanging_requests_answer_503_in_time_and_writes_whose_caller_left_are_skipped(
) {
    let proxy = DbProxy::start().await;
    // One write batcher, so the prepares below queue behind the first.
    let (app, token) = one_batcher_with_a_message(&proxy).await;

    proxy.hang();
    let first = {
        let (app_url, token) = (app.url("/v1/messages/prepare"), token.clone());
        tokio::spawn(async move {
            let start = Instant::now();
            let res = trustmsg_tests::http_client()
                .post(app_url)
                .bearer_auth(token)
                .json(&prepare_body("shop", "stuck"))
                .timeout(Duration::from_secs(30))
                .send()
                .await;
            (res.map(|r| r.status()), start.elapsed())
        })
    };
    // The batcher now holds "stuck"; these queue behind it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let gone: Vec<String> = (0..8).map(|i| format!("gone-{i}")).collect();
    let waits = gone.iter().map(|key| {
        unavailable_in_time(
            &app,
            Method::POST,
            "/v1/messages/prepare",
            &token,
            Some(prepare_body("shop", key)),
        )
    });
    futures::future::join_all(waits).await;
    let (status, took) = first.await.unwrap();
    assert_eq!(status.unwrap(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(took <= TIMEOUT + SLACK, "the first prepare took {took:?}");

    proxy.restore();
    // The batcher works its queue in order: once this is written, every
    // prepare queued before it has been written or skipped.
    eventually(30, "a prepare once the database is back", async || {
        let (status, _) = app
            .prepare(Some(&token), &prepare_body("shop", "after"))
            .await;
        status == 201 || status == 200
    })
    .await;
    for key in &gone {
        assert_eq!(
            app.store().find_message("shop", key).await.unwrap(),
            None,
            "{key} was written after its caller had been told 503"
        );
    }
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_stuck_on_a_connection_that_never_answers_frees_its_batcher_at_the_deadline() {
    let proxy = DbProxy::start().await;
    // One write batcher: if the stuck write held it, nothing would be written.
    let (app, token) = one_batcher_with_a_message(&proxy).await;

    // The batcher's write goes out on a connection that then never answers
    // and never closes (the server vanished; a new one took its address).
    proxy.hang();
    let stuck = unavailable_in_time(
        &app,
        Method::POST,
        "/v1/messages/prepare",
        &token,
        Some(prepare_body("shop", "stuck")),
    );
    let freeze = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        proxy.freeze_open();
    };
    let (code, ()) = tokio::join!(stuck, freeze);
    assert!(
        code == "store_unavailable" || code == "request_timeout",
        "{code}"
    );

    // New connections work, so once the batcher has let go of the frozen one
    // (twice --request-timeout) and the pool has dropped its other frozen
    // connections (each at most one such deadline), prepares are written
    // again; held for good, the batcher would never write another.
    eventually(30, "a prepare on a new connection", async || {
        let (status, _) = app
            .prepare(Some(&token), &prepare_body("shop", "after"))
            .await;
        status == 201 || status == 200
    })
    .await;
    proxy.close_frozen();
    app.finish().await;
}
