//! One check-back call and what its answer does to the row: the call (only
//! if the claim still outlasts it), its record for operators, and the
//! decision, reschedule or VERIFY_FAILED it leads to, each guarded by the
//! claim's version (a decision, by the row's current one when that moved on
//! while the row is still PREPARED).

use std::time::Duration;

use opentelemetry::trace::SpanKind;
use opentelemetry::KeyValue;
use trustmsg_verify_api::{CheckRequest, Decision, MessageStatus};

use super::claim::Claim;
use super::client::{CheckFailure, Endpoint, Trace};
use super::limit::{Load, Permit};
use super::{Inner, Outcome};
use crate::observability::trace::OwnSpan;
use crate::store::Reschedule;
use crate::store::{Actor, CheckAttempt, Message, Transition};
use crate::workers::flow::{self, Event};

impl Inner {
    /// Calls the producer about the claimed row and applies the answer; the
    /// outcome is counted in `trustmsg_verify_checks_total`.
    pub(super) async fn check_one(&self, claim: Claim, permit: Permit) -> Outcome {
        let m = &claim.message;
        let outcome = match self.try_check_one(&claim, &permit).await {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(message_id = m.id, biz_id = %m.biz_id, error = %e,
                    "check-back bookkeeping failed; the row comes back after its lease");
                Outcome::Error
            }
        };
        let label = match outcome {
            Outcome::Committed => "committed",
            Outcome::RolledBack => "rolled_back",
            Outcome::Rescheduled => "rescheduled",
            Outcome::VerifyFailed => "verify_failed",
            Outcome::Released => "released",
            Outcome::Lost => "lost",
            Outcome::Error => "error",
        };
        metrics::counter!("trustmsg_verify_checks_total", "outcome" => label).increment(1);
        match outcome {
            Outcome::Committed => flow::count(Event::Committed),
            Outcome::RolledBack => flow::count(Event::RolledBack),
            Outcome::VerifyFailed => flow::count(Event::Failed),
            _ => {}
        }
        outcome
    }

    async fn try_check_one(&self, claim: &Claim, permit: &Permit) -> anyhow::Result<Outcome> {
        let m = &claim.message;
        let attempt = m.verify_attempts.saturating_add(1);
        let producer = self.registry.get(&m.biz_id).await?;
        // A registration made under a higher --verify-timeout-max keeps its
        // value; the call is still cut off at the cap.
        let timeout = self
            .cfg
            .lease
            .call_timeout(producer.as_ref().map(|p| p.verify_timeout_ms));
        if !claim.outlasts(timeout, &self.cfg.lease) {
            // The claim was sized by the registration the store read; this
            // instance's cached one may say longer (changed since), or the
            // lookup took long. A call now could outlive the claim and overlap
            // another instance's: given back instead, no attempt counted.
            return Ok(self.give_back(std::slice::from_ref(m)).await);
        }
        let started = std::time::Instant::now();
        let ((status, answer), max_attempts) = match producer {
            None => (
                (None, Err(CheckFailure::NotRegistered(m.biz_id.clone()))),
                self.cfg.default_max_attempts,
            ),
            Some(p) => {
                let req = CheckRequest {
                    biz_id: m.biz_id.clone(),
                    message_key: m.message_key.clone(),
                    message_id: m.id,
                    attempt,
                    prepared_at: m.created_at,
                };
                let endpoint = Endpoint {
                    url: &p.verify_url,
                    secret: &p.signing_secret,
                    timeout,
                };
                let mut span = OwnSpan::child_of_stored(
                    "trustmsg check-back",
                    SpanKind::Client,
                    m.traceparent.as_deref(),
                    m.tracestate.as_deref(),
                    None,
                    || {
                        vec![
                            KeyValue::new("trustmsg.biz_id", m.biz_id.clone()),
                            KeyValue::new("trustmsg.message_id", m.id as i64),
                            KeyValue::new("trustmsg.check_attempt", i64::from(attempt)),
                            KeyValue::new("http.request.method", "POST"),
                        ]
                    },
                );
                let traceparent = span.propagate(m.traceparent.as_deref());
                let trace = Trace {
                    traceparent: traceparent.as_deref(),
                    tracestate: m.tracestate.as_deref(),
                };
                let (status, answer) = self.client.check(endpoint, &req, trace).await;
                if let Some(s) = status {
                    span.set(|| KeyValue::new("http.response.status_code", i64::from(s.as_u16())));
                }
                match &answer {
                    Ok(d) => span.set(|| {
                        KeyValue::new("trustmsg.decision", format!("{d:?}").to_lowercase())
                    }),
                    Err(e) => span.fail(e),
                }
                span.end();
                ((status, answer), p.max_verify_attempts.max(1))
            }
        };
        let took = started.elapsed();
        permit.observe(match &answer {
            Ok(_) => Load::of_answer(took, timeout),
            Err(failure) => failure.load(),
        });
        // The record and the outcome are written at the same time (each in
        // its own batch): a check waits for one round trip, not two.
        let record = self.record(m, attempt, took, status, &answer);
        let apply = self.apply(m, attempt, max_attempts, &answer);
        let ((), outcome) = tokio::join!(record, apply);
        outcome
    }

    /// What the answer (or failure) does to the row.
    async fn apply(
        &self,
        m: &Message,
        attempt: u32,
        max_attempts: u32,
        answer: &Result<Decision, CheckFailure>,
    ) -> anyhow::Result<Outcome> {
        let why = match answer {
            Ok(Decision::Commit) => return self.decide(m, true, attempt).await,
            Ok(Decision::Rollback) => return self.decide(m, false, attempt).await,
            Ok(Decision::Unknown) => "producer answered unknown".to_string(),
            Err(failure) => failure.to_string(),
        };
        let reason = format!("check-back {attempt}/{max_attempts}: {why}");
        tracing::debug!(message_id = m.id, biz_id = %m.biz_id, %reason, "check-back decided nothing");
        if attempt >= max_attempts {
            return self.give_up(m, attempt, reason).await;
        }
        let delay = self.cfg.backoff.delay(attempt);
        let again = Reschedule {
            id: m.id,
            version: m.version,
            error: reason,
            delay,
        };
        Ok(if self.writes.reschedule(again).await? {
            Outcome::Rescheduled
        } else {
            Outcome::Lost
        })
    }

    /// Records the call for operators. Every call is recorded, whether or
    /// not its outcome can still be applied (a stale claim); a failure to
    /// record is logged and does not stop the check-back.
    async fn record(
        &self,
        m: &Message,
        attempt: u32,
        took: Duration,
        status: Option<reqwest::StatusCode>,
        answer: &Result<Decision, CheckFailure>,
    ) {
        let (outcome, error, event) = match answer {
            Ok(Decision::Commit) => ("commit", None, Event::CheckCommit),
            Ok(Decision::Rollback) => ("rollback", None, Event::CheckRollback),
            Ok(Decision::Unknown) => ("unknown", None, Event::CheckUnknown),
            Err(failure) => ("failed", Some(failure.to_string()), Event::CheckFailed),
        };
        flow::count(event);
        let a = CheckAttempt {
            message_id: m.id,
            attempt,
            duration_ms: u32::try_from(took.as_millis()).unwrap_or(u32::MAX),
            http_status: status.map(|s| s.as_u16()),
            outcome,
            error,
        };
        if let Err(e) = self.writes.record(a).await {
            tracing::warn!(message_id = m.id, attempt, error = %e, "could not record the check-back call");
        }
    }

    /// Applies the producer's answer, guarded by the claim. When the guard
    /// finds a newer version (the claim ran out before the write landed, and
    /// another instance claimed or gave back the row) yet the row is still
    /// PREPARED, the answer is applied to the row as it is now: the
    /// producer's decision holds whoever asked, and dropping it would let a
    /// database slower than the margin lose every answer, claim after claim.
    /// A row decided meanwhile is left as it is.
    async fn decide(&self, m: &Message, commit: bool, attempt: u32) -> anyhow::Result<Outcome> {
        let (word, to) = if commit {
            ("commit", MessageStatus::Committed)
        } else {
            ("rollback", MessageStatus::RolledBack)
        };
        let mut t = Transition {
            id: m.id,
            from: MessageStatus::Prepared,
            version: m.version,
            to,
            send_lease: self.cfg.send_lease,
            verify_attempt: true,
            error: None,
            actor: Actor::Verifier,
            reason: format!("check-back {attempt}: producer answered {word}"),
        };
        let mut decided = self.writes.transition(t.clone(), m).await?;
        // Each miss means another writer changed the row in between; a few
        // tries are enough for one that is still undecided.
        for _ in 0..RETRIES_ON_A_NEWER_VERSION {
            if decided.is_some() {
                break;
            }
            let Some(now) = self.store.find_message_by_id(m.id).await? else {
                break;
            };
            if now.status != MessageStatus::Prepared {
                if now.status.is_final() && now.status != to {
                    tracing::warn!(
                        message_id = m.id,
                        biz_id = %m.biz_id,
                        answered = word,
                        status = now.status.as_str(),
                        "check-back answer contradicts the message's final decision; kept the decision"
                    );
                }
                break;
            }
            tracing::debug!(
                message_id = m.id,
                claimed = m.version,
                now = now.version,
                "the claim ran out before the answer was written; applying it to the row as it is"
            );
            t.version = now.version;
            decided = self.store.transition(&t).await?;
        }
        let Some(row) = decided else {
            return Ok(Outcome::Lost);
        };
        tracing::info!(message_id = m.id, biz_id = %m.biz_id, decision = word, attempt, "check-back decided");
        Ok(if commit {
            self.commits.committed(row);
            Outcome::Committed
        } else {
            Outcome::RolledBack
        })
    }

    async fn give_up(&self, m: &Message, attempt: u32, reason: String) -> anyhow::Result<Outcome> {
        let t = Transition {
            id: m.id,
            from: MessageStatus::Prepared,
            version: m.version,
            to: MessageStatus::VerifyFailed,
            send_lease: Duration::ZERO,
            verify_attempt: true,
            error: Some(reason.clone()),
            actor: Actor::Verifier,
            reason: format!(
                "no decision after {attempt} check-backs; an operator must decide ({reason})"
            ),
        };
        // The store writes the VERIFY_FAILED and its alert in one
        // transaction: only the caller whose guarded UPDATE won raises it.
        if self.store.transition(&t).await?.is_none() {
            return Ok(Outcome::Lost);
        }
        Ok(Outcome::VerifyFailed)
    }
}

/// How many times an answer is applied again to a row whose version moved on
/// while it stays PREPARED (see `decide`).
const RETRIES_ON_A_NEWER_VERSION: usize = 3;
