//! What a person on call does in the console, in a real browser.

use trustmsg_tests::TestApp;

use crate::harness::Browser;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_in_while_the_service_is_unreachable_says_so_and_keeps_no_token() {
    let app = TestApp::spawn_sqlite(&["--no-verifier"]).await;
    let browser = Browser::start(1280, 900).await;
    browser.client.goto(&app.url("/console")).await.unwrap();
    browser.element("#token").await;
    // The page is loaded; now the service goes away.
    let url = app.url("/console");
    app.finish().await;
    browser.fill("#token", "test-admin-token").await;
    browser.click("#sign-in").await;
    let text = browser.until_text("could not be reached").await;
    assert!(text.contains("Sign in"), "{text}");
    let kept: serde_json::Value = browser
        .client
        .execute(
            "return sessionStorage.getItem('trustmsg.admin_token')",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        kept,
        serde_json::Value::Null,
        "a refused sign-in keeps no token ({url})"
    );
    browser.finish().await;
}
