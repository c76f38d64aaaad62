//! Traceable end to end (issue 28, item 3): a W3C `traceparent` on prepare
//! reaches the check-back call and the Kafka record under the producer's
//! trace id; a malformed one is ignored and counted, never refused; with
//! `--otlp-endpoint`, trustmsg's own spans (prepare, commit, check-back,
//! send) reach an OTLP/HTTP receiver run by the test, children of the
//! producer's span, and the propagated headers name those spans.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;
use serde_json::{json, Value};
use trustmsg_tests::check_server::TraceHeaders;
use trustmsg_tests::kafka::Consumed;
use trustmsg_tests::{
    eventually, serve, AlertSink, CheckServer, Reply, ServiceProcess, TestDb, ADMIN_TOKEN,
};

use crate::harness::{settings, Kafka, FAST_VERIFY};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PRODUCER_SPAN: &str = "00f067aa0ba902b7";
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const TRACESTATE: &str = "shop=t61rcWkgMzE,rojo=00f067aa0ba902b7";

/// Prepares `key` with these extra request headers and optional user
/// (Kafka) headers; the response's status and body.
async fn prepare(
    service: &ServiceProcess,
    token: &str,
    topic: &str,
    key: &str,
    http_headers: &[(&str, &str)],
    user_headers: Option<Value>,
) -> (u16, Value) {
    let mut body = json!({"biz_id": "shop", "message_key": key, "topic": topic, "payload": "x"});
    if let Some(h) = user_headers {
        body["headers"] = h;
    }
    let mut req = trustmsg_tests::http_client()
        .post(format!("{}/v1/messages/prepare", service.url()))
        .bearer_auth(token)
        .json(&body);
    for (k, v) in http_headers {
        req = req.header(*k, *v);
    }
    let res = req.send().await.unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

async fn commit(service: &ServiceProcess, token: &str, key: &str) {
    let (status, body) = service
        .call(
            reqwest::Method::POST,
            "/v1/messages/commit",
            token,
            Some(&json!({"biz_id": "shop", "message_key": key})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
}

fn header(record: &Consumed, name: &str) -> Option<String> {
    record
        .header(name)
        .map(|v| String::from_utf8(v.to_vec()).unwrap())
}

fn count(record: &Consumed, name: &str) -> usize {
    record.headers.iter().filter(|(k, _)| k == name).count()
}

/// The records of message `id` delivered by now.
fn records_of(kafka: &Kafka, id: u64) -> Vec<Consumed> {
    kafka
        .records()
        .into_iter()
        .filter(|r| r.message_id == id)
        .collect()
}

async fn a_record_of(kafka: &Kafka, id: u64) -> Consumed {
    eventually(30, "the record in Kafka", async || {
        !records_of(kafka, id).is_empty()
    })
    .await;
    records_of(kafka, id).remove(0)
}

/// The service with `flags` after [`FAST_VERIFY`], and `shop` registered
/// with a check endpoint (answering "unknown" until told otherwise),
/// checked back after 100 ms at most `attempts` times: the service, the
/// endpoint and shop's token.
async fn service_and_shop(
    db: &TestDb,
    kafka: &Kafka,
    flags: &[&str],
    attempts: u32,
) -> (ServiceProcess, CheckServer, String) {
    let mut all = FAST_VERIFY.to_vec();
    all.extend_from_slice(flags);
    let service = ServiceProcess::start(db, kafka.mock.bootstrap(), &all).await;
    let check = CheckServer::start().await;
    let (token, secret) = service
        .register("shop", settings(&check.url(), 100, attempts))
        .await;
    check.set_secret(&secret);
    (service, check, token)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traceparent_on_prepare_reaches_check_back_the_kafka_record_and_the_views() {
    let db = TestDb::create().await;
    let kafka = Kafka::start(&["e2e-trace"]);
    let sink = AlertSink::start().await;
    let webhook = sink.url();
    let (service, check, token) =
        service_and_shop(&db, &kafka, &["--alert-webhook", &webhook], 2).await;
    check.script("checked", Reply::Decide("commit"));
    let traced = [("traceparent", TRACEPARENT), ("tracestate", TRACESTATE)];

    // Committed by check-back.
    let (status, checked) = prepare(&service, &token, "e2e-trace", "checked", &traced, None).await;
    assert_eq!(status, 201, "{checked}");
    assert_eq!(checked["trace_id"], TRACE_ID, "{checked}");
    // Committed by the producer; its own `traceparent` header gives way.
    let user = json!({"traceparent": "00-11111111111111111111111111111111-2222222222222222-01",
                      "content-type": "text/plain"});
    let (status, direct) = prepare(
        &service,
        &token,
        "e2e-trace",
        "direct",
        &traced[..1],
        Some(user),
    )
    .await;
    assert_eq!(status, 201, "{direct}");
    commit(&service, &token, "direct").await;
    // Never decided: VERIFY_FAILED, and its alert names the trace.
    let (status, undecided) =
        prepare(&service, &token, "e2e-trace", "undecided", &traced, None).await;
    assert_eq!(status, 201, "{undecided}");

    eventually(30, "the check-back call", async || {
        check.calls("checked") >= 1
    })
    .await;
    assert_eq!(
        check.trace_headers("checked")[0],
        TraceHeaders {
            traceparent: Some(TRACEPARENT.into()),
            tracestate: Some(TRACESTATE.into()),
        },
        "without exported spans, check-back carries the prepare's trace context as it came"
    );

    let record = a_record_of(&kafka, checked["id"].as_u64().unwrap()).await;
    assert_eq!(header(&record, "traceparent").as_deref(), Some(TRACEPARENT));
    assert_eq!(header(&record, "tracestate").as_deref(), Some(TRACESTATE));
    let record = a_record_of(&kafka, direct["id"].as_u64().unwrap()).await;
    assert_eq!(count(&record, "traceparent"), 1, "{:?}", record.headers);
    assert_eq!(header(&record, "traceparent").as_deref(), Some(TRACEPARENT));
    assert_eq!(header(&record, "tracestate"), None, "none was given");
    assert_eq!(
        header(&record, "content-type").as_deref(),
        Some("text/plain")
    );

    let id = undecided["id"].as_u64().unwrap();
    let alerts = async || {
        let path = format!("/v1/admin/alerts?message_id={id}");
        let (_, page) = service
            .call(reqwest::Method::GET, &path, ADMIN_TOKEN, None)
            .await;
        page
    };
    eventually(30, "the VERIFY_FAILED alert", async || {
        alerts().await["items"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    })
    .await;
    let page = alerts().await;
    assert_eq!(page["items"][0]["trace_id"], TRACE_ID, "{page}");
    eventually(30, "the alert at the webhook", async || {
        sink.alerts().iter().any(|a| a["message_id"] == id)
    })
    .await;
    let posted = sink.alerts();
    let posted = posted.iter().find(|a| a["message_id"] == id).unwrap();
    assert_eq!(posted["trace_id"], TRACE_ID, "{posted}");
    let (_, shown) = service
        .call(
            reqwest::Method::GET,
            &format!("/v1/admin/messages/{id}"),
            ADMIN_TOKEN,
            None,
        )
        .await;
    assert_eq!(shown["message"]["trace_id"], TRACE_ID, "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_traceparent_is_ignored_and_counted_never_refused() {
    let db = TestDb::create().await;
    let kafka = Kafka::start(&["e2e-trace-bad"]);
    let (service, check, token) = service_and_shop(&db, &kafka, &[], 2).await;
    check.default_reply(Reply::Decide("commit"));

    let upper = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01";
    let (status, view) = prepare(
        &service,
        &token,
        "e2e-trace-bad",
        "upper",
        &[("traceparent", upper), ("tracestate", TRACESTATE)],
        None,
    )
    .await;
    assert_eq!(status, 201, "{view}");
    assert_eq!(view["trace_id"], Value::Null, "{view}");
    let zero = "00-00000000000000000000000000000000-00f067aa0ba902b7-01";
    let (status, zeroed) = prepare(
        &service,
        &token,
        "e2e-trace-bad",
        "zero",
        &[("traceparent", zero)],
        None,
    )
    .await;
    assert_eq!(status, 201, "{zeroed}");

    let metrics = service.metrics().await;
    assert_eq!(
        metrics.value("trustmsg_traceparent_invalid_total", &[]),
        Some(2.0),
        "{metrics}"
    );
    let pool = db.pool().await;
    let stored: Vec<(Option<String>, Option<String>)> =
        sqlx::query_as("SELECT traceparent, tracestate FROM messages WHERE biz_id = 'shop'")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(stored, vec![(None, None), (None, None)]);

    eventually(30, "the check-back calls", async || {
        check.calls("upper") >= 1 && check.calls("zero") >= 1
    })
    .await;
    assert_eq!(check.trace_headers("upper")[0], TraceHeaders::default());
    let record = a_record_of(&kafka, view["id"].as_u64().unwrap()).await;
    assert_eq!(header(&record, "traceparent"), None);
    assert_eq!(header(&record, "tracestate"), None);
}

/// One exported span: ids in hex.
#[derive(Debug, Clone)]
struct SpanSeen {
    name: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    service: String,
    start: u64,
    end: u64,
    /// Its events' names and times (ns since the epoch).
    events: Vec<(String, u64)>,
}

/// An OTLP/HTTP receiver: decodes every `POST /v1/traces` body.
async fn otlp_receiver() -> (String, Arc<Mutex<Vec<SpanSeen>>>) {
    async fn traces(
        State(seen): State<Arc<Mutex<Vec<SpanSeen>>>>,
        body: Bytes,
    ) -> (StatusCode, Vec<u8>) {
        let Ok(req) = ExportTraceServiceRequest::decode(body) else {
            return (StatusCode::BAD_REQUEST, Vec::new());
        };
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        for rs in req.resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| r.attributes.iter())
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| kv.value.as_ref())
                .map(|v| format!("{:?}", v.value))
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for s in ss.spans {
                    seen.lock().unwrap().push(SpanSeen {
                        name: s.name,
                        trace_id: hex(&s.trace_id),
                        span_id: hex(&s.span_id),
                        parent_span_id: hex(&s.parent_span_id),
                        service: service.clone(),
                        start: s.start_time_unix_nano,
                        end: s.end_time_unix_nano,
                        events: s
                            .events
                            .iter()
                            .map(|e| (e.name.clone(), e.time_unix_nano))
                            .collect(),
                    });
                }
            }
        }
        // An empty ExportTraceServiceResponse.
        (StatusCode::OK, Vec::new())
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let app = Router::new()
        .route("/v1/traces", post(traces))
        .with_state(seen.clone());
    let addr = serve(app).await;
    (format!("http://{addr}"), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_spans_reach_an_otlp_receiver_as_children_of_the_producers_span() {
    let (endpoint, seen) = otlp_receiver().await;
    let db = TestDb::create().await;
    let kafka = Kafka::start(&["e2e-spans"]);
    let otlp = [
        "--otlp-endpoint",
        endpoint.as_str(),
        "--otlp-service-name",
        "trustmsg-e2e",
        "--otlp-export-interval",
        "200ms",
    ];
    let (service, check, token) = service_and_shop(&db, &kafka, &otlp, 3).await;
    check.script("checked", Reply::Decide("commit"));
    let traced = [("traceparent", TRACEPARENT), ("tracestate", TRACESTATE)];

    let (_, checked) = prepare(&service, &token, "e2e-spans", "checked", &traced, None).await;
    let (_, direct) = prepare(&service, &token, "e2e-spans", "direct", &traced, None).await;
    commit(&service, &token, "direct").await;
    let checked_record = a_record_of(&kafka, checked["id"].as_u64().unwrap()).await;
    let direct_record = a_record_of(&kafka, direct["id"].as_u64().unwrap()).await;

    let named = |name: &str| -> Vec<SpanSeen> {
        seen.lock()
            .unwrap()
            .iter()
            .filter(|s| s.name == name)
            .cloned()
            .collect()
    };
    eventually(30, "every span exported", async || {
        named("trustmsg prepare").len() >= 2
            && !named("trustmsg commit").is_empty()
            && !named("trustmsg check-back").is_empty()
            && named("trustmsg send").len() >= 2
    })
    .await;
    let all = seen.lock().unwrap().clone();
    for s in &all {
        assert_eq!(s.trace_id, TRACE_ID, "the producer's trace: {s:?}");
        assert_eq!(
            s.parent_span_id, PRODUCER_SPAN,
            "a child of the producer's span: {s:?}"
        );
        assert!(s.service.contains("trustmsg-e2e"), "{s:?}");
    }
    // A producer's call shows its write's stages (docs/performance.md, the
    // stage budget): when the group commit began its batch, when the
    // answer came, in order within the span.
    for s in named("trustmsg prepare")
        .iter()
        .chain(&named("trustmsg commit"))
    {
        let names: Vec<&str> = s.events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["trustmsg.write.began", "trustmsg.write.done"],
            "{s:?}"
        );
        let (began, done) = (s.events[0].1, s.events[1].1);
        assert!(s.start <= began && began <= done && done <= s.end, "{s:?}");
    }
    // What was propagated names our spans: same trace, our span ids.
    let check_back = &named("trustmsg check-back")[0];
    let sent = check.trace_headers("checked")[0].clone();
    assert_eq!(
        sent.traceparent,
        Some(format!("00-{TRACE_ID}-{}-01", check_back.span_id)),
        "{all:?}"
    );
    assert_eq!(sent.tracestate.as_deref(), Some(TRACESTATE));
    let sends: Vec<String> = named("trustmsg send")
        .into_iter()
        .map(|s| s.span_id)
        .collect();
    for record in [&checked_record, &direct_record] {
        let tp = header(record, "traceparent").expect("a traceparent");
        let span = tp.split('-').nth(2).unwrap().to_string();
        assert!(tp.starts_with(&format!("00-{TRACE_ID}-")), "{tp}");
        assert!(sends.contains(&span), "{tp} names a send span: {sends:?}");
        assert_eq!(header(record, "tracestate").as_deref(), Some(TRACESTATE));
    }
}
