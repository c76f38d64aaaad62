//! A database that stops answering under a running forwarder (through a proxy
//! only this service uses): the statements stuck on it are given up at their
//! deadline, their connections are dropped, and sending carries on over new
//! connections.

use std::time::Duration;

use trustmsg_tests::kafka::{MockKafka, TopicReader};
use trustmsg_tests::{decision_body, eventually, DbProxy, TestApp, TestDb, UNREACHABLE_VERIFY_URL};
use trustmsg_verify_api::SendStatus;

use super::{body, kafka_flags, prepare_and_commit, refs, set_flag, wait_for_row};

/// The service forwarding to a mock cluster (topic `orders`), on a fresh
/// database it reaches through a proxy only it uses, with a 1 s deadline on
/// statements, no check-back and the sweeper's interval when given; `shop`
/// registered with the token returned.
async fn behind_a_proxy(
    sweep_interval: Option<&str>,
) -> (MockKafka, DbProxy, TestDb, TestApp, String) {
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
    if let Some(every) = sweep_interval {
        set_flag(&mut flags, "--sweep-interval", every);
    }
    let app = TestApp::spawn_on(via_proxy, &refs(&flags)).await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    (kafka, proxy, db, app, token)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sending_carries_on_after_the_forwarders_connections_froze_for_good() {
    let (kafka, proxy, _db, app, token) = behind_a_proxy(Some("50ms")).await;
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
    proxy.close_frozen();
    app.finish().await;
}

/// A SENT mark the database does not take is written again as a mark until
/// it does (issue 42). The database stops answering right after a commit
/// whose record Kafka then acknowledges, for longer than the five tries
/// marks used to have (about 9 to 12 s at a 1 s deadline) and than the
/// claim's lease (6 s); then its connections freeze for good (what they
/// hold is never delivered) and new ones work. The row becomes SENT and its
/// record is in Kafka once: it was not sent again although its lease had
/// run out (this instance's sweeper, claiming it again, leaves the record
/// to the waiting mark). Before, the mark was given up and the row resent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sent_mark_held_up_by_a_hung_database_is_written_once_it_answers_and_nothing_is_resent() {
    let (kafka, proxy, db, app, token) = behind_a_proxy(None).await;
    let direct = db.pool().await;
    let mut reader = TopicReader::new(kafka.bootstrap(), "orders");
    let id = prepare_and_commit(&app, &token, body("shop", "held-up", "orders")).await;
    // The commit handed the row to the forwarder, whose mark waits 20 ms
    // for others after Kafka's answer: it meets a database that hangs.
    proxy.hang();
    reader
        .read_until(Duration::from_secs(10), "the record", |rs| {
            rs.iter().any(|r| r.message_id == id)
        })
        .await;
    tokio::time::sleep(Duration::from_secs(15)).await;
    proxy.freeze_open();
    let row = async || -> (Option<String>, u32) {
        sqlx::query_as("SELECT send_status, send_attempts FROM messages WHERE id = ?")
            .bind(id)
            .fetch_one(&direct)
            .await
            .unwrap()
    };
    eventually(30, "the row SENT", async || {
        row().await.0.as_deref() == Some("SENT")
    })
    .await;
    // A resend would have gone out with the claim that found the lease over.
    reader.read_for(Duration::from_secs(3)).await;
    assert_eq!(
        reader.id_counts().get(&id),
        Some(&1),
        "the record was sent again"
    );
    assert_eq!(row().await.1, 1, "one send, marked once");
    proxy.close_frozen();
    app.finish().await;
}
