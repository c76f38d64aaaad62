//! What arrives in Kafka, and how fast it gets there.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use base64::Engine;
use serde_json::json;
use trustmsg_tests::kafka::{MockKafka, TopicReader};
use trustmsg_tests::{TestApp, UNREACHABLE_VERIFY_URL};
use trustmsg_verify_api::{kafka_headers, SendStatus};

use super::{body, decide, kafka_flags, prepare, prepare_and_commit, refs, set_flag, wait_for_row};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_messages_arrive_byte_for_byte_and_undecided_or_rolled_back_ones_never() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 3);
    kafka.create_topic("audit.events-v1", 1);
    let app = TestApp::spawn(&refs(&kafka_flags(kafka.bootstrap()))).await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;

    let binary: Vec<u8> = vec![0, 255, 1, 0x80, b'\n', 0xfe, 0];
    // (body, expected topic, key, value, user headers)
    let cases = vec![
        (
            json!({
                "biz_id": "shop", "message_key": "m-utf8", "topic": "orders",
                "key": "order-1", "payload": "{\"amount\":42,\"note\":\"héllo ✓\"}",
                "headers": {"content-type": "application/json", "x-trace": "abc 123"},
            }),
            "orders",
            Some(b"order-1".to_vec()),
            "{\"amount\":42,\"note\":\"héllo ✓\"}".as_bytes().to_vec(),
            vec![("content-type", "application/json"), ("x-trace", "abc 123")],
        ),
        (
            json!({
                "biz_id": "shop", "message_key": "m-binary-nokey", "topic": "audit.events-v1",
                "payload": base64::engine::general_purpose::STANDARD.encode(&binary),
                "payload_encoding": "base64",
            }),
            "audit.events-v1",
            None,
            binary.clone(),
            vec![],
        ),
        (
            json!({
                "biz_id": "shop", "message_key": "m-ключ", "topic": "orders",
                "key": "ключ 🙂", "payload": "x",
                "headers": {"h": ""},
            }),
            "orders",
            Some("ключ 🙂".as_bytes().to_vec()),
            b"x".to_vec(),
            vec![("h", "")],
        ),
    ];
    let mut expected = BTreeMap::new();
    for (b, topic, key, value, headers) in cases {
        let message_key = b["message_key"].as_str().unwrap().to_string();
        let id = prepare_and_commit(&app, &token, b).await;
        expected.insert(id, (message_key, topic, key, value, headers));
    }
    // Rolled back after prepare, and prepared but never decided.
    let rolled_back = prepare(&app, &token, body("shop", "m-rolled-back", "orders")).await;
    decide(&app, &token, "shop", "m-rolled-back", false).await;
    let undecided = prepare(&app, &token, body("shop", "m-undecided", "orders")).await;

    let mut orders = TopicReader::new(kafka.bootstrap(), "orders");
    let mut audit = TopicReader::new(kafka.bootstrap(), "audit.events-v1");
    let want: BTreeSet<u64> = expected.keys().copied().collect();
    let seen = |o: &TopicReader, a: &TopicReader| -> BTreeSet<u64> {
        o.records
            .iter()
            .chain(&a.records)
            .map(|r| r.message_id)
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while seen(&orders, &audit) != want {
        assert!(
            std::time::Instant::now() < deadline,
            "committed messages did not all arrive: {:?} of {want:?}",
            seen(&orders, &audit)
        );
        orders.read_for(Duration::from_millis(200)).await;
        audit.read_for(Duration::from_millis(200)).await;
    }
    // Several sweeps' worth of time: the undecided and rolled-back rows must still not show up.
    orders.read_for(Duration::from_secs(2)).await;
    audit.read_for(Duration::from_millis(300)).await;

    let records: Vec<_> = orders.records.iter().chain(&audit.records).collect();
    assert_eq!(
        records.len(),
        expected.len(),
        "one record per committed message, nothing else: {records:?}"
    );
    assert!(!records
        .iter()
        .any(|r| r.message_id == rolled_back || r.message_id == undecided));
    for r in records {
        let id = r.message_id;
        let (message_key, topic, key, value, user_headers) = &expected[&id];
        assert_eq!(r.topic, *topic);
        assert_eq!(r.key, *key, "record key of {message_key}");
        assert_eq!(
            r.payload.as_deref(),
            Some(value.as_slice()),
            "value of {message_key}"
        );
        let mut want_headers: BTreeMap<String, Option<Vec<u8>>> = user_headers
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.as_bytes().to_vec())))
            .collect();
        want_headers.insert(
            kafka_headers::MESSAGE_ID.into(),
            Some(id.to_string().into_bytes()),
        );
        want_headers.insert(kafka_headers::BIZ_ID.into(), Some(b"shop".to_vec()));
        want_headers.insert(
            kafka_headers::MESSAGE_KEY.into(),
            Some(message_key.as_bytes().to_vec()),
        );
        assert_eq!(r.header_map(), want_headers, "headers of {message_key}");

        // The row records where the record landed.
        let row = wait_for_row(&app, id, Duration::from_secs(10), "SENT", |m| {
            m.send_status == Some(SendStatus::Sent)
        })
        .await;
        assert_eq!(row.kafka_partition, Some(r.partition), "{message_key}");
        assert_eq!(row.kafka_offset, Some(r.offset), "{message_key}");
        assert!(row.sent_at.is_some() && row.next_send_at.is_none());
    }
    for id in [rolled_back, undecided] {
        let row = app.store().find_message_by_id(id).await.unwrap().unwrap();
        assert_eq!(row.send_status, None, "never sent: {row:?}");
        assert_eq!(row.kafka_offset, None);
    }
    app.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_reaches_kafka_without_waiting_for_a_sweep() {
    let kafka = MockKafka::start(1);
    kafka.create_topic("orders", 1);
    let mut flags = kafka_flags(kafka.bootstrap());
    // The sweeper runs once at start-up (nothing to do) and then not for an
    // hour; the default lease (60 s) outlasts the test, so only the fast path
    // can deliver within the deadline.
    set_flag(&mut flags, "--sweep-interval", "1h");
    set_flag(&mut flags, "--send-lease", "60s");
    let app = TestApp::spawn(&refs(&flags)).await;
    let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
    let mut reader = TopicReader::new(kafka.bootstrap(), "orders");

    for i in 0..5 {
        let id =
            prepare_and_commit(&app, &token, body("shop", &format!("fast-{i}"), "orders")).await;
        reader
            .read_until(Duration::from_secs(20), "the committed record", |rs| {
                rs.iter().any(|r| r.message_id == id)
            })
            .await;
        let row = wait_for_row(&app, id, Duration::from_secs(10), "SENT", |m| {
            m.send_status == Some(SendStatus::Sent)
        })
        .await;
        assert_eq!(row.send_attempts, 1, "sent on the first try: {row:?}");
    }
    assert_eq!(reader.records.len(), 5);
    app.finish().await;
}

/// A commit hands the forwarder the row its instance kept from the prepare,
/// or, when the cache is off or had no room left for it, the row as read:
/// the record in Kafka and the stored row are the same either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_reach_kafka_byte_for_byte_whether_their_prepared_row_was_kept_or_not() {
    // Kept (the default 32 MiB), partly kept (1 MiB: twelve rows of 150 kB do
    // not fit), and never kept (0).
    for cache_mib in ["32", "1", "0"] {
        let kafka = MockKafka::start(1);
        kafka.create_topic("orders", 2);
        let mut flags = kafka_flags(kafka.bootstrap());
        flags.extend(["--prepared-cache-mib".into(), cache_mib.into()]);
        let app = TestApp::spawn(&refs(&flags)).await;
        let token = app.register("shop", UNREACHABLE_VERIFY_URL).await;
        // Every row is prepared before the first commit, so a small cache
        // has had to drop some by the time their decisions come.
        let mut expected = BTreeMap::new();
        for i in 0..12 {
            let key = format!("big-{i}");
            let mut b = body("shop", &key, "orders");
            b["payload"] = json!(format!("{i:02}|").repeat(37_500));
            let payload = b["payload"].as_str().unwrap().as_bytes().to_vec();
            expected.insert(prepare(&app, &token, b).await, (key, payload));
        }
        for (key, _) in expected.values() {
            decide(&app, &token, "shop", key, true).await;
        }
        let mut reader = TopicReader::new(kafka.bootstrap(), "orders");
        let want: BTreeSet<u64> = expected.keys().copied().collect();
        reader
            .read_until(Duration::from_secs(30), "every committed message", |rs| {
                rs.iter().map(|r| r.message_id).collect::<BTreeSet<_>>() == want
            })
            .await;
        assert_eq!(
            reader.records.len(),
            expected.len(),
            "cache {cache_mib} MiB"
        );
        for r in &reader.records {
            let (key, payload) = &expected[&r.message_id];
            assert_eq!(
                r.payload.as_deref(),
                Some(payload.as_slice()),
                "{key}, cache {cache_mib} MiB"
            );
            assert_eq!(r.key.as_deref(), Some(format!("k-{key}").as_bytes()));
            let row = wait_for_row(&app, r.message_id, Duration::from_secs(10), "SENT", |m| {
                m.send_status == Some(SendStatus::Sent)
            })
            .await;
            assert_eq!(
                (row.kafka_partition, row.kafka_offset),
                (Some(r.partition), Some(r.offset))
            );
            let trail = app.store().audit_trail(r.message_id).await.unwrap();
            assert_eq!(trail.len(), 1, "{key}: one commit audited: {trail:?}");
        }
        app.finish().await;
    }
}
