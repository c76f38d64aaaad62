//! The check-back endpoint over real HTTP, with requests signed the way
//! trustmsg's verifier signs them.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use trustmsg_client::api::{signature, webhook};
use trustmsg_client::{check_router, CheckResponse, Decision};
use trustmsg_tests::{serve, Counter};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OTHER_SECRET: &str = "whsec_c29tZSBvdGhlciBzZWNyZXQ=";

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn body(message_key: &str, message_id: u64) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "biz_id": "shop",
        "message_key": message_key,
        "message_id": message_id,
        "attempt": 1,
        "prepared_at": "2026-01-01T00:00:00Z",
    }))
    .unwrap()
}

/// A check endpoint that commits `order-*` keys, rolls back the rest, and
/// fails for `broken`; it counts the calls that reach the decision function.
async fn endpoint() -> (String, Counter) {
    let calls = Counter::default();
    let c = calls.clone();
    let app = check_router(SECRET, move |req| {
        c.bump();
        async move {
            match req.message_key.as_str() {
                "broken" => Err("database down"),
                k if k.starts_with("order-") => Ok(Decision::Commit),
                _ => Ok(Decision::Rollback),
            }
        }
    });
    let addr = serve(app).await;
    (
        format!("http://{addr}{}", trustmsg_client::DEFAULT_CHECK_PATH),
        calls,
    )
}

async fn post(url: &str, headers: &[(&str, String)], body: Vec<u8>) -> (u16, Value) {
    let mut req = trustmsg_tests::http_client()
        .post(url)
        .header("content-type", "application/json")
        .body(body);
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

fn signed(secret: &str, id: &str, ts: i64, body: &[u8]) -> Vec<(&'static str, String)> {
    vec![
        (webhook::ID, id.to_string()),
        (webhook::TIMESTAMP, ts.to_string()),
        (
            webhook::SIGNATURE,
            signature::sign(secret, id, ts, body).unwrap(),
        ),
    ]
}

#[tokio::test]
async fn a_correctly_signed_request_is_answered_with_the_decision_and_its_message_id() {
    let (url, calls) = endpoint().await;
    let b = body("order-1", 4711);
    let (status, answer) = post(&url, &signed(SECRET, "msg_1", now(), &b), b).await;
    assert_eq!(status, 200, "{answer}");
    let answer: CheckResponse = serde_json::from_value(answer).unwrap();
    assert_eq!(
        answer,
        CheckResponse {
            message_id: 4711,
            decision: Decision::Commit
        }
    );

    let b = body("refund-9", 4712);
    let (status, answer) = post(&url, &signed(SECRET, "msg_2", now(), &b), b).await;
    assert_eq!(status, 200);
    assert_eq!(answer, json!({"message_id": 4712, "decision": "rollback"}));
    assert_eq!(calls.get(), 2);
}

#[tokio::test]
async fn a_rotated_secret_list_with_one_valid_signature_is_accepted() {
    let (url, _) = endpoint().await;
    let b = body("order-1", 1);
    let ts = now();
    let good = signature::sign(SECRET, "msg_r", ts, &b).unwrap();
    let stale = signature::sign(OTHER_SECRET, "msg_r", ts, &b).unwrap();
    let headers = vec![
        (webhook::ID, "msg_r".to_string()),
        (webhook::TIMESTAMP, ts.to_string()),
        (webhook::SIGNATURE, format!("{stale} {good}")),
    ];
    assert_eq!(post(&url, &headers, b).await.0, 200);
}

#[tokio::test]
async fn bad_signatures_are_rejected_with_401_without_asking_the_producer() {
    let (url, calls) = endpoint().await;
    let b = body("order-1", 1);
    let ts = now();

    // Signed with another secret.
    let (status, answer) = post(&url, &signed(OTHER_SECRET, "msg_1", ts, &b), b.clone()).await;
    assert_eq!(status, 401);
    assert_eq!(answer["error"]["code"], "bad_signature");

    // Body changed after signing.
    let headers = signed(SECRET, "msg_1", ts, &b);
    let (status, _) = post(&url, &headers, body("order-1", 2)).await;
    assert_eq!(status, 401);

    // Signature moved to another webhook-id.
    let mut headers = signed(SECRET, "msg_1", ts, &b);
    headers[0].1 = "msg_other".into();
    assert_eq!(post(&url, &headers, b.clone()).await.0, 401);

    // Not base64 / wrong scheme.
    let mut headers = signed(SECRET, "msg_1", ts, &b);
    headers[2].1 = "v1,not-base64!!".into();
    assert_eq!(post(&url, &headers, b.clone()).await.0, 401);
    let mut headers = signed(SECRET, "msg_1", ts, &b);
    headers[2].1 = headers[2].1.replacen("v1,", "v2,", 1);
    assert_eq!(post(&url, &headers, b.clone()).await.0, 401);

    // Timestamp not a number.
    let mut headers = signed(SECRET, "msg_1", ts, &b);
    headers[1].1 = "yesterday".into();
    assert_eq!(post(&url, &headers, b).await.0, 401);

    assert_eq!(
        calls.get(),
        0,
        "no unauthenticated request reaches the decision function"
    );
}

#[tokio::test]
async fn missing_signature_headers_are_rejected_with_401() {
    let (url, calls) = endpoint().await;
    let b = body("order-1", 1);
    let full = signed(SECRET, "msg_1", now(), &b);
    for missing in 0..full.len() {
        let mut headers = full.clone();
        let (name, _) = headers.remove(missing);
        let (status, answer) = post(&url, &headers, b.clone()).await;
        assert_eq!(status, 401, "without {name}");
        assert_eq!(answer["error"]["code"], "missing_signature");
    }
    assert_eq!(post(&url, &[], b).await.0, 401);
    assert_eq!(calls.get(), 0);
}

#[tokio::test]
async fn a_correctly_signed_request_replayed_too_late_is_rejected_with_401() {
    let (url, calls) = endpoint().await;
    let b = body("order-1", 1);
    // Signed six minutes ago: outside the default five-minute tolerance.
    let (status, answer) = post(&url, &signed(SECRET, "msg_1", now() - 360, &b), b.clone()).await;
    assert_eq!(status, 401);
    assert_eq!(answer["error"]["code"], "signature_expired");
    // ...and from too far in the future.
    let (status, _) = post(&url, &signed(SECRET, "msg_1", now() + 360, &b), b.clone()).await;
    assert_eq!(status, 401);
    assert_eq!(calls.get(), 0);
    // Well inside the tolerance it is accepted.
    let (status, _) = post(&url, &signed(SECRET, "msg_1", now() - 60, &b), b).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn timestamps_at_the_ends_of_i64_are_rejected_with_401_not_a_panic() {
    let (url, calls) = endpoint().await;
    let b = body("order-1", 1);
    for ts in [i64::MIN, i64::MAX] {
        let (status, answer) = post(&url, &signed(SECRET, "msg_1", ts, &b), b.clone()).await;
        assert_eq!(status, 401, "timestamp {ts}: {answer}");
        assert_eq!(answer["error"]["code"], "signature_expired");
    }
    assert_eq!(calls.get(), 0);
    // The endpoint is still there and still answers.
    let (status, _) = post(&url, &signed(SECRET, "msg_1", now(), &b), b).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_signed_body_that_is_not_a_check_request_is_400() {
    let (url, calls) = endpoint().await;
    let b = br#"{"hello":"world"}"#.to_vec();
    let (status, answer) = post(&url, &signed(SECRET, "msg_1", now(), &b), b).await;
    assert_eq!(status, 400);
    assert_eq!(answer["error"]["code"], "bad_body");
    assert_eq!(calls.get(), 0);
}

#[tokio::test]
async fn a_failing_decision_function_is_a_500_that_hides_the_cause() {
    let (url, calls) = endpoint().await;
    let b = body("broken", 1);
    let (status, answer) = post(&url, &signed(SECRET, "msg_1", now(), &b), b).await;
    assert_eq!(status, 500);
    assert_eq!(answer["error"]["code"], "decision_failed");
    assert!(!answer.to_string().contains("database down"));
    assert_eq!(calls.get(), 1);
}

#[tokio::test]
async fn an_oversized_body_is_refused() {
    let (url, calls) = endpoint().await;
    let b = vec![b' '; 65 * 1024];
    let (status, _) = post(&url, &signed(SECRET, "msg_1", now(), &b), b).await;
    assert_eq!(status, 413);
    assert_eq!(calls.get(), 0);
}

#[test]
#[should_panic(expected = "whsec_")]
fn a_malformed_secret_fails_at_start_up() {
    let _ = trustmsg_client::CheckEndpoint::new("whsec_***not base64***");
}
