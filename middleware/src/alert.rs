//! Alerts: a message needs a person (VERIFY_FAILED, SEND_FAILED).
//!
//! An alert is a structured ERROR log line, a Prometheus counter
//! (`trustmsg_alerts_total{kind}`) and, when `--alert-webhook` is set, a JSON
//! POST retried a few times with backoff. Callers fire an alert only after the
//! guarded UPDATE that made the failure happened *in this call* succeeded, so
//! each failure of each message alerts exactly once across all instances.
//! The webhook is best effort: the durable record is the row's state and its
//! audit rows.

use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use serde::Serialize;

/// What went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    /// Check-back gave no decision within the attempt limit.
    VerifyFailed,
    /// Kafka refused the message permanently or the attempt limit was reached.
    SendFailed,
}

impl AlertKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::VerifyFailed => "verify_failed",
            Self::SendFailed => "send_failed",
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
    /// Check-back attempts (verify_failed) or send attempts (send_failed).
    pub attempts: u32,
    /// The last error.
    pub last_error: String,
}

/// Fires alerts.
#[derive(Debug, Clone)]
pub struct Alerter {
    webhook: Option<url::Url>,
    http: reqwest::Client,
}

impl Alerter {
    /// An alerter posting to `webhook` when set.
    pub fn new(webhook: Option<url::Url>) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("static reqwest configuration");
        Self { webhook, http }
    }

    /// Logs, counts and (in the background) posts the alert.
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
        let Some(url) = self.webhook.clone() else {
            return;
        };
        let http = self.http.clone();
        tokio::spawn(async move {
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
        });
    }
}
