//! Alert delivery: the webhook side of the alert outbox.
//!
//! An alert (a message needs a person: VERIFY_FAILED, SEND_FAILED, a row
//! quarantined because it could not be read, a message waiting far too long)
//! is written to the `alerts` table in the transaction of the state change
//! that raises it, and logged (ERROR) and counted
//! (`trustmsg_alerts_total{kind}`) by the instance whose transaction wrote it,
//! right after the commit (see the store's `sql/alerts.rs`). This worker,
//! which every instance runs, takes it from there:
//!
//! - **Any instance delivers.** A round claims due pending alerts (`FOR UPDATE
//!   SKIP LOCKED` on MySQL, the write lock on SQLite) for as long as one
//!   POST and the statement recording it may take plus [`LEASE_MARGIN`] (12 s
//!   with the default `--request-timeout`), POSTs them all at once to
//!   `--alert-webhook`, and marks each delivered on a 2xx. An instance that
//!   dies mid-POST (or whose claim was committed as the database went away)
//!   leaves its claims to come back after that short lease, to whichever
//!   instance is there.
//! - **At least once, with a stable id.** Every POST of an alert carries the
//!   same id, in the `trustmsg-alert-id` header and the body's `alert_id`, so
//!   a receiver drops a repeat (a POST the webhook took but whose answer was
//!   lost, or one whose claim ran out mid-POST).
//! - **Retries never give up.** A failed POST (no answer, a timeout, a
//!   non-2xx, a redirect) counts a delivery attempt, keeps its error, and is
//!   due again after [`BACKOFF`] (1 s doubling, capped at a minute, jittered),
//!   stored on the row so that another instance, after a crash, goes on where
//!   this one left off. Undelivered alerts stay `pending`: an operator sees
//!   them (`GET /v1/admin/alerts?state=pending`, the
//!   `trustmsg_alerts_undelivered` gauge), nothing is dropped.
//! - **Signed, to allowed addresses only.** With `--alert-signing-secret` each
//!   POST is signed the Standard Webhooks way, as check-back calls are
//!   (`webhook-id` = the alert id, the same in every retry;
//!   `webhook-timestamp`; `webhook-signature: v1,<base64 HMAC-SHA256>`), so a
//!   receiver can tell trustmsg's alerts from anyone else's POST with an
//!   existing library. The webhook is dialled through the check-back
//!   [`AddressPolicy`]: its URL is checked at start-up and every connection
//!   is checked on the address actually dialled.
//! - **Without a webhook** an instance settles due alerts as `no_webhook`:
//!   their log line and counter were all there was to them, and they must not
//!   wait forever as undelivered. Give every instance the same
//!   `--alert-webhook`: one without it settles alerts the others would POST.
//! - **Shutdown** stops claiming, lets POSTs in flight finish within the
//!   grace period and writes their outcome; one cut off keeps its claim and
//!   comes back after the lease. Nothing is lost either way: the row is there.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::CONTENT_TYPE;
use serde::Serialize;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use trustmsg_verify_api::admin::{AlertKind, AlertView};
use trustmsg_verify_api::{signature, webhook};

use crate::backoff::Backoff;
use crate::net::address_policy::{self, AddressPolicy};
use crate::net::secret::Secret;
use crate::store::{deadline, DynStore};
use crate::workers::periodic;

/// How much longer than a POST ([`POST_TIMEOUT`]) and the statement that
/// records it (the workers' statement deadline) a claimed alert stays this
/// instance's. Short, because a claim whose answer the database never sent
/// (it went away right after the commit) holds its alerts for that long.
pub const LEASE_MARGIN: Duration = Duration::from_secs(2);
/// How long one POST may take.
const POST_TIMEOUT: Duration = Duration::from_secs(5);
/// The delay after the n-th failed POST of an alert.
pub const BACKOFF: Backoff = Backoff {
    base: Duration::from_secs(1),
    max: Duration::from_secs(60),
};
/// Alerts claimed at once, all POSTed at once: each claimed alert's POST
/// starts at once, so the lease need cover only one POST.
const BATCH: u32 = 8;
/// How often an idle instance looks for due alerts.
const POLL: Duration = Duration::from_secs(1);

/// The header that carries the alert's stable id.
pub const ALERT_ID_HEADER: &str = "trustmsg-alert-id";

/// The webhook body. Its `alert_id`, `kind` and `message_id` are stable (a
/// receiver de-duplicates and reconciles by them); see docs/operations.md.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AlertBody<'a> {
    /// The alert's stable id: the same in every POST of it.
    pub alert_id: u64,
    /// What went wrong.
    pub kind: AlertKind,
    /// trustmsg's message id.
    pub message_id: u64,
    /// The producer.
    pub biz_id: &'a str,
    /// The producer's message key.
    pub message_key: &'a str,
    /// Check-back attempts (verify_failed, verify_overdue) or send attempts
    /// (send_failed, send_overdue); 0 for a quarantined row.
    pub attempts: u32,
    /// The message's last error when the alert was raised.
    pub last_error: &'a str,
    /// When the alert was raised (RFC 3339, database clock).
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// The message's W3C trace id, null when its prepare carried none.
    pub trace_id: Option<&'a str>,
    /// The consumer group of a consumption alert (`consumption_failing`,
    /// `consumption_stuck`); null for a message alert.
    pub group: Option<&'a str>,
}

impl<'a> From<&'a AlertView> for AlertBody<'a> {
    fn from(a: &'a AlertView) -> Self {
        Self {
            alert_id: a.alert_id,
            kind: a.kind,
            message_id: a.message_id,
            biz_id: &a.biz_id,
            message_key: &a.message_key,
            attempts: a.attempts,
            last_error: &a.last_error,
            created_at: a.created_at,
            trace_id: a.trace_id.as_deref(),
            group: a.group.as_deref(),
        }
    }
}

/// Where and how alerts are POSTed.
#[derive(Debug, Clone)]
pub struct Webhook {
    /// `--alert-webhook`.
    pub url: url::Url,
    /// `--alert-signing-secret` (`whsec_<base64>`, checked at start-up);
    /// None: POSTs go unsigned.
    pub signing_secret: Option<Secret>,
    /// The addresses the webhook's client may dial (the check-back policy).
    pub policy: Arc<AddressPolicy>,
}

impl Webhook {
    /// Unsigned POSTs to `url`, under the default address policy.
    pub fn new(url: url::Url) -> Self {
        Self {
            url,
            signing_secret: None,
            policy: Arc::default(),
        }
    }
}

/// The webhook with its HTTP client.
#[derive(Clone)]
struct Target {
    http: reqwest::Client,
    webhook: Webhook,
}

/// Delivers the outbox's alerts; cheap to clone.
#[derive(Clone)]
pub struct AlertDelivery {
    store: DynStore,
    target: Option<Target>,
    /// Each of its statements' deadline (see [`crate::store::deadline`]).
    statement_timeout: Duration,
}

impl AlertDelivery {
    /// Delivery to `webhook`, or settling as `no_webhook` without one; each
    /// statement gives up after `statement_timeout`.
    pub fn new(store: DynStore, webhook: Option<Webhook>, statement_timeout: Duration) -> Self {
        let target = webhook.map(|webhook| {
            let http = address_policy::client_builder(webhook.policy.clone())
                .timeout(POST_TIMEOUT)
                .user_agent(concat!("trustmsg-alerts/", env!("CARGO_PKG_VERSION")))
                .build()
                .expect("static reqwest configuration");
            Target { http, webhook }
        });
        Self {
            store,
            target,
            statement_timeout,
        }
    }

    /// Runs rounds until `cancel`; POSTs in flight then get `grace` to finish.
    pub fn spawn(self, cancel: CancellationToken, grace: Duration) -> JoinHandle<()> {
        let stop = cancel.clone();
        periodic::spawn(POLL, cancel, move || {
            let (this, stop) = (self.clone(), stop.clone());
            async move {
                let cut_off = async {
                    stop.cancelled().await;
                    tokio::time::sleep(grace).await;
                };
                tokio::select! {
                    _ = this.drain(&stop) => {}
                    _ = cut_off => tracing::warn!(
                        "shutdown grace ran out with alert POSTs in flight; their alerts come back after the lease"
                    ),
                }
            }
        })
    }

    /// Rounds until one finds less than a full batch, or shutdown.
    async fn drain(&self, cancel: &CancellationToken) {
        while !cancel.is_cancelled() {
            match self.deliver_due().await {
                Ok(n) if n == BATCH as usize => continue,
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "could not claim due alerts; trying again next round");
                    return;
                }
            }
        }
    }

    /// One round: claims up to a batch of due alerts and POSTs each (or,
    /// without a webhook, settles them); returns how many it took. Tests
    /// step delivery with it.
    pub async fn deliver_due(&self) -> crate::store::StoreResult<usize> {
        let Some(target) = &self.target else {
            let settle = self.store.settle_alerts_without_webhook(BATCH);
            let n = self.within("settle alerts", settle).await?;
            return Ok(usize::try_from(n).unwrap_or(usize::MAX));
        };
        let lease = POST_TIMEOUT + self.statement_timeout + LEASE_MARGIN;
        let claim = self.store.claim_due_alerts(BATCH, lease);
        let claimed = self.within("claim due alerts", claim).await?;
        let n = claimed.len();
        futures::stream::iter(claimed)
            .for_each_concurrent(BATCH as usize, |a| async move {
                let outcome = target.post(&a).await;
                self.record(&a, outcome).await;
            })
            .await;
        Ok(n)
    }

    /// One statement of delivery, within its deadline.
    async fn within<T>(
        &self,
        what: &str,
        statement: impl std::future::Future<Output = crate::store::StoreResult<T>>,
    ) -> crate::store::StoreResult<T> {
        deadline::within(self.statement_timeout, what, statement).await
    }

    /// Writes what a POST of `a` came to.
    async fn record(&self, a: &AlertView, outcome: Result<(), String>) {
        let written = match &outcome {
            Ok(()) => {
                metrics::counter!("trustmsg_alert_deliveries_total").increment(1);
                tracing::info!(
                    alert_id = a.alert_id,
                    message_id = a.message_id,
                    "alert delivered"
                );
                let mark = self.store.mark_alert_delivered(a.alert_id);
                self.within("mark an alert delivered", mark).await
            }
            Err(e) => {
                metrics::counter!("trustmsg_alert_delivery_failures_total").increment(1);
                let failures = a.delivery_attempts.saturating_add(1);
                let delay = BACKOFF.delay(failures);
                tracing::warn!(
                    alert_id = a.alert_id,
                    message_id = a.message_id,
                    attempt = failures,
                    retry_in = ?delay,
                    error = %e,
                    "alert webhook failed; will retry"
                );
                let retry = self.store.retry_alert_later(a.alert_id, e, delay);
                self.within("retry an alert later", retry).await
            }
        };
        if let Err(e) = written {
            tracing::warn!(alert_id = a.alert_id, error = %e, "could not record the alert's delivery; it comes back after the lease");
        }
    }
}

impl Target {
    /// One POST of `a`, signed when there is a secret; Err with a short
    /// reason unless the webhook answered 2xx.
    async fn post(&self, a: &AlertView) -> Result<(), String> {
        let Webhook {
            url,
            signing_secret,
            policy,
        } = &self.webhook;
        // IP literals never reach the policy's resolver.
        policy.check_literal(url).map_err(|e| e.to_string())?;
        let body = serde_json::to_vec(&AlertBody::from(a)).expect("an alert serialises");
        // The alert's id, not the attempt's: a receiver drops a repeat by it.
        let id = a.alert_id.to_string();
        let mut post = self
            .http
            .post(url.clone())
            .header(ALERT_ID_HEADER, &id)
            .header(CONTENT_TYPE, "application/json");
        if let Some(secret) = signing_secret {
            let ts = chrono::Utc::now().timestamp();
            let sig = signature::sign(secret.expose(), &id, ts, &body)
                .map_err(|e| format!("cannot sign the alert: {e}"))?;
            post = post
                .header(webhook::ID, &id)
                .header(webhook::TIMESTAMP, ts.to_string())
                .header(webhook::SIGNATURE, sig);
        }
        let answer = post
            .body(body)
            .send()
            .await
            .map_err(|e| address_policy::with_causes(e.to_string(), &e))?;
        let status = answer.status();
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("the webhook answered {status}"))
        }
    }
}
