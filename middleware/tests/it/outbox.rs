//! The operator surface of the outbox sources (the local message table
//! way): the real service relaying a real producer table on the test
//! server, seen and acted on through the admin API. A source is listed
//! with its relay's state and counts; its failed rows are listed, retried
//! (relayed once fixed) or given up, each action audited and guarded (409
//! on a row that is not failed); a source that does not answer is a 503
//! that names it without its password.

use serde_json::{json, Value};
use trustmsg::store::OutboxActionKind;
use trustmsg_tests::{eventually, OutboxTable, TestApp, ADMIN_TOKEN, UNREACHABLE_VERIFY_URL};
use trustmsg_verify_api::{MessageStatus, SendStatus};

/// A topic trustmsg refuses for good: the relay marks its row failed.
const BAD_TOPIC: &str = "bad topic!";

/// The service relaying `table` for the registered producer `shop`, its
/// gauges read every 100 ms; returns it and shop's token.
pub(crate) async fn relaying(table: &OutboxTable) -> (TestApp, String) {
    let source = table.source("shop");
    let app = TestApp::spawn(&[
        "--outbox-source",
        &source,
        "--outbox-interval",
        "20ms",
        "--backlog-interval",
        "100ms",
    ])
    .await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    (app, token)
}

/// A row written with a topic trustmsg refuses, once the relay failed it.
async fn failed_row(table: &OutboxTable, key: &str) -> u64 {
    let id = table.insert(key, BAD_TOPIC, "{\"amount\":1}").await;
    eventually(20, &format!("row {id} marked failed"), async || {
        table.status(id).await == 3
    })
    .await;
    id
}

/// The service relaying a fresh table with one row, `key`, that the relay
/// failed: what most tests below act on.
struct FailedRow {
    table: OutboxTable,
    app: TestApp,
    /// shop's token.
    producer: String,
    id: u64,
}

impl FailedRow {
    async fn start(key: &str) -> Self {
        let table = OutboxTable::create().await;
        let (app, producer) = relaying(&table).await;
        let id = failed_row(&table, key).await;
        Self {
            table,
            app,
            producer,
            id,
        }
    }

    /// Asserts the row's status in the table (3 failed, 2 relayed, 4 given
    /// up) and how many actions on it were audited, then ends the test.
    async fn finish(self, status: i64, audited: usize) {
        assert_eq!(self.table.status(self.id).await, status);
        let actions = self
            .app
            .store()
            .outbox_actions("shop", self.id)
            .await
            .unwrap();
        assert_eq!(actions.len(), audited, "{actions:?}");
        self.app.finish().await;
        self.table.finish().await;
    }
}

/// `source`'s view in `GET /v1/admin/outbox-sources`.
async fn source_view(app: &TestApp, source: &str) -> Value {
    let (status, body) = app.get("/v1/admin/outbox-sources", Some(ADMIN_TOKEN)).await;
    assert_eq!(status, 200, "{body}");
    body["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["biz_id"] == source)
        .unwrap_or_else(|| panic!("no source {source} in {body}"))
        .clone()
}

/// POSTs an action on a row as operator `who` (none: the default name).
async fn act(
    app: &TestApp,
    who: Option<&str>,
    path: &str,
    body: &Value,
) -> (u16, Value, reqwest::header::HeaderMap) {
    let mut req = app
        .http
        .post(app.url(path))
        .bearer_auth(ADMIN_TOKEN)
        .json(body);
    if let Some(who) = who {
        req = req.header("x-trustmsg-operator", who);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    (status, res.json().await.unwrap_or(Value::Null), headers)
}

fn ids(page: &Value) -> Vec<u64> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_u64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_shows_a_source_with_its_counts_and_its_failed_rows_are_listed() {
    let table = OutboxTable::create().await;
    let (app, _) = relaying(&table).await;
    let mut good = Vec::new();
    for key in ["order-1", "order-2", "order-3"] {
        good.push(table.insert(key, "orders", "{\"amount\":1}").await);
    }
    let bad = failed_row(&table, "order-bad").await;

    // Counted by the relay, then by the gauges (read every 100 ms).
    eventually(20, "3 relayed, 1 failed, gauges read", async || {
        let v = source_view(&app, "shop").await;
        v["relayed_total"] == 3
            && v["failed_total"] == 1
            && v["failed_rows"] == 1
            && v["pending_rows"] == 0
    })
    .await;
    let v = source_view(&app, "shop").await;
    assert_eq!(v["state"], "relaying", "{v}");
    assert_eq!(v["table"], "trustmsg_outbox", "{v}");
    let database = v["database"].as_str().unwrap();
    assert!(
        database.starts_with("mysql://") && database.ends_with(&format!("/{}", table.db.name)),
        "{v}"
    );
    assert_eq!(v["errors_total"], 0, "{v}");
    assert_eq!(v["oldest_pending_age_ms"], Value::Null, "{v}");
    for at in ["last_relayed_at", "stats_at"] {
        assert!(v[at].is_string(), "{at}: {v}");
    }

    // Failed rows by default, with why.
    let (status, page) = app
        .get("/v1/admin/outbox-sources/shop/rows", Some(ADMIN_TOKEN))
        .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(ids(&page), [bad], "{page}");
    let row = &page["items"][0];
    assert_eq!(
        (
            &row["status"],
            &row["topic"],
            &row["message_key"],
            &row["retry_count"]
        ),
        (
            &json!("failed"),
            &json!(BAD_TOPIC),
            &json!("order-bad"),
            &json!(0)
        ),
        "{page}"
    );
    assert!(
        row["fail_reason"]
            .as_str()
            .unwrap()
            .starts_with("invalid_topic"),
        "{page}"
    );
    assert!(row["last_execute_time"].is_string(), "{page}");
    assert!(row["created"].is_string(), "{page}");
    assert_eq!(page["next_after"], Value::Null, "{page}");

    // Relayed rows, a page at a time by id.
    let (_, first) = app
        .get(
            "/v1/admin/outbox-sources/shop/rows?status=relayed&limit=2",
            Some(ADMIN_TOKEN),
        )
        .await;
    assert_eq!(ids(&first), good[..2], "{first}");
    assert_eq!(first["next_after"], good[1], "{first}");
    let (_, rest) = app
        .get(
            &format!(
                "/v1/admin/outbox-sources/shop/rows?status=relayed&limit=2&after={}",
                good[1]
            ),
            Some(ADMIN_TOKEN),
        )
        .await;
    assert_eq!(ids(&rest), good[2..], "{rest}");
    assert_eq!(rest["next_after"], Value::Null, "{rest}");
    let (_, pending) = app
        .get(
            "/v1/admin/outbox-sources/shop/rows?status=pending",
            Some(ADMIN_TOKEN),
        )
        .await;
    assert_eq!(ids(&pending), Vec::<u64>::new(), "{pending}");
    app.finish().await;
    table.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_row_is_relayed_once_its_topic_is_fixed_and_the_retry_is_audited() {
    let relay = FailedRow::start("order-7").await;
    let (table, app, id) = (&relay.table, &relay.app, relay.id);
    let retry = format!("/v1/admin/outbox-sources/shop/rows/{id}/retry");

    // The producer fixes the row, then an operator retries it.
    table.set_topic(id, "orders").await;
    let (status, done, _) = act(
        app,
        Some("alice"),
        &retry,
        &json!({"reason": "topic fixed in the shop"}),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        (
            &done["biz_id"],
            &done["id"],
            &done["action"],
            &done["actor"]
        ),
        (
            &json!("shop"),
            &json!(id),
            &json!("retry"),
            &json!("operator:alice")
        ),
        "{done}"
    );
    // Pending again as a new attempt, or already relayed by now.
    let row = &done["row"];
    assert!(
        row["status"] == "pending" || row["status"] == "relayed",
        "{done}"
    );
    assert_eq!(
        (&row["retry_count"], &row["fail_reason"]),
        (&json!(1), &Value::Null),
        "{done}"
    );

    eventually(20, "the retried row relayed", async || {
        table.status(id).await == 2
    })
    .await;
    let m = app
        .store()
        .find_message("shop", "order-7")
        .await
        .unwrap()
        .expect("the retried row's message");
    assert_eq!(m.status, MessageStatus::Committed);
    assert_eq!(m.topic.as_deref(), Some("orders"));
    assert_eq!(m.send_status, Some(SendStatus::Pending));

    let audit = app.store().outbox_actions("shop", id).await.unwrap();
    assert_eq!(audit.len(), 1, "{audit:?}");
    let a = &audit[0];
    assert_eq!(
        (
            a.action,
            a.actor.as_str(),
            a.reason.as_str(),
            a.message_key.as_str()
        ),
        (
            OutboxActionKind::Retry,
            "operator:alice",
            "topic fixed in the shop",
            "order-7"
        )
    );

    // Relayed now: neither action applies, nothing is changed or audited.
    for action in ["retry", "give-up"] {
        let (status, e, _) = act(
            app,
            Some("alice"),
            &format!("/v1/admin/outbox-sources/shop/rows/{id}/{action}"),
            &json!({"reason": "again"}),
        )
        .await;
        assert_eq!(status, 409, "{action}: {e}");
        assert_eq!(e["error"]["code"], "wrong_state", "{e}");
        let said = e["error"]["message"].as_str().unwrap();
        assert!(
            said.contains(&format!("row {id}")) && said.contains("is relayed"),
            "{said}"
        );
    }
    relay.finish(2, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_given_up_row_is_never_relayed_and_the_give_up_is_audited() {
    let relay = FailedRow::start("order-9").await;
    let (table, app, id) = (&relay.table, &relay.app, relay.id);
    let (status, done, _) = act(
        app,
        None,
        &format!("/v1/admin/outbox-sources/shop/rows/{id}/give-up"),
        &json!({"reason": "the order was cancelled"}),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        (&done["action"], &done["actor"], &done["row"]["status"]),
        (
            &json!("give_up"),
            &json!("operator:admin"),
            &json!("given_up")
        ),
        "{done}"
    );
    assert_eq!(table.status(id).await, 4);
    let audit = app.store().outbox_actions("shop", id).await.unwrap();
    assert_eq!(
        audit
            .iter()
            .map(|a| (a.action, a.actor.as_str(), a.reason.as_str()))
            .collect::<Vec<_>>(),
        [(
            OutboxActionKind::GiveUp,
            "operator:admin",
            "the order was cancelled"
        )]
    );

    // No longer among the failed rows; listed as given up.
    let (_, failed) = app
        .get("/v1/admin/outbox-sources/shop/rows", Some(ADMIN_TOKEN))
        .await;
    assert_eq!(ids(&failed), Vec::<u64>::new(), "{failed}");
    let (_, given_up) = app
        .get(
            "/v1/admin/outbox-sources/shop/rows?status=given_up",
            Some(ADMIN_TOKEN),
        )
        .await;
    assert_eq!(ids(&given_up), [id], "{given_up}");

    // Even with its topic fixed, a retry is refused: it is not failed.
    table.set_topic(id, "orders").await;
    let (status, e, _) = act(
        app,
        None,
        &format!("/v1/admin/outbox-sources/shop/rows/{id}/retry"),
        &json!({"reason": "changed my mind"}),
    )
    .await;
    assert_eq!(status, 409, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is given_up"),
        "{e}"
    );
    assert!(app
        .store()
        .find_message("shop", "order-9")
        .await
        .unwrap()
        .is_none());
    relay.finish(4, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_parameters_unknown_sources_and_missing_rows_are_refused_saying_what_is_accepted() {
    let relay = FailedRow::start("order-3").await;
    let (app, id) = (&relay.app, relay.id);
    let rows = "/v1/admin/outbox-sources/shop/rows";
    for (query, code, says) in [
        (
            "status=FAILED",
            "invalid_filter",
            "failed, pending, relayed, given_up",
        ),
        (
            "status=sent",
            "invalid_filter",
            "failed, pending, relayed, given_up",
        ),
        ("limit=0", "invalid_limit", "from 1 to 1000"),
        ("limit=1001", "invalid_limit", "from 1 to 1000"),
        ("limit=ten", "invalid_limit", "from 1 to 1000"),
        ("after=-1", "invalid_filter", "after must be a row id"),
        ("cursor=abc", "invalid_filter", "status, after, limit"),
    ] {
        let (status, e) = app.get(&format!("{rows}?{query}"), Some(ADMIN_TOKEN)).await;
        assert_eq!(
            (status, &e["error"]["code"]),
            (400, &json!(code)),
            "{query}: {e}"
        );
        let message = e["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{query}: {message}");
    }

    let retry = format!("{rows}/{id}/retry");
    for (body, code) in [
        (json!({}), "invalid_reason"),
        (json!({"reason": "  "}), "invalid_reason"),
        (json!({"reason": "r", "force": true}), "invalid_body"),
    ] {
        let (status, e, _) = act(app, None, &retry, &body).await;
        assert_eq!(
            (status, &e["error"]["code"]),
            (400, &json!(code)),
            "{body}: {e}"
        );
    }
    let (status, e, _) = act(
        app,
        None,
        &format!("{rows}/x/retry"),
        &json!({"reason": "r"}),
    )
    .await;
    assert_eq!(
        (status, &e["error"]["code"]),
        (400, &json!("invalid_id")),
        "{e}"
    );
    let too_long = "x".repeat(65);
    let (status, e, _) = act(app, Some(&too_long), &retry, &json!({"reason": "r"})).await;
    assert_eq!(
        (status, &e["error"]["code"]),
        (400, &json!("invalid_operator")),
        "{e}"
    );

    // A producer this instance relays no table of; a row the table lacks.
    let (status, e) = app
        .get("/v1/admin/outbox-sources/billing/rows", Some(ADMIN_TOKEN))
        .await;
    assert_eq!(
        (status, &e["error"]["code"]),
        (404, &json!("outbox_source_not_found")),
        "{e}"
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .ends_with("it relays shop"),
        "{e}"
    );
    for action in ["retry", "give-up"] {
        let (status, e, _) = act(
            app,
            None,
            &format!("/v1/admin/outbox-sources/billing/rows/{id}/{action}"),
            &json!({"reason": "r"}),
        )
        .await;
        assert_eq!(
            (status, &e["error"]["code"]),
            (404, &json!("outbox_source_not_found")),
            "{e}"
        );
        let (status, e, _) = act(
            app,
            None,
            &format!("{rows}/{}/{action}", id + 1000),
            &json!({"reason": "r"}),
        )
        .await;
        assert_eq!(
            (status, &e["error"]["code"]),
            (404, &json!("outbox_row_not_found")),
            "{e}"
        );
    }
    // Nothing above changed or audited the failed row.
    relay.finish(3, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outbox_routes_take_the_admin_token_only() {
    let relay = FailedRow::start("order-4").await;
    let (app, producer, id) = (&relay.app, &relay.producer, relay.id);
    let reason = json!({"reason": "r"});
    for (method, path) in [
        ("GET", "/v1/admin/outbox-sources".to_string()),
        ("GET", "/v1/admin/outbox-sources/shop/rows".to_string()),
        (
            "POST",
            format!("/v1/admin/outbox-sources/shop/rows/{id}/retry"),
        ),
        (
            "POST",
            format!("/v1/admin/outbox-sources/shop/rows/{id}/give-up"),
        ),
    ] {
        for (token, want) in [(None, 401), (Some(producer.as_str()), 403)] {
            let (status, e) = if method == "GET" {
                app.get(&path, token).await
            } else {
                app.post(&path, token, &reason).await
            };
            assert_eq!(status, want, "{method} {path} with {token:?}: {e}");
        }
    }
    relay.finish(3, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_does_not_answer_is_a_503_that_names_it_without_its_password() {
    // Nothing listens on the discard port: every connection is refused.
    let app = TestApp::spawn(&[
        "--outbox-source",
        "down=mysql://relay:hunter2@127.0.0.1:9/shop",
        "--request-timeout",
        "2s",
    ])
    .await;
    eventually(20, "the source seen down", async || {
        source_view(&app, "down").await["state"] == "down"
    })
    .await;
    let v = source_view(&app, "down").await;
    assert!(!v.to_string().contains("hunter2"), "{v}");
    assert_eq!(v["database"], "mysql://relay:***@127.0.0.1:9/shop", "{v}");
    assert!(
        v["last_error"].is_string() && v["errors_total"].as_u64() >= Some(1),
        "{v}"
    );
    assert_eq!(v["pending_rows"], Value::Null, "never counted: {v}");

    let res = app
        .http
        .get(app.url("/v1/admin/outbox-sources/down/rows"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 503);
    assert_eq!(res.headers()["retry-after"], "1");
    let e: Value = res.json().await.unwrap();
    let (status, e2, headers) = act(
        &app,
        Some("alice"),
        "/v1/admin/outbox-sources/down/rows/1/retry",
        &json!({"reason": "r"}),
    )
    .await;
    assert_eq!(status, 503, "{e2}");
    assert_eq!(headers["retry-after"], "1");
    for e in [&e, &e2] {
        assert_eq!(e["error"]["code"], "outbox_source_unavailable", "{e}");
        let said = e["error"]["message"].as_str().unwrap();
        assert!(
            said.contains("producer down") && said.contains("mysql://relay:***@127.0.0.1:9/shop"),
            "{said}"
        );
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }
    // The row could not be read: nothing was audited.
    assert!(app
        .store()
        .outbox_actions("down", 1)
        .await
        .unwrap()
        .is_empty());
    app.finish().await;
}
