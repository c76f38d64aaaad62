//! What a request may cost before it is trusted: the token is checked before
//! the body is read, decisions have a small body limit, and requests beyond
//! the concurrency limit are shed with 503.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use trustmsg_tests::{decision_body, prepare_body, TestApp};

const VERIFY: &str = "http://127.0.0.1:9/check";

/// Sends a POST whose head announces `content_length` body bytes but sends
/// only `body_start` of them, and keeps the connection open.
async fn start_post(
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
    content_length: usize,
    body_start: &str,
) -> TcpStream {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let auth = token.map_or(String::new(), |t| format!("authorization: Bearer {t}\r\n"));
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: trustmsg\r\n{auth}content-type: application/json\r\n\
         content-length: {content_length}\r\n\r\n{body_start}"
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn
}

/// The status and JSON body of the response on `conn`, if one arrives within `wait`.
async fn response_within(conn: &mut TcpStream, wait: Duration) -> Option<(u16, Value)> {
    let deadline = Instant::now() + wait;
    let mut buf = Vec::new();
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let status = head.split(' ').nth(1)?.parse().ok()?;
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if buf.len() >= end + 4 + len {
                let body =
                    serde_json::from_slice(&buf[end + 4..end + 4 + len]).unwrap_or(Value::Null);
                return Some((status, body));
            }
        }
        let left = deadline.checked_duration_since(Instant::now())?;
        let mut chunk = [0u8; 4096];
        match tokio::time::timeout(left, conn.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return None,
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

#[tokio::test]
async fn a_request_without_a_valid_token_is_refused_before_its_body_is_read() {
    let app = TestApp::spawn(&[]).await;
    app.register("orders", VERIFY).await;
    let five_mib = 5 * 1024 * 1024;
    for (path, token) in [
        ("/v1/messages/prepare", None),
        ("/v1/messages/prepare", Some("tm_b3JkZXJz.forged")),
        ("/v1/messages/commit", Some("tm_b3JkZXJz.forged")),
        ("/v1/messages/rollback", Some("nonsense")),
        (
            "/v1/producers/orders/rotate-token",
            Some("wrong-admin-token"),
        ),
    ] {
        // The body never completes: an answer can only come from the head.
        let mut conn = start_post(app.addr, path, token, five_mib, "{\"biz_id\":\"orders\",").await;
        let answer = response_within(&mut conn, Duration::from_secs(3)).await;
        let Some((status, body)) = answer else {
            panic!("{path} {token:?}: no answer while the body is incomplete");
        };
        assert_eq!(status, 401, "{path} {token:?}: {body}");
        assert_eq!(body["error"]["code"], "unauthorized", "{body}");
    }
    app.finish().await;
}

#[tokio::test]
async fn commit_and_rollback_bodies_over_8_kib_are_refused_and_change_nothing() {
    let app = TestApp::spawn(&[]).await;
    let token = app.register("orders", VERIFY).await;
    let (s, _) = app
        .prepare(Some(&token), &prepare_body("orders", "o-1"))
        .await;
    assert_eq!(s, 201);
    for path in ["/v1/messages/commit", "/v1/messages/rollback"] {
        let mut body = decision_body("orders", "o-1");
        body["padding"] = json!("x".repeat(100 * 1024));
        let (s, err) = app.post(path, Some(&token), &body).await;
        assert_eq!(s, 413, "{path}: {err}");
        assert_eq!(err["error"]["code"], "payload_too_large", "{err}");
    }
    let (_, view) = app.get("/v1/messages/orders/o-1", Some(&token)).await;
    assert_eq!(view["status"], "PREPARED", "nothing was decided: {view}");
    let (s, view) = app
        .commit(Some(&token), &decision_body("orders", "o-1"))
        .await;
    assert_eq!((s, view["status"].as_str()), (200, Some("COMMITTED")));
    app.finish().await;
}

#[tokio::test]
async fn requests_over_the_concurrency_limit_are_shed_with_503_and_our_error_body() {
    let app = TestApp::spawn(&["--max-concurrent-requests", "1"]).await;
    let token = app.register("orders", VERIFY).await;
    // An authenticated prepare whose body is still coming holds the one slot.
    let held = start_post(app.addr, "/v1/messages/prepare", Some(&token), 1000, "{").await;
    // Polled below until the slot is taken (404 until then).
    let deadline = Instant::now() + Duration::from_secs(5);
    let shed = loop {
        let res = app
            .http
            .get(app.url("/v1/messages/orders/o-1"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        if res.status() == 503 {
            break res;
        }
        assert_eq!(res.status(), 404, "before the slot is taken");
        assert!(
            Instant::now() < deadline,
            "never shed while a request is held"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        shed.headers().contains_key("retry-after"),
        "{:?}",
        shed.headers()
    );
    let err: Value = shed.json().await.unwrap();
    assert_eq!(err["error"]["code"], "overloaded", "{err}");
    let (s, _) = app.get("/healthz", None).await;
    assert_eq!(s, 200, "health checks are not shed");

    drop(held);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (s, err) = app.get("/v1/messages/orders/o-1", Some(&token)).await;
        if s == 404 {
            break;
        }
        assert_eq!(s, 503, "{err}");
        assert!(Instant::now() < deadline, "the slot is never given back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    app.finish().await;
}
