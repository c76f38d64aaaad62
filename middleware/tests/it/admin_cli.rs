//! `trustmsg admin`, the real binary against a running service: readable
//! tables, `--json` for scripts, and a non-zero exit with the server's
//! message on any error.

use std::process::Output;

use serde_json::Value;
use trustmsg_tests::flags::{flags, refs};
use trustmsg_tests::{prepare_body, TestApp, ADMIN_TOKEN};

use crate::flags::CHECK_AT_ONCE;

/// Runs `trustmsg admin --url <app> --admin-token <token> <args…>`.
async fn admin(app: &TestApp, token: &str, args: &[&str]) -> Output {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_trustmsg"));
    cmd.args([
        "admin",
        "--url",
        &app.base_url(),
        "--admin-token",
        token,
        "--operator",
        "cli-op",
    ])
    .args(args)
    .env_remove("TRUSTMSG_LOG");
    cmd.output().await.unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `trustmsg admin <args…>` with the admin token and asserts it
/// succeeded.
async fn admin_ok(app: &TestApp, args: &[&str]) -> Output {
    let out = admin(app, ADMIN_TOKEN, args).await;
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

/// Asserts `out` exited 1 and its error says `says`.
fn assert_refused(out: &Output, says: &str) {
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(out).contains(says), "{}", stderr(out));
}

/// `trustmsg admin messages resolve <id> --decision <decision> --reason <reason>`.
async fn resolve(app: &TestApp, id: u64, decision: &str, reason: &str) -> Output {
    let id = id.to_string();
    let args = [
        "messages",
        "resolve",
        &id,
        "--decision",
        decision,
        "--reason",
        reason,
    ];
    admin(app, ADMIN_TOKEN, &args).await
}

/// The cells of a table row, trimmed, without the empty ones at its edges.
fn cells(row: &str) -> Vec<&str> {
    row.split('|')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_finds_reads_and_resolves_a_failed_message_from_the_terminal() {
    let app = TestApp::spawn(&refs(&flags(&[
        CHECK_AT_ONCE,
        &["--verify-backoff-base", "20ms"],
    ])))
    .await;
    let token = app.register_giving_up_after_one_check("shop").await;
    let (status, view) = app
        .prepare(Some(&token), &prepare_body("shop", "lost-order"))
        .await;
    assert_eq!(status, 201, "{view}");
    let id = view["id"].as_u64().unwrap();
    trustmsg_tests::eventually(20, "VERIFY_FAILED", async || {
        app.store()
            .find_message_by_id(id)
            .await
            .unwrap()
            .unwrap()
            .status
            == trustmsg_verify_api::MessageStatus::VerifyFailed
    })
    .await;

    let out = admin_ok(&app, &["summary"]).await;
    let table = stdout(&out);
    assert!(
        table.contains("producer") && table.contains("verify failed"),
        "{table}"
    );
    let row = table
        .lines()
        .find(|l| l.contains("shop"))
        .expect("a row for shop");
    let cells = cells(row);
    // producer, prepared, verify failed
    assert_eq!(&cells[..3], ["shop", "0", "1"], "{table}");

    let out = admin_ok(&app, &["messages", "list", "--status", "VERIFY_FAILED"]).await;
    let list = stdout(&out);
    assert!(
        list.contains("lost-order") && list.contains("VERIFY_FAILED"),
        "{list}"
    );

    let out = admin_ok(&app, &["--json", "messages", "show", &id.to_string()]).await;
    let detail: Value = serde_json::from_slice(&out.stdout).expect("--json prints JSON");
    assert_eq!(detail["message"]["status"], "VERIFY_FAILED");
    assert_eq!(detail["check_attempts"][0]["outcome"], "failed");

    let out = admin(&app, ADMIN_TOKEN, &["messages", "show", &id.to_string()]).await;
    let shown = stdout(&out);
    assert!(
        shown.contains("{\"amount\":42}") && shown.contains("check-back calls"),
        "{shown}"
    );

    let out = resolve(&app, id, "commit", "found the order").await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("COMMITTED"), "{}", stdout(&out));
    let trail = app.store().audit_trail(id).await.unwrap();
    let last = trail.last().unwrap();
    assert_eq!(
        (last.actor.as_str(), last.reason.as_str()),
        ("operator:cli-op", "found the order")
    );

    // Errors: the server's code and message, exit 1.
    let out = resolve(&app, id, "rollback", "r").await;
    assert_refused(&out, "409 wrong_state");
    let out = admin(&app, "wrong-token", &["summary"]).await;
    assert_refused(&out, "401 unauthorized");
    let out = admin(&app, ADMIN_TOKEN, &["messages", "list", "--limit", "501"]).await;
    assert_refused(&out, "invalid_limit");
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_are_registered_listed_rotated_and_deleted_from_the_terminal() {
    let app = TestApp::spawn_sqlite(&["--no-verifier"]).await;
    let out = admin_ok(
        &app,
        &[
            "producers",
            "put",
            "billing",
            "--verify-url",
            "http://127.0.0.1:9/check",
            "--max-verify-attempts",
            "7",
        ],
    )
    .await;
    let put = stdout(&out);
    assert!(put.contains("token") && put.contains("shown once"), "{put}");

    let out = admin(&app, ADMIN_TOKEN, &["producers", "list"]).await;
    let list = stdout(&out);
    assert!(
        list.contains("billing") && list.contains("http://127.0.0.1:9/check"),
        "{list}"
    );

    let out = admin_ok(&app, &["--json", "producers", "rotate-token", "billing"]).await;
    let rotated: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(rotated["token"].as_str().unwrap().starts_with("tm_"));

    admin_ok(&app, &["producers", "delete", "billing"]).await;
    let out = admin(&app, ADMIN_TOKEN, &["producers", "show", "billing"]).await;
    assert_refused(&out, "404 producer_not_found");
    app.finish().await;
}

#[tokio::test]
async fn an_unreachable_service_is_an_error_that_says_where_it_looked() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_trustmsg"))
        .args([
            "admin",
            "--url",
            "http://127.0.0.1:9",
            "--admin-token",
            "t",
            "summary",
        ])
        .output()
        .await
        .unwrap();
    assert_refused(&out, "cannot reach trustmsg at http://127.0.0.1:9");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_sees_an_alert_the_webhook_refused_as_pending_with_its_error() {
    let sink = trustmsg_tests::AlertSink::start().await;
    sink.answer(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
    let webhook = sink.url();
    let app = TestApp::spawn(&refs(&flags(&[
        CHECK_AT_ONCE,
        &["--alert-webhook", &webhook],
    ])))
    .await;
    let token = app.register_giving_up_after_one_check("shop").await;
    let (_, view) = app
        .prepare(Some(&token), &prepare_body("shop", "lost-order"))
        .await;
    let id = view["id"].as_u64().unwrap();
    trustmsg_tests::eventually(20, "the webhook refused the alert", async || {
        sink.refused() >= 1
    })
    .await;

    // The sink counts the refusal as it answers; the service records the
    // answer on the alert right after: read until it shows.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let row = loop {
        let out = admin_ok(&app, &["alerts", "--state", "pending"]).await;
        let table = stdout(&out);
        if let Some(row) = table
            .lines()
            .find(|l| l.contains("lost-order") && l.contains("answered 500"))
        {
            break row.to_string();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no row for the alert with the webhook's answer: {table}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    for cell in ["verify_failed", &id.to_string(), "pending", "answered 500"] {
        assert!(row.contains(cell), "{cell} in {row}");
    }

    let out = admin_ok(&app, &["--json", "alerts", "--message-id", &id.to_string()]).await;
    let page: Value = serde_json::from_slice(&out.stdout).unwrap();
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{page}");
    assert_eq!(items[0]["kind"], "verify_failed");
    assert_eq!(items[0]["state"], "pending");
    assert!(items[0]["alert_id"].as_u64().is_some());

    let out = admin(&app, ADMIN_TOKEN, &["alerts", "--state", "lost"]).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("state must be one of"),
        "{}",
        stderr(&out)
    );
    app.finish().await;
}

#[tokio::test]
async fn an_ordered_producer_and_a_message_blocked_behind_its_keys_head_show_in_the_terminal() {
    let app = TestApp::spawn_sqlite(&["--no-verifier"]).await;
    let out = admin_ok(
        &app,
        &[
            "--json",
            "producers",
            "put",
            "shop",
            "--verify-url",
            "http://127.0.0.1:9/check",
            "--ordered",
        ],
    )
    .await;
    let put: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(put["ordered"], true, "{put}");
    let token = put["token"].as_str().unwrap().to_string();
    let out = admin(&app, ADMIN_TOKEN, &["producers", "show", "shop"]).await;
    assert!(
        stdout(&out).contains("yes (in order per key)"),
        "{}",
        stdout(&out)
    );

    // Two messages of one record key: the second waits behind the first.
    let mut ids = Vec::new();
    for key in ["first", "second"] {
        let (status, view) = app.prepare(Some(&token), &prepare_body("shop", key)).await;
        assert_eq!(status, 201, "{view}");
        ids.push(view["id"].as_u64().unwrap());
        let (status, view) = app
            .commit(Some(&token), &trustmsg_tests::decision_body("shop", key))
            .await;
        assert_eq!(status, 200, "{view}");
    }
    let second = ids[1].to_string();
    let out = admin_ok(&app, &["messages", "show", &second]).await;
    let shown = stdout(&out);
    assert!(
        shown.contains(&format!("blocked by: message {}", ids[0]))
            && shown.contains("place in its key: 2"),
        "{shown}"
    );
    // Skip applies to a SEND_FAILED head only.
    let out = admin(
        &app,
        ADMIN_TOKEN,
        &["messages", "skip", &second, "--reason", "not the head"],
    )
    .await;
    assert_refused(&out, "409 wrong_state");
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_sees_when_a_delayed_message_is_due_and_sends_it_now_from_the_terminal() {
    let app = TestApp::spawn(&[]).await;
    let mut body = prepare_body("shop", "reminder");
    body["deliver_after_ms"] = 3_600_000.into();
    let (status, view) = app.prepare(Some(ADMIN_TOKEN), &body).await;
    assert_eq!(status, 201, "{view}");
    let id = view["id"].as_u64().unwrap().to_string();
    let (status, view) = app
        .commit(
            Some(ADMIN_TOKEN),
            &trustmsg_tests::decision_body("shop", "reminder"),
        )
        .await;
    assert_eq!(status, 200, "{view}");

    let out = admin_ok(&app, &["messages", "show", &id]).await;
    let shown = stdout(&out);
    let due = shown
        .lines()
        .find(|l| l.trim_start().starts_with("due at:"))
        .unwrap_or_else(|| panic!("a due-at line: {shown}"));
    assert!(!due.ends_with('-'), "{shown}");
    let list = stdout(&admin(&app, ADMIN_TOKEN, &["messages", "list"]).await);
    assert!(list.contains("due at"), "{list}");
    let summary = stdout(&admin(&app, ADMIN_TOKEN, &["summary"]).await);
    assert!(summary.contains("scheduled"), "{summary}");
    let row = summary.lines().find(|l| l.contains("shop")).unwrap();
    let cells = cells(row);
    // producer, prepared, verify failed, pending, scheduled
    assert_eq!(&cells[..5], ["shop", "0", "0", "0", "1"], "{summary}");

    let args = ["messages", "send-now", &id, "--reason", "customer asked"];
    let out = admin_ok(&app, &args).await;
    assert!(
        stdout(&out).contains("COMMITTED / PENDING"),
        "{}",
        stdout(&out)
    );
    let out = admin(&app, ADMIN_TOKEN, &args).await;
    assert!(
        !out.status.success(),
        "its time has come: a second send-now is refused"
    );
    assert!(stderr(&out).contains("send-now"), "{}", stderr(&out));
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_lists_outbox_sources_and_retries_and_gives_up_failed_rows_from_the_terminal() {
    let table = trustmsg_tests::OutboxTable::create().await;
    let (app, _) = crate::outbox::relaying(&table).await;
    let fixed = table.insert("order-1", "bad topic!", "{}").await;
    let dropped = table.insert("order-2", "bad topic!", "{}").await;
    trustmsg_tests::eventually(20, "both rows failed and counted", async || {
        let (_, list) = app.get("/v1/admin/outbox-sources", Some(ADMIN_TOKEN)).await;
        list["items"][0]["failed_rows"] == 2
    })
    .await;

    let out = admin_ok(&app, &["outbox-sources"]).await;
    let sources = stdout(&out);
    let row = sources
        .lines()
        .find(|l| l.contains("shop"))
        .unwrap_or_else(|| panic!("a row for shop: {sources}"));
    let cells = cells(row);
    // producer, state, pending, oldest pending, failed rows
    assert_eq!(
        &cells[..5],
        ["shop", "relaying", "0", "-", "2"],
        "{sources}"
    );
    assert!(
        sources.contains("table trustmsg_outbox in mysql://"),
        "{sources}"
    );

    let out = admin_ok(&app, &["outbox-rows", "shop", "--limit", "1"]).await;
    let rows = stdout(&out);
    assert!(
        rows.contains("order-1") && rows.contains("failed") && rows.contains("invalid_topic"),
        "{rows}"
    );
    assert!(!rows.contains("order-2"), "one row per page: {rows}");
    assert!(rows.contains(&format!("more: --after {fixed}")), "{rows}");

    table.set_topic(fixed, "orders").await;
    let out = admin_ok(
        &app,
        &[
            "outbox-retry",
            "shop",
            &fixed.to_string(),
            "--reason",
            "topic fixed",
        ],
    )
    .await;
    assert!(
        stdout(&out).contains(&format!(
            "outbox row {fixed} of shop: retried by operator:cli-op"
        )),
        "{}",
        stdout(&out)
    );
    let out = admin_ok(
        &app,
        &[
            "--json",
            "outbox-give-up",
            "shop",
            &dropped.to_string(),
            "--reason",
            "order cancelled",
        ],
    )
    .await;
    let done: Value = serde_json::from_slice(&out.stdout).expect("--json prints JSON");
    assert_eq!(done["row"]["status"], "given_up", "{done}");
    assert_eq!(table.status(dropped).await, 4);
    trustmsg_tests::eventually(20, "the retried row relayed", async || {
        table.status(fixed).await == 2
    })
    .await;

    // Nothing failed is left; a second give-up is refused with the server's word.
    let out = admin(&app, ADMIN_TOKEN, &["outbox-rows", "shop"]).await;
    assert_eq!(stdout(&out).trim(), "no row matches");
    let out = admin(
        &app,
        ADMIN_TOKEN,
        &[
            "outbox-give-up",
            "shop",
            &dropped.to_string(),
            "--reason",
            "again",
        ],
    )
    .await;
    assert_refused(&out, "409 wrong_state");
    assert!(stderr(&out).contains("is given_up"), "{}", stderr(&out));
    app.finish().await;
    table.finish().await;
}
