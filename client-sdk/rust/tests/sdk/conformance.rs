//! The contract kit's vectors (`client-sdk/conformance/vectors/`), held to
//! trustmsg's own code: the service's check-back signer and verifier and its
//! record signer (`trustmsg-verify-api`), and this SDK's check router,
//! inbox, outbox rows and barrier. The vectors are written by a second
//! implementation (`client-sdk/conformance/tools/make-vectors.py`); every
//! other SDK loads the same files, so what this test accepts is what every
//! SDK must do.
//!
//! The kit's scenarios (`scenarios.json`) are run for this SDK by the tests
//! that name them (`S01` … `S10` in their doc comments), against the real
//! binary through the test kit `trustmsg-tests`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rdkafka::message::{Header, OwnedHeaders, OwnedMessage, Timestamp};
use serde_json::Value;
use trustmsg_client::api::signature;
use trustmsg_client::api::submit::{self, Op, Signed, SubmitSignatureError};
use trustmsg_client::outbox::{self, EnqueueError};
use trustmsg_client::{barrier, inbox, CheckRequest, CheckResponse, Decision, Message};
use trustmsg_tests::{serve, TestDb};

fn vectors(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../conformance/vectors")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn str_of<'a>(v: &'a Value, field: &str) -> &'a str {
    v[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} is not a string in {v}"))
}

fn name(case: &Value) -> &str {
    str_of(case, "name")
}

fn headers_of(case: &Value) -> BTreeMap<String, String> {
    case["headers"]
        .as_object()
        .map(|h| {
            h.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// S06: every signature case, as the service's verifier judges it.
#[test]
fn every_check_back_signature_vector_is_judged_as_the_vector_says() {
    let file = vectors("check-signatures.json");
    let tolerance = file["tolerance_secs"].as_i64().unwrap();
    let cases = file["cases"].as_array().unwrap();
    assert!(cases.len() >= 15, "the vectors lost cases: {}", cases.len());
    for case in cases {
        let h = &case["headers"];
        let parts = (
            h["webhook-id"].as_str(),
            h["webhook-timestamp"].as_str(),
            h["webhook-signature"].as_str(),
        );
        let accepted = match parts {
            (Some(id), Some(ts), Some(sig)) => signature::verify(
                str_of(case, "secret"),
                id,
                ts,
                str_of(case, "body").as_bytes(),
                sig,
                case["now"].as_i64().unwrap(),
                tolerance,
            )
            .is_ok(),
            _ => false,
        };
        assert_eq!(
            accepted,
            case["valid"].as_bool().unwrap(),
            "{}: {}",
            name(case),
            str_of(case, "why")
        );
    }
}

/// S06: the same vectors through this SDK's check router over real HTTP,
/// its tolerance widened to reach the vectors' fixed clock (the timestamp
/// cases are the verifier's, above): what is invalid is a 401 and never
/// reaches the decision function.
#[tokio::test]
async fn the_check_router_answers_every_signature_vector_as_the_vector_says() {
    let file = vectors("check-signatures.json");
    let secret = str_of(&file["cases"][0], "secret").to_string();
    let calls = trustmsg_tests::Counter::default();
    let c = calls.clone();
    let app = trustmsg_client::CheckEndpoint::new(secret.clone())
        .tolerance(std::time::Duration::from_secs(100 * 365 * 24 * 3600))
        .router(move |_req: CheckRequest| {
            c.bump();
            async { Ok::<_, std::convert::Infallible>(Decision::Commit) }
        });
    let url = format!(
        "http://{}{}",
        serve(app).await,
        trustmsg_client::DEFAULT_CHECK_PATH
    );
    let http = trustmsg_tests::http_client();
    for case in file["cases"].as_array().unwrap() {
        let ts_case =
            name(case).contains("timestamp") && case["headers"]["webhook-timestamp"].is_string();
        if str_of(case, "secret") != secret || (ts_case && name(case) != "timestamp not a number") {
            continue;
        }
        let before = calls.get();
        let mut req = http
            .post(&url)
            .header("content-type", "application/json")
            .body(str_of(case, "body").to_string());
        for (k, v) in case["headers"].as_object().unwrap() {
            req = req.header(k.as_str(), v.as_str().unwrap());
        }
        let res = req.send().await.unwrap();
        let valid = case["valid"].as_bool().unwrap();
        assert_eq!(res.status().as_u16() == 200, valid, "{}", name(case));
        if !valid {
            assert_eq!(res.status().as_u16(), 401, "{}", name(case));
            assert_eq!(calls.get(), before, "{}: reached the decision", name(case));
        }
    }
}

#[test]
fn check_back_bodies_parse_and_answers_serialize_as_the_vectors_say() {
    let file = vectors("check-bodies.json");
    for case in file["requests"].as_array().unwrap() {
        let parsed: CheckRequest = serde_json::from_str(str_of(case, "body")).unwrap();
        let want: CheckRequest = serde_json::from_value(case["request"].clone()).unwrap();
        assert_eq!(parsed, want, "{}", name(case));
    }
    for case in file["answers"].as_array().unwrap() {
        let decision: Decision = serde_json::from_value(case["decision"].clone()).unwrap();
        let answer = CheckResponse {
            message_id: case["message_id"].as_u64().unwrap(),
            decision,
        };
        // Compared as text too: a 64-bit id must keep every digit.
        let text = serde_json::to_string(&answer).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap(),
            case["answer"]
        );
        assert!(text.contains(&case["message_id"].to_string()), "{text}");
    }
}

/// S08: the records of the Kafka way in sign to the vectors' exact bytes.
#[test]
fn every_submit_record_vector_signs_to_its_bytes_and_ambiguous_ones_are_refused() {
    let file = vectors("submit-records.json");
    let secret = str_of(&file, "secret");
    for case in file["cases"].as_array().unwrap() {
        let headers = headers_of(case);
        let value = STANDARD.decode(str_of(case, "value_base64")).unwrap();
        let record = Signed {
            op: Op::parse(str_of(case, "op")).unwrap(),
            biz_id: str_of(case, "biz_id"),
            message_key: str_of(case, "message_key"),
            topic: str_of(case, "topic"),
            key: case["key"].as_str(),
            headers: &headers,
            value: &value,
        };
        let input = submit::signing_input(&record).unwrap();
        assert_eq!(
            STANDARD.encode(&input),
            str_of(case, "signing_input_base64"),
            "{}",
            name(case)
        );
        let signed = submit::sign(secret, &record).unwrap();
        assert_eq!(signed, str_of(case, "signature"), "{}", name(case));
        submit::verify(secret, &record, &signed).unwrap();
        let on_record: Vec<(String, String)> = case["record"]["headers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (h[0].as_str().unwrap().into(), h[1].as_str().unwrap().into()))
            .collect();
        assert!(
            on_record.contains(&("trustmsg-signature".into(), signed.clone())),
            "{}",
            name(case)
        );
    }
    for case in file["ambiguous"].as_array().unwrap() {
        let headers = headers_of(case);
        let record = Signed {
            op: Op::parse(str_of(case, "op")).unwrap(),
            biz_id: str_of(case, "biz_id"),
            message_key: str_of(case, "message_key"),
            topic: str_of(case, "topic"),
            key: case["key"].as_str(),
            headers: &headers,
            value: b"",
        };
        assert!(
            matches!(
                submit::sign(secret, &record),
                Err(SubmitSignatureError::Ambiguous(_))
            ),
            "{}",
            name(case)
        );
    }
}

/// S07: the id the inbox keys a delivered record on, or none.
#[test]
fn the_inbox_reads_every_record_header_vector_as_the_vector_says() {
    let file = vectors("record-headers.json");
    for case in file["cases"].as_array().unwrap() {
        let mut headers = OwnedHeaders::new();
        for h in case["headers"].as_array().unwrap() {
            headers = headers.insert(Header {
                key: h[0].as_str().unwrap(),
                value: h[1].as_str(),
            });
        }
        let record = OwnedMessage::new(
            Some(b"v".to_vec()),
            None,
            "t".into(),
            Timestamp::NotAvailable,
            0,
            0,
            Some(headers),
        );
        assert_eq!(
            inbox::message_id(&record),
            case["message_id"].as_u64(),
            "{}",
            name(case)
        );
    }
}

fn message_of(m: &Value) -> Message {
    let payload = STANDARD.decode(str_of(m, "payload_base64")).unwrap();
    let mut message = Message::from_bytes(str_of(m, "message_key"), str_of(m, "topic"), &payload);
    if let Some(k) = m["key"].as_str() {
        message = message.key(k);
    }
    for (k, v) in headers_of(m) {
        message = message.header(k, v);
    }
    if let Some(tp) = m["traceparent"].as_str() {
        message = message.trace_context(tp, None::<String>);
    }
    if let Some(ms) = m["deliver_after_ms"].as_u64() {
        message = message.deliver_after(std::time::Duration::from_millis(ms));
    }
    message
}

/// A row of the table, as the vectors describe it.
type Written = (
    Vec<u8>,
    Vec<u8>,
    Option<Vec<u8>>,
    Vec<u8>,
    Option<String>,
    Option<Vec<u8>>,
    Option<i64>,
);

/// S09: every outbox vector writes its row (MariaDB) or is refused with
/// its code before anything is written.
#[tokio::test]
async fn every_outbox_row_vector_is_written_or_refused_as_the_vector_says() {
    let file = vectors("outbox-rows.json");
    let db = TestDb::create().await;
    let pool = db.pool().await;
    outbox::create_table(&pool).await.unwrap();
    for case in file["valid"].as_array().unwrap() {
        sqlx::query("DELETE FROM trustmsg_outbox")
            .execute(&pool)
            .await
            .unwrap();
        let mut tx = pool.begin().await.unwrap();
        outbox::enqueue(&mut *tx, &message_of(&case["message"]))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", name(case)));
        tx.commit().await.unwrap();
        let (key, topic, record_key, payload, headers, traceparent, delay): Written =
            sqlx::query_as(
                "SELECT message_key, topic, record_key, payload, CAST(headers AS CHAR), \
                 traceparent, CAST(TIMESTAMPDIFF(SECOND, gmt_create, deliver_at) AS SIGNED) \
                 FROM trustmsg_outbox",
            )
            .fetch_one(&pool)
            .await
            .unwrap();
        let row = &case["row"];
        let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
        assert_eq!(text(key), str_of(row, "message_key"), "{}", name(case));
        assert_eq!(text(topic), str_of(row, "topic"), "{}", name(case));
        assert_eq!(
            record_key.map(text).as_deref(),
            row["record_key"].as_str(),
            "{}",
            name(case)
        );
        assert_eq!(
            STANDARD.encode(payload),
            str_of(row, "payload_base64"),
            "{}",
            name(case)
        );
        let headers: Value = headers.map_or(Value::Null, |h| serde_json::from_str(&h).unwrap());
        assert_eq!(headers, row["headers"], "{}", name(case));
        assert_eq!(
            traceparent.map(text).as_deref(),
            row["traceparent"].as_str(),
            "{}",
            name(case)
        );
        let want_delay = row["deliver"]["after_ms"].as_i64().map(|ms| ms / 1000);
        assert_eq!(delay, want_delay, "{}", name(case));
    }
    sqlx::query("DELETE FROM trustmsg_outbox")
        .execute(&pool)
        .await
        .unwrap();
    for case in file["invalid"].as_array().unwrap() {
        let mut tx = pool.begin().await.unwrap();
        match outbox::enqueue(&mut *tx, &message_of(&case["message"])).await {
            Err(EnqueueError::Invalid { code, .. }) => {
                assert_eq!(code, str_of(case, "error"), "{}", name(case))
            }
            other => panic!("{}: {other:?}", name(case)),
        }
        tx.commit().await.unwrap();
    }
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM trustmsg_outbox")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 0, "a refused message wrote a row");
    db.drop_db().await;
}

/// S05: the barrier keeps every pair of keys apart (MariaDB).
#[tokio::test]
async fn s05_the_barrier_keeps_every_pair_of_vector_keys_apart() {
    let file = vectors("barrier-keys.json");
    let db = TestDb::create().await;
    let pool = db.pool().await;
    barrier::create_table(&pool).await.unwrap();
    for (i, pair) in file["pairs"].as_array().unwrap().iter().enumerate() {
        let biz = format!("conformance-{i}");
        let mut tx = pool.begin().await.unwrap();
        barrier::insert(&mut tx, &biz, str_of(pair, "a"))
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(
            barrier::check(&pool, &biz, str_of(pair, "b"))
                .await
                .unwrap(),
            Decision::Rollback,
            "{}: b answered by a's marker",
            name(pair)
        );
        assert_eq!(
            barrier::check(&pool, &biz, str_of(pair, "a"))
                .await
                .unwrap(),
            Decision::Commit,
            "{}",
            name(pair)
        );
    }
    db.drop_db().await;
}
