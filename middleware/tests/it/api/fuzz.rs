//! Arbitrary requests against the real router (issue 10): any method, path,
//! token, headers and body — arbitrary JSON, near-valid prepares with fields
//! of the wrong type or size, raw bytes. Bad input must get a 4xx whose body
//! is `{"error": {"code", "message"}}`, never a 5xx or a dropped connection,
//! and a refused prepare must leave no row behind. `PROPTEST_CASES` raises
//! the number of cases (default 3,000).
//!
//! The admin token's producer actions (rotate, delete, re-create) target
//! another producer than the one whose token the cases carry, so that token
//! stays valid through the run: a case with it is never answered 401.

use std::collections::HashSet;
use std::sync::Mutex;

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use reqwest::Method;
use serde_json::Value;
use trustmsg_tests::{prepare_body, TestApp, ADMIN_TOKEN, UNREACHABLE_VERIFY_URL};

/// One generated request.
#[derive(Debug, Clone)]
struct Req {
    method: Method,
    path: String,
    auth: Auth,
    headers: Vec<(String, String)>,
    body: Body,
}

#[derive(Debug, Clone)]
enum Auth {
    None,
    Producer,
    Admin,
    Other(String),
}

#[derive(Debug, Clone)]
enum Body {
    None,
    Json(Value),
    Raw(Vec<u8>, String),
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON has no NaN", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,40}".prop_map(Value::from),
        "[\\x00-\\x1f]{1,8}".prop_map(Value::from),
        (0usize..3000).prop_map(|n| Value::from("x".repeat(n))),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..5).prop_map(Value::Array),
            btree_map(".{0,12}", inner, 0..5).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A string that is sometimes right and often not.
fn field(good: &'static [&'static str]) -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => proptest::sample::select(good).prop_map(Value::from),
        2 => ".{0,300}".prop_map(Value::from),
        1 => json(),
    ]
}

/// A prepare, commit or rollback body with some fields wrong.
fn near_valid() -> impl Strategy<Value = Value> {
    (
        field(&["shop", "other", ""]),
        field(&["k-1", "k 2", "k/3", "ключ"]),
        field(&["orders", "bad topic", "a.b-c_d"]),
        field(&["key-1"]),
        field(&["{\"amount\":1}", "aGVsbG8=", "!!not base64"]),
        field(&["utf8", "base64", "hex"]),
        prop_oneof![
            json(),
            btree_map("[a-zA-Z-]{0,20}", field(&["v"]), 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect()))
        ],
        0u8..8,
    )
        .prop_map(
            |(biz, key, topic, rkey, payload, enc, headers, drop_mask)| {
                let mut o = serde_json::Map::new();
                for (i, (name, v)) in [
                    ("biz_id", biz),
                    ("message_key", key),
                    ("topic", topic),
                    ("key", rkey),
                    ("payload", payload),
                    ("payload_encoding", enc),
                    ("headers", headers),
                ]
                .into_iter()
                .enumerate()
                {
                    if i >= 3 || drop_mask & (1 << i) == 0 {
                        o.insert(name.to_string(), v);
                    }
                }
                Value::Object(o)
            },
        )
}

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("shop".to_string()),
        Just("k-1".to_string()),
        ".{0,80}".prop_map(|s| url::form_urlencoded::byte_serialize(s.as_bytes()).collect()),
    ]
}

/// A producer path segment: never `shop`, whose token the cases carry (an
/// admin rotate or delete of it would leave every later case a 401), but
/// often `other`, a registered producer the admin actions may change.
fn producer_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(OTHER.to_string()),
        ".{0,80}"
            .prop_map(|s| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>())
            .prop_filter("not the producer under test", |s| s != SHOP),
    ]
}

const SHOP: &str = "shop";
const OTHER: &str = "other";

fn requests() -> impl Strategy<Value = Req> {
    let method = proptest::sample::select(vec![
        Method::GET,
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::PATCH,
    ]);
    let path = prop_oneof![
        3 => proptest::sample::select(vec![
            "/v1/messages/prepare",
            "/v1/messages/commit",
            "/v1/messages/rollback",
        ])
        .prop_map(String::from),
        1 => (segment(), segment()).prop_map(|(a, b)| format!("/v1/messages/{a}/{b}")),
        1 => producer_segment().prop_map(|a| format!("/v1/producers/{a}")),
        1 => producer_segment().prop_map(|a| format!("/v1/producers/{a}/rotate-token")),
        1 => segment().prop_map(|a| format!("/{a}")),
    ];
    let auth = prop_oneof![
        1 => Just(Auth::None),
        4 => Just(Auth::Producer),
        1 => Just(Auth::Admin),
        1 => "[ -~]{0,300}".prop_map(Auth::Other),
    ];
    let headers = vec(("[a-z][a-z0-9-]{0,20}", "[ -~]{0,200}"), 0..3);
    let body = prop_oneof![
        1 => Just(Body::None),
        4 => near_valid().prop_map(Body::Json),
        2 => json().prop_map(Body::Json),
        1 => (vec(any::<u8>(), 0..500), proptest::sample::select(vec![
            "application/json", "text/plain", "application/x-www-form-urlencoded", "",
        ]))
        .prop_map(|(b, ct)| Body::Raw(b, ct.to_string())),
    ];
    (method, path, auth, headers, body).prop_map(|(method, path, auth, headers, body)| Req {
        method,
        path,
        auth,
        headers,
        body,
    })
}

/// Sends `req`; checks the answer; returns (status, prepare key) for the
/// half-write check.
async fn check(app: &TestApp, token: &str, req: &Req) -> Result<u16, TestCaseError> {
    let mut r = app.http.request(req.method.clone(), app.url(&req.path));
    r = match &req.auth {
        Auth::None => r,
        Auth::Producer => r.bearer_auth(token),
        Auth::Admin => r.bearer_auth(ADMIN_TOKEN),
        Auth::Other(t) => r.header("authorization", t.as_str()),
    };
    for (k, v) in &req.headers {
        // The reserved names are the client's to set.
        if ![
            "content-length",
            "host",
            "transfer-encoding",
            "connection",
            "content-type",
        ]
        .contains(&k.as_str())
        {
            r = r.header(k.as_str(), v.as_str());
        }
    }
    r = match &req.body {
        Body::None => r,
        Body::Json(v) => r.json(v),
        Body::Raw(b, ct) => {
            let r = r.body(b.clone());
            if ct.is_empty() {
                r
            } else {
                r.header("content-type", ct.as_str())
            }
        }
    };
    let res = r
        .send()
        .await
        .map_err(|e| TestCaseError::fail(format!("no answer: {e}")))?;
    let status = res.status().as_u16();
    let bytes = res.bytes().await.unwrap_or_default();
    prop_assert!(
        status < 500,
        "{status} for {req:?}: {}",
        String::from_utf8_lossy(&bytes)
    );
    // The producer's token is valid for the whole run: it may be refused a
    // resource (403), never unknown (401).
    prop_assert!(
        !(matches!(req.auth, Auth::Producer) && status == 401),
        "the producer token was refused as unknown for {req:?}: {}",
        String::from_utf8_lossy(&bytes)
    );
    if status >= 400 {
        let body: Value = serde_json::from_slice(&bytes).map_err(|e| {
            TestCaseError::fail(format!(
                "{status} without a JSON error body ({e}) for {req:?}: {:?}",
                String::from_utf8_lossy(&bytes)
            ))
        })?;
        prop_assert!(
            body["error"]["code"].is_string() && body["error"]["message"].is_string(),
            "{status} body {body} for {req:?}"
        );
    }
    Ok(status)
}

#[test]
fn arbitrary_requests_get_a_4xx_with_an_error_body_never_a_5xx_and_write_nothing_when_refused() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (app, token) = rt.block_on(async {
        let app = TestApp::spawn(&["--no-verifier"]).await;
        let token = app.register(SHOP, UNREACHABLE_VERIFY_URL).await;
        app.register(OTHER, UNREACHABLE_VERIFY_URL).await;
        (app, token)
    });
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(3000);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    // Keys a prepare created: a later refused prepare of the same key finds
    // that row, which is not a half-write.
    let created: Mutex<HashSet<String>> = Mutex::default();
    runner
        .run(&requests(), |req| {
            rt.block_on(async {
                let status = check(&app, &token, &req).await?;
                let Body::Json(body) = &req.body else {
                    return Ok(());
                };
                let (Some("shop"), Some(key)) =
                    (body["biz_id"].as_str(), body["message_key"].as_str())
                else {
                    return Ok(());
                };
                if status < 300 {
                    // A prepare, or a rollback's tombstone.
                    created.lock().unwrap().insert(key.to_string());
                    return Ok(());
                }
                let prepare = req.method == Method::POST && req.path == "/v1/messages/prepare";
                if prepare && !created.lock().unwrap().contains(key) {
                    let row = app.store().find_message("shop", key).await.ok().flatten();
                    prop_assert!(
                        row.is_none(),
                        "refused prepare ({status}) left {row:?} for {req:?}"
                    );
                }
                Ok(())
            })
        })
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{cases} arbitrary requests, none answered 5xx");
    rt.block_on(async {
        let (status, view) = app
            .prepare(Some(&token), &prepare_body(SHOP, "after-the-run"))
            .await;
        assert_eq!(status, 201, "the producer token still works: {view}");
        app.finish().await
    });
}
