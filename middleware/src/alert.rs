//! Alerts: a message needs a person (VERIFY_FAILED, SEND_FAILED, a row
//! quarantined because it could not be read, a message waiting far too long,
//! found by the overdue watch).
//!
//! An alert is a structured ERROR log line, a Prometheus counter
//! (`trustmsg_alerts_total{kind}`) and, when `--alert-webhook` is set, a JSON
//! POST retried a few times with backoff. Callers fire an alert only after the
//! guarded UPDATE that made the failure happened *in this call* succeeded, so
//! each failure of each message alerts exactly once across all instances.
//! The webhook is best effort: the durable record is the row's state and its
//! audit rows.
//!
//! Webhook deliveries go through one bounded queue ([`ALERT_QUEUE`] alerts)
//! and one delivery task, so a slow or hung webhook costs a fixed amount of
//! memory and one task, however many alerts fire. When the queue is full the
//! oldest alert is dropped (the newest say most about the current state), and
//! each drop is counted in `trustmsg_alerts_dropped_total` and logged; the
//! ERROR log line and `trustmsg_alerts_total` of every alert are never dropped.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use serde::Serialize;
use tokio::sync::Notify;

use crate::store::Quarantined;

/// Webhook deliveries waiting at most; beyond it the oldest is dropped.
pub const ALERT_QUEUE: usize = 1024;

/// What went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    /// Check-back gave no decision within the attempt limit.
    VerifyFailed,
    /// Kafka refused the message permanently or the attempt limit was reached.
    SendFailed,
    /// A claim found the row due but could not read it (a value this version
    /// does not know, headers that are not JSON) and set it aside: it is
    /// neither sent nor checked until a person repairs it.
    Quarantined,
    /// A committed message is still not in Kafka long after its commit (its
    /// sends keep timing out or finding the cluster away): nothing failed for
    /// good, but a person should look (see `--alert-send-overdue-after`).
    SendOverdue,
    /// A message is still PREPARED long after its prepare (its check-back
    /// keeps being put off): see `--alert-verify-overdue-after`.
    VerifyOverdue,
}

impl AlertKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::VerifyFailed => "verify_failed",
            Self::SendFailed => "send_failed",
            Self::Quarantined => "quarantined",
            Self::SendOverdue => "send_overdue",
            Self::VerifyOverdue => "verify_overdue",
        }
    }
}

/// The webhook body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Alert {
    /// What went wrong.
    pub kind: AlertKind,
    /// trustmsg's message id.
    pub message_id: u64,
    /// The producer.
    pub biz_id: String,
    /// The producer's message key.
    pub message_key: String,
    /// Check-back attempts (verify_failed, verify_overdue) or send attempts
    /// (send_failed, send_overdue); 0 for a quarantined row, whose counters
    /// may be what is unreadable.
    pub attempts: u32,
    /// The last error.
    pub last_error: String,
}

/// Fires alerts; cheap to clone (clones share the queue and its task).
#[derive(Debug, Clone)]
pub struct Alerter {
    webhook: Option<Arc<Webhook>>,
}

/// The webhook side: the queue and its delivery task. Dropping the last
/// [`Alerter`] drops this and stops the task once the queue is empty.
#[derive(Debug)]
struct Webhook {
    queue: Arc<Queue>,
}

#[derive(Debug, Default)]
struct Queue {
    alerts: Mutex<VecDeque<Alert>>,
    ready: Notify,
    closed: AtomicBool,
    dropped: AtomicU64,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.queue.closed.store(true, Ordering::Release);
        self.queue.ready.notify_one();
    }
}

impl Queue {
    /// Queues `alert`, dropping the oldest when full; returns the dropped one.
    fn push(&self, alert: Alert) -> Option<Alert> {
        let mut q = self.alerts.lock().unwrap_or_else(|p| p.into_inner());
        let dropped = if q.len() >= ALERT_QUEUE {
            q.pop_front()
        } else {
            None
        };
        q.push_back(alert);
        dropped
    }

    fn pop(&self) -> Option<Alert> {
        self.alerts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front()
    }
}

impl Alerter {
    /// An alerter posting to `webhook` when set. With a webhook it starts the
    /// delivery task, so it must then be called within a Tokio runtime.
    pub fn new(webhook: Option<url::Url>) -> Self {
        let webhook = webhook.map(|url| {
            crate::tls::install_crypto_provider();
            let http = reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("static reqwest configuration");
            let queue = Arc::new(Queue::default());
            tokio::spawn(deliver(queue.clone(), http, url));
            Arc::new(Webhook { queue })
        });
        Self { webhook }
    }

    /// Logs, counts and queues the alert for the webhook.
    pub fn fire(&self, alert: Alert) {
        tracing::error!(
            alert = alert.kind.as_str(),
            message_id = alert.message_id,
            biz_id = %alert.biz_id,
            message_key = %alert.message_key,
            attempts = alert.attempts,
            last_error = %alert.last_error,
            "ALERT: message needs an operator"
        );
        metrics::counter!("trustmsg_alerts_total", "kind" => alert.kind.as_str()).increment(1);
        let Some(webhook) = &self.webhook else {
            return;
        };
        if let Some(old) = webhook.queue.push(alert) {
            webhook.queue.dropped.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("trustmsg_alerts_dropped_total").increment(1);
            tracing::warn!(
                message_id = old.message_id,
                kind = old.kind.as_str(),
                "alert webhook is behind; dropped its oldest queued alert (the ERROR log line above it stands)"
            );
        }
        webhook.queue.ready.notify_one();
    }

    /// Fires one [`AlertKind::Quarantined`] alert per row a claim set aside.
    /// A quarantined row is out of every scan, so no claim reports it twice.
    pub fn quarantined(&self, rows: &[Quarantined]) {
        for q in rows {
            self.fire(Alert {
                kind: AlertKind::Quarantined,
                message_id: q.id,
                biz_id: q.biz_id.clone(),
                message_key: q.message_key.clone(),
                attempts: 0,
                last_error: q.reason.clone(),
            });
        }
    }

    /// Alerts dropped from the webhook queue so far.
    pub fn dropped(&self) -> u64 {
        self.webhook
            .as_ref()
            .map_or(0, |w| w.queue.dropped.load(Ordering::Relaxed))
    }
}

/// The delivery task: posts queued alerts one at a time until the alerter is
/// gone and the queue is empty.
async fn deliver(queue: Arc<Queue>, http: reqwest::Client, url: url::Url) {
    loop {
        let Some(alert) = queue.pop() else {
            if queue.closed.load(Ordering::Acquire) {
                return;
            }
            queue.ready.notified().await;
            continue;
        };
        let post = || async {
            http.post(url.clone())
                .json(&alert)
                .send()
                .await?
                .error_for_status()
        };
        let sent = post
            .retry(
                ExponentialBuilder::default()
                    .with_min_delay(Duration::from_millis(200))
                    .with_max_times(4)
                    .with_jitter(),
            )
            .await;
        if let Err(e) = sent {
            tracing::error!(error = %e, message_id = alert.message_id, "alert webhook failed after retries");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(i: u64) -> Alert {
        Alert {
            kind: AlertKind::SendFailed,
            message_id: i,
            biz_id: "shop".into(),
            message_key: format!("k-{i}"),
            attempts: 1,
            last_error: "refused".into(),
        }
    }

    /// A webhook that accepts connections and never answers.
    async fn hung_webhook() -> url::Url {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/alerts", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((sock, _)) = listener.accept().await {
                held.push(sock);
            }
        });
        url.parse().unwrap()
    }

    #[tokio::test]
    async fn alerts_to_a_hung_webhook_do_not_grow_tasks_and_the_oldest_drops_are_counted() {
        let alerter = Alerter::new(Some(hung_webhook().await));
        let tasks = tokio::runtime::Handle::current().metrics();
        let before = tasks.num_alive_tasks();
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let extra = 100;
        // The delivery task does not run until this test yields, so exactly
        // `extra` alerts are over the bound.
        metrics::with_local_recorder(&recorder, || {
            for i in 0..(ALERT_QUEUE + extra) as u64 {
                alerter.fire(alert(i));
            }
        });

        let grown = tasks.num_alive_tasks().saturating_sub(before);
        assert_eq!(
            grown,
            0,
            "{grown} more tasks after {} alerts",
            ALERT_QUEUE + extra
        );
        assert_eq!(alerter.dropped(), extra as u64);
        let queue = &alerter.webhook.as_ref().unwrap().queue;
        let queued: Vec<u64> = {
            let q = queue.alerts.lock().unwrap();
            q.iter().map(|a| a.message_id).collect()
        };
        assert_eq!(queued.len(), ALERT_QUEUE);
        assert_eq!(
            queued.first(),
            Some(&(extra as u64)),
            "the oldest went first"
        );
        assert_eq!(queued.last(), Some(&((ALERT_QUEUE + extra - 1) as u64)));
        let rendered = recorder.handle().render();
        assert!(
            rendered.contains(&format!("trustmsg_alerts_dropped_total {extra}")),
            "{rendered}"
        );
    }

    #[tokio::test]
    async fn the_delivery_task_posts_queued_alerts_and_ends_with_the_last_alerter() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url: url::Url = format!("http://{}/alerts", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let app = axum::Router::new().route(
            "/alerts",
            axum::routing::post(move |axum::Json(v): axum::Json<serde_json::Value>| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(v["message_id"].as_u64());
                    axum::http::StatusCode::NO_CONTENT
                }
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        let tasks = tokio::runtime::Handle::current().metrics();
        let alerter = Alerter::new(Some(url));
        for i in 0..3 {
            alerter.clone().fire(alert(i));
        }
        let mut got = Vec::new();
        for _ in 0..3 {
            got.push(rx.recv().await.flatten());
        }
        assert_eq!(got, vec![Some(0), Some(1), Some(2)], "in order, each once");
        let with_alerter = tasks.num_alive_tasks();
        drop(alerter);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while tasks.num_alive_tasks() >= with_alerter {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the delivery task outlived its alerter"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
