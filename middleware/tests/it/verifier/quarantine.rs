//! A PREPARED row the code cannot read is quarantined by the running
//! verifier: one alert, no check-back for it, and every other message is
//! still checked (before, one such row failed every claim that reached it).

use trustmsg_tests::{eventually, CheckServer, Reply};
use trustmsg_verify_api::MessageStatus;

use super::support::*;

#[tokio::test]
async fn an_unreadable_prepared_row_gets_one_alert_and_the_other_messages_are_still_checked() {
    let (app, sink) = fast_and_alerting().await;
    let server = CheckServer::start().await;
    server.default_reply(Reply::Decide("commit"));
    // The first check is due after 2 s: time to spoil a row before any claim reads it.
    let token = register(&app, "orders", &server, first_check_after_ms(2000)).await;
    let mut good = Vec::new();
    for key in ["good-1", "good-2", "good-3"] {
        good.push(prepare(&app, &token, "orders", key).await);
    }
    let bad = prepare(&app, &token, "orders", "bad").await;
    let db = app.db.pool().await;
    let spoiled = sqlx::query("UPDATE messages SET headers = 'not json' WHERE id = ?")
        .bind(bad)
        .execute(&db)
        .await
        .unwrap();
    assert_eq!(spoiled.rows_affected(), 1);

    eventually(
        15,
        "the readable messages committed by check-back",
        async || all_have_status(&app, &good, MessageStatus::Committed).await,
    )
    .await;
    eventually(5, "the quarantine alert", async || {
        !sink.alerts().is_empty()
    })
    .await;
    // Many verifier rounds later nothing more has happened.
    app.after_rounds("trustmsg_verify_rounds_total", 10).await;

    let alerts = sink.alerts();
    assert_eq!(alerts.len(), 1, "exactly one alert: {alerts:?}");
    assert_eq!(alerts[0]["kind"], "quarantined");
    assert_eq!(alerts[0]["message_id"], bad);
    assert_eq!(alerts[0]["biz_id"], "orders");
    assert_eq!(alerts[0]["message_key"], "bad");
    let why = alerts[0]["last_error"].as_str().unwrap_or_default();
    assert!(why.contains("headers"), "{why}");
    assert_eq!(server.calls("bad"), 0, "an unreadable row is never checked");
    let (out_of_scan,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM messages WHERE id = ? AND status = 'PREPARED' \
         AND next_verify_at IS NULL AND last_error LIKE 'quarantined: %'",
    )
    .bind(bad)
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(out_of_scan, 1, "the row is set aside, its reason stored");
    db.close().await;
    app.finish().await;
}
