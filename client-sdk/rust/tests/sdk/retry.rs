//! Retries, against a local server that fails on purpose and counts requests.

use std::time::{Duration, Instant};

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use trustmsg_client::{Error, MessageStatus, Producer};
use trustmsg_tests::{fast_retry, serve, Counter};

fn committed_view() -> Value {
    json!({
        "id": 7, "biz_id": "shop", "message_key": "o-1", "topic": "orders", "key": null,
        "status": "COMMITTED", "send_status": "PENDING", "verify_attempts": 0,
        "send_attempts": 0, "last_error": null, "payload_size": 2,
        "next_verify_at": null, "next_send_at": null, "kafka_partition": null,
        "kafka_offset": null, "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:01Z", "decided_at": "2026-01-01T00:00:01Z",
        "sent_at": null
    })
}

/// A commit endpoint that answers `fail_status` for the first `failures`
/// requests and a committed view after that.
async fn flaky(failures: u32, fail_status: StatusCode) -> (String, Counter) {
    flaky_asking(failures, fail_status, None).await
}

/// [`flaky`], with `Retry-After: <retry_after>` on each failure when given.
async fn flaky_asking(
    failures: u32,
    fail_status: StatusCode,
    retry_after: Option<&'static str>,
) -> (String, Counter) {
    let counter = Counter::default();
    let c = counter.clone();
    let app = Router::new().route(
        "/v1/messages/commit",
        post(move || {
            let c = c.clone();
            async move {
                if c.bump() <= failures {
                    let mut res = (
                        fail_status,
                        Json(json!({"error": {"code": "injected", "message": "injected failure"}})),
                    )
                        .into_response();
                    if let Some(after) = retry_after {
                        res.headers_mut()
                            .insert(header::RETRY_AFTER, HeaderValue::from_static(after));
                    }
                    res
                } else {
                    (StatusCode::OK, Json(committed_view())).into_response()
                }
            }
        }),
    );
    (format!("http://{}", serve(app).await), counter)
}

#[tokio::test]
async fn a_503_with_retry_after_is_retried_no_sooner_than_the_server_asked() {
    let (url, count) = flaky_asking(1, StatusCode::SERVICE_UNAVAILABLE, Some("1")).await;
    // The policy alone would retry within 50 ms.
    let p = Producer::new(&url, "shop", "t")
        .unwrap()
        .with_retry(fast_retry(3));
    let start = Instant::now();
    let view = p.commit("o-1").await.unwrap();
    let took = start.elapsed();
    assert_eq!(view.status, MessageStatus::Committed);
    assert_eq!(count.get(), 2);
    assert!(
        took >= Duration::from_secs(1),
        "retried after {took:?}, before the 1 s Retry-After"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[tokio::test]
async fn a_retry_after_that_is_not_seconds_leaves_the_policy_in_charge() {
    let date = "Wed, 21 Oct 2015 07:28:00 GMT";
    let (url, count) = flaky_asking(2, StatusCode::SERVICE_UNAVAILABLE, Some(date)).await;
    let p = Producer::new(&url, "shop", "t")
        .unwrap()
        .with_retry(fast_retry(3));
    let start = Instant::now();
    p.commit("o-1").await.unwrap();
    assert_eq!(count.get(), 3);
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
}

/// Contract kit scenario S10 (a 503 is retried with backoff), against a
/// local server that fails on purpose rather than the kit's proxy.
#[tokio::test]
async fn server_errors_are_retried_until_the_call_succeeds() {
    let (url, count) = flaky(3, StatusCode::SERVICE_UNAVAILABLE).await;
    let p = Producer::new(&url, "shop", "t")
        .unwrap()
        .with_retry(fast_retry(5));
    let view = p.commit("o-1").await.unwrap();
    assert_eq!(view.status, MessageStatus::Committed);
    assert_eq!(count.get(), 4, "three failures and one success");
}

#[tokio::test]
async fn exhausted_retries_are_unavailable_with_the_last_server_code() {
    let (url, count) = flaky(u32::MAX, StatusCode::INTERNAL_SERVER_ERROR).await;
    let p = Producer::new(&url, "shop", "t")
        .unwrap()
        .with_retry(fast_retry(2));
    let err = p.commit("o-1").await.unwrap_err();
    match &err {
        Error::Unavailable {
            attempts,
            status,
            code,
            message,
        } => {
            assert_eq!(*attempts, 3);
            assert_eq!(*status, Some(500));
            assert_eq!(code.as_deref(), Some("injected"));
            assert_eq!(message, "injected failure");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert_eq!(count.get(), 3, "one try and two retries");
}

/// Contract kit scenario S10 (a 409 is not retried).
#[tokio::test]
async fn client_errors_are_never_retried() {
    for (status, is_expected) in [
        (
            StatusCode::BAD_REQUEST,
            (|e| matches!(e, Error::Invalid { status: 400, .. })) as fn(&Error) -> bool,
        ),
        (StatusCode::UNAUTHORIZED, |e| {
            matches!(e, Error::Unauthorized { .. })
        }),
        (StatusCode::FORBIDDEN, |e| {
            matches!(e, Error::Forbidden { .. })
        }),
        (StatusCode::NOT_FOUND, |e| {
            matches!(e, Error::NotFound { .. })
        }),
        (StatusCode::CONFLICT, |e| {
            matches!(e, Error::Conflict { .. })
        }),
        (StatusCode::PAYLOAD_TOO_LARGE, |e| {
            matches!(e, Error::Invalid { status: 413, .. })
        }),
        (StatusCode::TOO_MANY_REQUESTS, |e| {
            matches!(e, Error::Unexpected { status: 429, .. })
        }),
    ] {
        let (url, count) = flaky(u32::MAX, status).await;
        let p = Producer::new(&url, "shop", "t")
            .unwrap()
            .with_retry(fast_retry(5));
        let err = p.commit("o-1").await.unwrap_err();
        assert!(is_expected(&err), "{status}: {err:?}");
        assert_eq!(err.code(), Some("injected"), "{status}");
        assert_eq!(count.get(), 1, "{status} must not be retried");
    }
}

#[tokio::test]
async fn a_2xx_that_is_not_a_message_view_is_unexpected_and_not_retried() {
    let counter = Counter::default();
    let c = counter.clone();
    let app = Router::new().route(
        "/v1/messages/commit",
        post(move || {
            c.bump();
            async { "<html>captive portal</html>" }
        }),
    );
    let url = format!("http://{}", serve(app).await);
    let p = Producer::new(&url, "shop", "t")
        .unwrap()
        .with_retry(fast_retry(5));
    let err = p.commit("o-1").await.unwrap_err();
    assert!(
        matches!(err, Error::Unexpected { status: 200, .. }),
        "{err:?}"
    );
    assert_eq!(counter.get(), 1);
}

#[tokio::test]
async fn connection_refused_is_unavailable_after_every_retry() {
    // A port that was free a moment ago: nothing listens there.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let p = Producer::new(&format!("http://{addr}"), "shop", "t")
        .unwrap()
        .with_retry(fast_retry(2));
    let err = p.commit("o-1").await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Unavailable {
                attempts: 3,
                status: None,
                code: None,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn connection_refused_is_retried_until_the_server_comes_up() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let counter = Counter::default();
    let c = counter.clone();
    let p = Producer::new(&format!("http://{addr}"), "shop", "t")
        .unwrap()
        .with_retry(trustmsg_client::RetryPolicy {
            max_retries: 200,
            min_delay: std::time::Duration::from_millis(10),
            max_delay: std::time::Duration::from_millis(50),
        });
    let call = tokio::spawn(async move { p.commit("o-1").await });
    // Let the client meet a refused connection at least once, then come up.
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    let app = Router::new().route(
        "/v1/messages/commit",
        post(move || {
            c.bump();
            async { Json(committed_view()) }
        }),
    );
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let view = call.await.unwrap().unwrap();
    assert_eq!(view.id, 7);
    assert_eq!(
        counter.get(),
        1,
        "only the attempt after start-up reached the server"
    );
}
