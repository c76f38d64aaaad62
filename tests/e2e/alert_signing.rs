//! Alert webhooks are signed the Standard Webhooks way with
//! `--alert-signing-secret`, under the alert's stable id: a receiver checks
//! every POST with its own HMAC (written here from the spec with hmac and
//! sha2, not trustmsg's signer), and the retries of one alert carry the same
//! `webhook-id`, so it can drop repeats. Without the secret the POSTs are
//! unsigned and the service says so when it starts.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::Value;
use sha2::Sha256;
use trustmsg_tests::{eventually, serve, ServiceProcess, TestDb};

use crate::harness::{one_verify_failed_alert, Kafka, FAST_VERIFY};

const TOPIC: &str = "e2e-signed";

/// 32 bytes of key, as `whsec_$(openssl rand -base64 32)` makes.
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwC0ZmNmZTYmY=";

/// One POST as the receiver saw it.
#[derive(Debug, Clone)]
struct Post {
    headers: HeaderMap,
    body: Bytes,
}

impl Post {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A webhook that keeps every POST whole (headers and the exact body bytes)
/// and refuses the first `refuse` of them with 503.
async fn receiver(refuse: usize) -> (String, Arc<Mutex<Vec<Post>>>) {
    let posts: Arc<Mutex<Vec<Post>>> = Arc::default();
    let kept = posts.clone();
    let app = Router::new().route(
        "/alerts",
        post(move |headers: HeaderMap, body: Bytes| {
            let kept = kept.clone();
            async move {
                let mut all = kept.lock().unwrap();
                all.push(Post { headers, body });
                if all.len() <= refuse {
                    StatusCode::SERVICE_UNAVAILABLE
                } else {
                    StatusCode::NO_CONTENT
                }
            }
        }),
    );
    (format!("http://{}/alerts", serve(app).await), posts)
}

/// Standard Webhooks verification from the spec: HMAC-SHA256 keyed with the
/// base64 after `whsec_`, over `"{id}.{timestamp}.{body}"`, compared with
/// each `v1,<base64>` of the header.
fn signature_matches(secret: &str, post: &Post) -> bool {
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap())
        .unwrap();
    let (Some(id), Some(ts), Some(sigs)) = (
        post.header("webhook-id"),
        post.header("webhook-timestamp"),
        post.header("webhook-signature"),
    ) else {
        return false;
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{ts}.").as_bytes());
    mac.update(&post.body);
    let expected = STANDARD.encode(mac.finalize().into_bytes());
    sigs.split(' ')
        .any(|s| s.strip_prefix("v1,") == Some(expected.as_str()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_post_of_an_alert_is_signed_under_the_alerts_stable_id() {
    let db = TestDb::create().await;
    let kafka = Kafka::start(&[TOPIC]);
    let (url, posts) = receiver(2).await;
    let (service, message_id) = one_verify_failed_alert(
        &db,
        &kafka,
        TOPIC,
        &["--alert-webhook", &url, "--alert-signing-secret", SECRET],
    )
    .await;
    eventually(30, "two refused POSTs and the accepted one", async || {
        posts.lock().unwrap().len() >= 3
    })
    .await;

    let posts = posts.lock().unwrap().clone();
    let now = chrono::Utc::now().timestamp();
    let body: Value = serde_json::from_slice(&posts[0].body).unwrap();
    assert_eq!(body["message_id"], message_id, "{body}");
    let alert_id = body["alert_id"].to_string();
    for (n, p) in posts.iter().enumerate() {
        assert!(
            signature_matches(SECRET, p),
            "POST {n} does not verify: {:?}",
            p.headers
        );
        assert_eq!(
            (p.header("webhook-id"), p.header("trustmsg-alert-id")),
            (Some(alert_id.as_str()), Some(alert_id.as_str())),
            "POST {n}: every retry carries the alert's id"
        );
        assert_eq!(p.body, posts[0].body, "POST {n}: the same alert");
        let ts: i64 = p.header("webhook-timestamp").unwrap().parse().unwrap();
        assert!((now - ts).abs() < 60, "POST {n}: timestamp {ts}, now {now}");
    }
    // The receiver's check is a real one: another key or a changed body fails it.
    let other = "whsec_".to_string() + &STANDARD.encode([7u8; 32]);
    assert!(!signature_matches(&other, &posts[0]));
    let mut forged = posts[0].clone();
    forged.body = Bytes::from(
        String::from_utf8(forged.body.to_vec())
            .unwrap()
            .replace("undecided", "forged-key"),
    );
    assert!(!signature_matches(SECRET, &forged));
    drop(service);
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_signing_secret_alerts_go_unsigned_and_start_up_warns() {
    let db = TestDb::create().await;
    let kafka = Kafka::start(&[TOPIC]);
    let (url, posts) = receiver(0).await;
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut flags = FAST_VERIFY.to_vec();
    flags.extend(["--alert-webhook", url.as_str()]);
    let service = ServiceProcess::start_logged(
        &db.url,
        kafka.mock.bootstrap(),
        &flags,
        Some(log.path().to_path_buf()),
    )
    .await;
    let logged = std::fs::read_to_string(log.path()).unwrap();
    assert!(
        logged.contains("WARN") && logged.contains("alert webhooks are POSTed unsigned"),
        "{logged}"
    );
    drop(service);
    let (service, _) =
        one_verify_failed_alert(&db, &kafka, TOPIC, &["--alert-webhook", &url]).await;
    eventually(30, "the alert POSTed", async || {
        !posts.lock().unwrap().is_empty()
    })
    .await;
    let first = posts.lock().unwrap()[0].clone();
    assert_eq!(first.header("webhook-signature"), None);
    assert!(first.header("trustmsg-alert-id").is_some());
    drop(service);
    db.drop_db().await;
}
