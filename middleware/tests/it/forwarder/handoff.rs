//! A commit the fast path does not take is due at once: on an instance
//! without a forwarder (it claims nothing), when the fast path's channel is
//! full (the claim is released), and when the request is cut off after its
//! commit was written (the write itself hands it over). Each is sent by
//! another instance within seconds, where it used to wait out the whole
//! send lease (30 s here).

use sqlx::Connection;
use trustmsg_tests::kafka::MockKafka;
use trustmsg_tests::{eventually, TestApp, UNREACHABLE_VERIFY_URL};
use trustmsg_verify_api::SendStatus;

use super::{body, kafka_flags, prepare, prepare_and_commit, refs, set_flag};

/// Flags for a forwarding instance whose commits claim for 30 s.
fn long_lease(bootstrap: &str) -> Vec<String> {
    let mut flags = kafka_flags(bootstrap);
    set_flag(&mut flags, "--send-lease", "30s");
    flags
}

async fn sent(app: &TestApp, ids: &[u64]) -> usize {
    let mut n = 0;
    for id in ids {
        let m = app.store().find_message_by_id(*id).await.unwrap().unwrap();
        n += usize::from(m.send_status == Some(SendStatus::Sent));
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_made_on_an_instance_without_a_forwarder_is_sent_at_once_by_another() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 1);
    let forwarding = TestApp::spawn(&refs(&long_lease(kafka.bootstrap()))).await;
    let api_only = TestApp::spawn_on(forwarding.db.share(), &["--send-lease", "30s"]).await;
    let token = forwarding.register("shop", UNREACHABLE_VERIFY_URL).await;

    let id = prepare_and_commit(&api_only, &token, body("shop", "api-only", "orders")).await;
    let m = api_only
        .store()
        .find_message_by_id(id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.next_send_at, m.decided_at, "no claim: due at its commit");
    eventually(5, "sent by the forwarding instance", async || {
        sent(&forwarding, &[id]).await == 1
    })
    .await;
    api_only.app.stop().await.unwrap();
    forwarding.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_beyond_a_full_fast_path_are_released_and_sent_at_once_by_another_instance() {
    // `busy` forwards to a cluster that is down, one send at a time: its
    // first send hangs for its 4 s message timeout, so its fast path
    // (room for 4, and 1 waiting for the send slot) is soon full.
    let (dead, live) = (MockKafka::start(1), MockKafka::start(1));
    dead.create_topic("orders", 1);
    live.create_topic("orders", 1);
    dead.brokers_down();
    let mut busy_flags = long_lease(dead.bootstrap());
    set_flag(&mut busy_flags, "--kafka-message-timeout", "4s");
    busy_flags.extend(["--send-concurrency", "1"].map(String::from));
    let busy = TestApp::spawn(&refs(&busy_flags)).await;
    let other = TestApp::spawn_on(busy.db.share(), &refs(&long_lease(live.bootstrap()))).await;
    let token = busy.register("shop", UNREACHABLE_VERIFY_URL).await;

    let mut ids = Vec::new();
    for i in 0..20 {
        let key = format!("burst-{i}");
        ids.push(prepare_and_commit(&busy, &token, body("shop", &key, "orders")).await);
    }
    // At most 6 are held by `busy` (1 sending, 1 waiting, 4 queued).
    eventually(5, "the rest sent by the other instance", async || {
        sent(&other, &ids).await >= 14
    })
    .await;
    assert!(busy.counter("trustmsg_forwarder_released_total").await >= 14);
    other.app.stop().await.unwrap();
    busy.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_whose_request_was_cut_off_after_the_write_is_sent_at_once() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 1);
    let mut flags = long_lease(kafka.bootstrap());
    flags.extend(["--request-timeout", "1s"].map(String::from));
    let app = TestApp::spawn(&refs(&flags)).await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    let id = prepare(&app, &token, body("shop", "cut-off", "orders")).await;

    // Another session holds the row: the commit's UPDATE waits for it past
    // the request deadline (1 s) but within the write's own (2 s).
    let mut holder = sqlx::MySqlConnection::connect(&app.db.url).await.unwrap();
    let mut tx = holder.begin().await.unwrap();
    sqlx::query("SELECT id FROM messages WHERE id = ? FOR UPDATE")
        .bind(id)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    let decision = serde_json::json!({"biz_id": "shop", "message_key": "cut-off"});
    let commit = app.commit(Some(&token), &decision);
    let release = async {
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        tx.commit().await.unwrap();
    };
    let ((status, answer), ()) = tokio::join!(commit, release);
    assert_eq!(status, 503, "cut off at the request deadline: {answer}");
    assert_eq!(answer["error"]["code"], "request_timeout");

    eventually(5, "the commit written after all, and sent", async || {
        sent(&app, &[id]).await == 1
    })
    .await;
    app.finish().await;
}
