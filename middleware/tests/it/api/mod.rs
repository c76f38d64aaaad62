//! API tests: the real service on port 0 over a fresh MariaDB database
//! (and, in `sqlite`, a smoke test over a fresh SQLite file).

mod admin;
mod admin_actions;
mod auth;
mod concurrency;
mod console;
mod consumer_groups;
mod fuzz;
mod limits;
mod messages;
mod outage;
mod producers;
mod sqlite;
mod validation;

use serde_json::Value;
use trustmsg_tests::{TestApp, ADMIN_TOKEN};

/// `PUT <path>` with `body` and the admin token: the status and the body
/// of the answer.
async fn admin_put(app: &TestApp, path: &str, body: &Value) -> (u16, Value) {
    let res = app
        .http
        .put(app.url(path))
        .bearer_auth(ADMIN_TOKEN)
        .json(body)
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}
