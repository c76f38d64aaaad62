//! A database that stops answering under a running forwarder (through a proxy
//! only this service uses): the statements stuck on it are given up at their
//! deadline, their connections are dropped, and sending carries on over new
//! connections.

use std::time::Duration;

use trustmsg_tests::kafka::{MockKafka, TopicReader};
use trustmsg_tests::{decision_body, eventually, DbProxy, TestApp, TestDb, UNREACHABLE_VERIFY_URL};
use trustmsg_verify_api::SendStatus;

use super::{body, kafka_flags, prepare_and_commit, refs, set_flag, wait_for_row};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sending_carries_on_after_the_forwarders_connections_froze_for_good() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 1);
    let proxy = DbProxy::start().await;
    let db = TestDb::create().await;
    let mut via_proxy = db.share();
    via_proxy.url = proxy.url_of(&db);
    let mut flags = kafka_flags(kafka.bootstrap());
    flags.extend([
        "--request-timeout".into(),
        "1s".into(),
        "--no-verifier".into(),
    ]);
    set_flag(&mut flags, "--sweep-interval", "50ms");
    let app = TestApp::spawn_on(via_proxy, &refs(&flags)).await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    let mut reader = TopicReader::new(kafka.bootstrap(), "orders");
    let first = prepare_and_commit(&app, &token, body("shop", "before", "orders")).await;
    wait_for_row(&app, first, Duration::from_secs(20), "SENT", |m| {
        m.send_status == Some(SendStatus::Sent)
    })
    .await;

    // The sweeper claims every 50 ms: its statement goes out on a connection
    // that then never answers and never closes.
    proxy.hang();
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.freeze_open();

    // The API's own stuck writes answer 503 until its batchers let go of
    // them: a producer retries.
    let mut ids = Vec::new();
    for i in 0..5 {
        let b = body("shop", &format!("after-{i}"), "orders");
        let mut id = None;
        eventually(30, "a prepare and commit on new connections", async || {
            if id.is_none() {
                let (status, view) = app.prepare(Some(&token), &b).await;
                if status != 201 {
                    return false;
                }
                id = view["id"].as_u64();
            }
            let (status, _) = app
                .commit(
                    Some(&token),
                    &decision_body("shop", b["message_key"].as_str().unwrap()),
                )
                .await;
            status == 200
        })
        .await;
        ids.push(id.unwrap());
    }
    for id in &ids {
        wait_for_row(&app, *id, Duration::from_secs(30), "SENT", |m| {
            m.send_status == Some(SendStatus::Sent)
        })
        .await;
    }
    reader
        .read_until(Duration::from_secs(20), "the five", |rs| {
            ids.iter().all(|id| rs.iter().any(|r| r.message_id == *id))
        })
        .await;
    assert!(
        app.counter("trustmsg_worker_statement_timeouts_total")
            .await
            >= 1,
        "a worker statement was given up"
    );
    app.finish().await;
}
