//! Secrets never reach the log (issue 10): the real binary at debug level,
//! with a marker in the database password, the admin token, payloads and
//! header values, and the producer tokens and signing secrets it issues,
//! driven through the whole loop (prepare, commit, check-back, a
//! VERIFY_FAILED alert, refused requests that carry the marker, a token
//! rotation). Every line it logs is searched for each secret: 0 hits.

use std::process::{Command, Stdio};

use rand::RngExt;
use serde_json::{json, Value};
use trustmsg_client::{check_router, Decision, Message, Producer};
use trustmsg_tests::process::{binary, free_port, register_at, wait_ready};
use trustmsg_tests::{eventually, AlertSink, Endpoint, TestDb};

use crate::harness::{settings, statuses, Kafka, FAST_VERIFY};

const TOPIC: &str = "e2e-canary";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_secret_reaches_the_log_at_debug_level() {
    let marker = format!("CANARY{:016x}", rand::rng().random::<u64>());
    // A database user whose password is the marker.
    let db = TestDb::create().await;
    let user = format!("canary_{}", &marker[6..14]);
    let admin_pool = db.pool().await;
    for stmt in [
        format!("CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY '{marker}'"),
        format!("CREATE USER '{user}'@'localhost' IDENTIFIED BY '{marker}'"),
        format!("GRANT ALL ON `{}`.* TO '{user}'@'127.0.0.1'", db.name),
        format!("GRANT ALL ON `{}`.* TO '{user}'@'localhost'", db.name),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(stmt))
            .execute(&admin_pool)
            .await
            .unwrap();
    }
    let mut url: reqwest::Url = db.url.parse().unwrap();
    url.set_username(&user).unwrap();
    url.set_password(Some(&marker)).unwrap();

    let kafka = Kafka::start(&[TOPIC]);
    let alerts = AlertSink::start().await;
    let admin_token = format!("admin-{marker}");
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let log_dir = tempfile::tempdir().unwrap();
    let log_path = log_dir.path().join("trustmsg.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut args: Vec<String> = [
        "serve",
        "--database-url",
        url.as_str(),
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--admin-token",
        &admin_token,
        "--auto-migrate",
        "--kafka-brokers",
        kafka.mock.bootstrap(),
        "--alert-webhook",
        &alerts.url(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(FAST_VERIFY.iter().map(|s| s.to_string()));
    let mut child = Command::new(binary())
        .args(&args)
        .env("TRUSTMSG_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::from(log.try_clone().unwrap()))
        .stderr(Stdio::from(log))
        .spawn()
        .expect("start trustmsg");
    let http = trustmsg_tests::http_client();
    wait_ready(&base).await;

    // Producers: one answered by a real check endpoint, one that always fails.
    let endpoint = Endpoint::bind().await;
    let check_url = endpoint.url(trustmsg_client::DEFAULT_CHECK_PATH);
    let register = |biz: &'static str, verify_url: String, attempts: u32| {
        let (http, base, admin_token) = (http.clone(), base.clone(), admin_token.clone());
        async move {
            let settings = settings(&verify_url, 200, attempts);
            register_at(&http, &base, &admin_token, biz, &settings).await
        }
    };
    let (token, secret) = register("shop", check_url, 15).await;
    endpoint.serve(check_router(secret.clone(), |_req| async {
        Ok::<_, std::convert::Infallible>(Decision::Commit)
    }));
    let (broken_token, broken_secret) =
        register("broken", "http://127.0.0.1:9/check".into(), 2).await;

    let shop = Producer::new(&base, "shop", token.clone()).unwrap();
    let secret_message = |key: &str| {
        Message::new(key, TOPIC, format!("card {marker}"))
            .key(format!("k-{key}"))
            .header("authorization", format!("Bearer {marker}"))
    };
    let committed = shop.prepare(&secret_message("now")).await.unwrap();
    shop.commit("now").await.unwrap();
    let checked = shop.prepare(&secret_message("later")).await.unwrap();
    let broken = Producer::new(&base, "broken", broken_token.clone()).unwrap();
    let failed = broken.prepare(&secret_message("lost")).await.unwrap();
    shop.get("now").await.unwrap();

    // Refused requests that carry the marker.
    for (path, token, body) in [
        (
            "/v1/messages/prepare",
            format!("tm_c2hvcA.{marker}"),
            json!({"biz_id": "shop", "message_key": "x", "topic": TOPIC, "payload": marker}),
        ),
        (
            "/v1/messages/prepare",
            token.clone(),
            json!({"biz_id": "shop", "message_key": "y", "topic": TOPIC,
                   "payload": format!("{marker}!!"), "payload_encoding": "base64"}),
        ),
        (
            "/v1/messages/prepare",
            token.clone(),
            json!({"biz_id": "shop", "message_key": "z", "topic": TOPIC, "payload": "p",
                   "headers": {"x-secret": format!("{marker}\u{1}")}}),
        ),
        ("/v1/producers/shop/rotate-token", marker.clone(), json!({})),
    ] {
        let res = http
            .post(format!("{base}{path}"))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(res.status().is_client_error(), "{path}: {}", res.status());
    }
    let rotated: Value = http
        .post(format!("{base}/v1/producers/shop/rotate-token"))
        .bearer_auth(&admin_token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let new_token = rotated["token"].as_str().unwrap().to_string();

    // Everything happened: delivered twice, one alert.
    let pool = db.pool().await;
    eventually(
        60,
        "both shop messages sent and the broken one failed",
        async || {
            let st = statuses(&pool, "shop").await;
            let sent = ["now", "later"]
                .iter()
                .all(|k| st.get(*k).and_then(|(_, _, s)| s.as_deref()) == Some("SENT"));
            let failed = statuses(&pool, "broken")
                .await
                .get("lost")
                .map(|(_, s, _)| s.as_str())
                == Some("VERIFY_FAILED");
            sent && failed
        },
    )
    .await;
    eventually(20, "the alert", async || {
        alerts.per_message().contains_key(&failed.id)
    })
    .await;
    let delivered = kafka.deliveries();
    assert!(delivered.contains_key(&committed.id) && delivered.contains_key(&checked.id));

    child.kill().unwrap();
    child.wait().unwrap();
    let text = std::fs::read_to_string(&log_path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let debug_lines = lines.iter().filter(|l| l.contains("DEBUG")).count();
    assert!(
        debug_lines > 50,
        "the log must be at debug level for this to mean anything: {} lines, {debug_lines} debug",
        lines.len()
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("ALERT") && l.contains(&format!("message_id={}", failed.id))),
        "the log covers the alert path"
    );
    let secrets = [
        ("marker", marker.as_str()),
        ("producer token", token.as_str()),
        ("rotated token", new_token.as_str()),
        ("broken producer's token", broken_token.as_str()),
        ("signing secret", secret.as_str()),
        ("broken producer's signing secret", broken_secret.as_str()),
    ];
    let mut hits = Vec::new();
    for (what, s) in secrets {
        for l in lines.iter().filter(|l| l.contains(s)) {
            hits.push(format!("{what}: {l}"));
        }
    }
    eprintln!(
        "canary: {} log lines ({debug_lines} at debug) searched for {} secrets: {} hits",
        lines.len(),
        secrets.len(),
        hits.len()
    );
    assert!(hits.is_empty(), "secrets in the log:\n{}", hits.join("\n"));

    pool.close().await;
    for host in ["127.0.0.1", "localhost"] {
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP USER '{user}'@'{host}'")))
            .execute(&admin_pool)
            .await
            .unwrap();
    }
    admin_pool.close().await;
    db.drop_db().await;
}
