//! Alert delivery from the outbox, stepped one round at a time
//! ([`AlertDelivery::deliver_due`]) against a real local webhook: a refused
//! POST is retried later under the same alert id, a 2xx marks the alert
//! delivered and nothing is POSTed again; without a webhook alerts are
//! settled instead of waiting forever. `/metrics` shows the undelivered ones
//! and counts the POSTs.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use trustmsg::net::address_policy::{AddressPolicy, StaticResolver};
use trustmsg::store::{Actor, AlertFilter, Store};
use trustmsg::workers::alerts::{AlertDelivery, Webhook};
use trustmsg_tests::flags::{flags, refs};
use trustmsg_tests::{eventually, prepare_body, AlertSink, TestApp};
use trustmsg_verify_api::admin::{AlertState, AlertView};

use crate::flags::CHECK_AT_ONCE;
use crate::store::harness::{arrange_key, Backend, Due, State};

/// A SEND_FAILED message, and so one pending alert; returns the alert.
async fn one_alert(s: &dyn Store) -> AlertView {
    let m = arrange_key(s, "k", State::SendPending, Due::Later)
        .await
        .unwrap();
    s.mark_send_failed(m.id, m.version, "refused for good", &Actor::Forwarder)
        .await
        .unwrap()
        .unwrap();
    let all = s
        .list_alerts(AlertFilter::default(), 10, None)
        .await
        .unwrap();
    assert_eq!(all.len(), 1);
    all.into_iter().next().unwrap()
}

async fn the_alert(s: &dyn Store) -> AlertView {
    s.list_alerts(AlertFilter::default(), 10, None)
        .await
        .unwrap()
        .remove(0)
}

async fn a_refused_alert_is_retried_under_its_id_and_delivered_once(b: &Backend) {
    let s = b.store.as_ref();
    let alert = one_alert(s).await;
    let sink = AlertSink::start().await;
    sink.answer(StatusCode::INTERNAL_SERVER_ERROR);
    let delivery = AlertDelivery::new(
        b.store.clone(),
        Some(Webhook::new(sink.url().parse().unwrap())),
        Duration::from_secs(5),
    );

    assert_eq!(delivery.deliver_due().await.unwrap(), 1);
    assert_eq!(sink.refused(), 1);
    let a = the_alert(s).await;
    assert_eq!((a.state, a.delivery_attempts), (AlertState::Pending, 1));
    assert_eq!(
        a.last_delivery_error.as_deref(),
        Some("the webhook answered 500 Internal Server Error")
    );
    assert_eq!(
        delivery.deliver_due().await.unwrap(),
        0,
        "not due again before its backoff"
    );

    sink.answer(StatusCode::NO_CONTENT);
    eventually(10, "the retry after the backoff", async || {
        delivery.deliver_due().await.unwrap() == 1
    })
    .await;
    let got = sink.alerts();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["alert_id"], alert.alert_id);
    assert_eq!(got[0]["header_alert_id"], alert.alert_id.to_string());
    assert_eq!(got[0]["kind"], "send_failed");
    assert_eq!(got[0]["message_id"], alert.message_id);
    assert_eq!(got[0]["last_error"], "refused for good");
    let a = the_alert(s).await;
    assert_eq!((a.state, a.delivery_attempts), (AlertState::Delivered, 2));
    assert_eq!(a.next_attempt_at, None);

    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(delivery.deliver_due().await.unwrap(), 0, "delivered: done");
    assert_eq!(sink.alerts().len(), 1);
}

async fn without_a_webhook_alerts_are_settled_not_left_pending(b: &Backend) {
    let s = b.store.as_ref();
    one_alert(s).await;
    let delivery = AlertDelivery::new(b.store.clone(), None, Duration::from_secs(5));
    assert_eq!(delivery.deliver_due().await.unwrap(), 1);
    assert_eq!(the_alert(s).await.state, AlertState::NoWebhook);
    assert_eq!(delivery.deliver_due().await.unwrap(), 0);
}

/// The webhook's name resolves (now: say, after a DNS change) to an address
/// the policy denies: the POST is refused on the address it would dial, the
/// alert stays pending with the reason, and the webhook gets nothing.
async fn a_webhook_name_resolving_to_a_denied_address_is_not_dialled(b: &Backend) {
    let s = b.store.as_ref();
    one_alert(s).await;
    let sink = AlertSink::start().await;
    let port = sink.url().parse::<url::Url>().unwrap().port().unwrap();
    let resolver = StaticResolver::new(
        [("alerts.test".to_string(), "127.0.0.1".parse().unwrap())],
        None,
    );
    let policy = AddressPolicy::new(Vec::new(), vec!["127.0.0.1/32".parse().unwrap()])
        .with_resolver(Arc::new(resolver));
    let webhook = Webhook {
        url: format!("http://alerts.test:{port}/alerts").parse().unwrap(),
        signing_secret: None,
        policy: Arc::new(policy),
    };
    let delivery = AlertDelivery::new(b.store.clone(), Some(webhook), Duration::from_secs(5));
    assert_eq!(delivery.deliver_due().await.unwrap(), 1);
    let a = the_alert(s).await;
    assert_eq!((a.state, a.delivery_attempts), (AlertState::Pending, 1));
    let why = a.last_delivery_error.unwrap_or_default();
    assert!(
        why.contains("alerts.test resolves only to refused addresses")
            && why.contains("--verify-deny-cidr"),
        "{why}"
    );
    assert!(sink.alerts().is_empty() && sink.refused() == 0);
}

#[tokio::test]
async fn sqlite_a_webhook_name_resolving_to_a_denied_address_is_not_dialled() {
    let b = Backend::sqlite().await;
    a_webhook_name_resolving_to_a_denied_address_is_not_dialled(&b).await;
    b.finish().await;
}

#[tokio::test]
async fn mysql_a_refused_alert_is_retried_under_its_id_and_delivered_once() {
    let b = Backend::mysql().await;
    a_refused_alert_is_retried_under_its_id_and_delivered_once(&b).await;
    b.finish().await;
}

#[tokio::test]
async fn sqlite_a_refused_alert_is_retried_under_its_id_and_delivered_once() {
    let b = Backend::sqlite().await;
    a_refused_alert_is_retried_under_its_id_and_delivered_once(&b).await;
    b.finish().await;
}

#[tokio::test]
async fn mysql_without_a_webhook_alerts_are_settled_not_left_pending() {
    let b = Backend::mysql().await;
    without_a_webhook_alerts_are_settled_not_left_pending(&b).await;
    b.finish().await;
}

#[tokio::test]
async fn sqlite_without_a_webhook_alerts_are_settled_not_left_pending() {
    let b = Backend::sqlite().await;
    without_a_webhook_alerts_are_settled_not_left_pending(&b).await;
    b.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_an_undelivered_alert_until_the_webhook_takes_it() {
    let sink = AlertSink::start().await;
    sink.answer(StatusCode::BAD_GATEWAY);
    let webhook = sink.url();
    let app = TestApp::spawn(&refs(&flags(&[
        CHECK_AT_ONCE,
        &["--backlog-interval", "100ms", "--alert-webhook", &webhook],
    ])))
    .await;
    let token = app.register_giving_up_after_one_check("shop").await;
    app.prepare(Some(&token), &prepare_body("shop", "k")).await;
    eventually(20, "an undelivered alert with a failed POST", async || {
        app.counter("trustmsg_alerts_undelivered").await == 1
            && app.counter("trustmsg_alert_delivery_failures_total").await >= 1
    })
    .await;
    assert_eq!(app.counter("trustmsg_alert_deliveries_total").await, 0);
    assert_eq!(app.counter("trustmsg_alerts_total").await, 1);

    sink.answer(StatusCode::OK);
    eventually(
        20,
        "the alert delivered and no longer counted as waiting",
        async || {
            app.counter("trustmsg_alerts_undelivered").await == 0
                && app.counter("trustmsg_alert_deliveries_total").await == 1
        },
    )
    .await;
    assert_eq!(sink.alerts().len(), 1);
    assert_eq!(app.counter("trustmsg_alerts_total").await, 1, "raised once");
    app.finish().await;
}

/// A service whose webhook takes `answer_after` to answer each POST; the
/// receiver hears of each POST as it arrives.
async fn slow_webhook_service(
    grace: &str,
    answer_after: Duration,
) -> (TestApp, tokio::sync::mpsc::UnboundedReceiver<()>) {
    let (arrived_tx, arrived) = tokio::sync::mpsc::unbounded_channel();
    let router = Router::new().route(
        "/alerts",
        post(move || {
            let tx = arrived_tx.clone();
            async move {
                let _ = tx.send(());
                tokio::time::sleep(answer_after).await;
                StatusCode::NO_CONTENT
            }
        }),
    );
    let webhook = format!("http://{}/alerts", trustmsg_tests::serve(router).await);
    let app = TestApp::spawn(&[
        "--no-verifier",
        "--shutdown-grace",
        grace,
        "--alert-webhook",
        &webhook,
    ])
    .await;
    (app, arrived)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_shutdown_lets_a_post_in_flight_finish_and_records_it() {
    let (app, mut arrived) = slow_webhook_service("10s", Duration::from_millis(800)).await;
    let store = app.store().clone();
    one_alert(store.as_ref()).await;
    arrived.recv().await.expect("the POST arrives");
    app.app.stop().await.expect("clean shutdown");
    let a = the_alert(store.as_ref()).await;
    assert_eq!((a.state, a.delivery_attempts), (AlertState::Delivered, 1));
    app.db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_the_shutdown_grace_cuts_off_leaves_its_alert_pending_for_the_next_instance() {
    let (app, mut arrived) = slow_webhook_service("0s", Duration::from_secs(30)).await;
    let store = app.store().clone();
    one_alert(store.as_ref()).await;
    arrived.recv().await.expect("the POST arrives");
    app.app.stop().await.expect("clean shutdown");
    let a = the_alert(store.as_ref()).await;
    assert_eq!(a.state, AlertState::Pending, "not lost: {a:?}");
    assert!(
        a.next_attempt_at > Some(a.created_at),
        "claimed until its lease runs out: {a:?}"
    );
    app.db.drop_db().await;
}
