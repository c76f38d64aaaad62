//! What operators change, each with a required reason and audited with the
//! operator's name (`x-trustmsg-operator`, else `admin`): `resolve` (commit
//! or roll back a PREPARED or VERIFY_FAILED message), `reverify`
//! (VERIFY_FAILED → PREPARED, checked again at once) and `redeliver`
//! (SEND_FAILED → PENDING, sent again at once), on one message or in bulk on
//! every message a filter matches; and `send-now` (a committed message
//! waiting for its `deliver_at` is due at once instead), on one message.
//! Each is a guarded transition on the version the operator's request
//! found: if anyone (the producer,
//! check-back, another operator) changed the message first, the action
//! changes nothing and answers 409 saying what the message is now (in bulk:
//! that message is left alone and not counted as changed).
//!
//! The bulk actions are set-based (`store::sql::requeue`): after a big
//! outage they cover 100,000 messages in a few seconds, in chunks of
//! [`BULK_CHUNK`] rows that are each written whole in one transaction.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::extract::{FromRequest, Path, Request, State};
use axum::http::HeaderMap;
use trustmsg_verify_api::admin::{
    ActionRequest, BulkRequest, BulkResult, OperatorDecision, OperatorHeader, ResolveRequest,
};
use trustmsg_verify_api::{ErrorBody, MessageStatus, MessageView, SendStatus};

use super::{bad, filter_of, message};
use crate::api::error::ApiError;
use crate::api::{AppState, Json};
use crate::store::{
    self, Actor, DecideOutcome, DecideRequest, Message, MessageFilter, Requeue, Target, Transition,
};

/// The longest operator name and reason kept.
const MAX_OPERATOR: usize = 64;
const MAX_REASON: usize = 1000;

/// Who acts: the `x-trustmsg-operator` header, else `admin`.
pub(crate) fn operator(headers: &HeaderMap) -> Result<Actor, ApiError> {
    let Some(v) = headers.get("x-trustmsg-operator") else {
        return Ok(Actor::Operator("admin".into()));
    };
    let name = v
        .to_str()
        .ok()
        .map(str::trim)
        .filter(|n| !n.is_empty() && n.len() <= MAX_OPERATOR && !n.chars().any(char::is_control))
        .ok_or_else(|| {
            ApiError::invalid(
                "invalid_operator",
                format!(
                    "x-trustmsg-operator must be a name of 1 to {MAX_OPERATOR} printable characters"
                ),
            )
        })?;
    Ok(Actor::Operator(name.to_string()))
}

/// An operator's request to act on one message or row, checked: who acts
/// ([`operator`]) and why (the body's required reason, [`reason_of`]).
pub(crate) struct Acting {
    pub(crate) actor: Actor,
    pub(crate) reason: String,
}

impl<S: Send + Sync> FromRequest<S> for Acting {
    type Rejection = ApiError;

    /// The body first, as a `Json` extractor would: a body that is not an
    /// [`ActionRequest`] is refused before the operator's name is read.
    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let headers = req.headers().clone();
        let Json(body) = Json::<ActionRequest>::from_request(req, state).await?;
        Ok(Self {
            actor: operator(&headers)?,
            reason: reason_of(body.reason)?,
        })
    }
}

pub(super) fn reason_of(reason: Option<String>) -> Result<String, ApiError> {
    let reason = reason.map(|r| r.trim().to_string()).unwrap_or_default();
    if reason.is_empty() || reason.len() > MAX_REASON {
        return Err(ApiError::invalid(
            "invalid_reason",
            format!(
                "a reason is required (1 to {MAX_REASON} characters): it goes into the \
                 audit trail of what you change"
            ),
        ));
    }
    Ok(reason)
}

/// The 409 of an action that found the message changed or in another state.
fn not_now(m: &Message, action: &str, allowed: &str) -> ApiError {
    let send = m
        .send_status
        .map(|s| format!(" / {}", s.as_str()))
        .unwrap_or_default();
    ApiError::conflict(
        "wrong_state",
        format!(
            "message {} is {}{send}: {action} applies to {allowed} messages only; nothing changed",
            m.id,
            m.status.as_str()
        ),
    )
}

/// The latest state of a message an action lost a race on, for its 409.
async fn lost_race(state: &AppState, id: u64, action: &str, allowed: &str) -> ApiError {
    match state.store.find_message_by_id(id).await {
        Ok(Some(now)) => not_now(&now, action, allowed),
        Ok(None) => ApiError::not_found("message_not_found", format!("no message {id}")),
        Err(e) => e.into(),
    }
}

/// Commits or rolls back a PREPARED or VERIFY_FAILED message.
#[utoipa::path(post, path = "/v1/admin/messages/{id}/resolve", tag = "admin",
    params(("id" = u64, Path, description = "trustmsg's message id", minimum = 0, maximum = 9223372036854775807_f64), OperatorHeader),
    request_body = ResolveRequest,
    responses(
        (status = 200, description = "Decided; a commit is being sent", body = MessageView),
        (status = 400, description = "No reason, or a bad decision or operator name", body = ErrorBody),
        (status = 404, description = "No such message", body = ErrorBody),
        (status = 409, description = "The message is decided already (by someone else first)", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn resolve(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(req): Json<ResolveRequest>,
) -> Result<axum::Json<MessageView>, ApiError> {
    let actor = operator(&headers)?;
    let reason = reason_of(req.reason)?;
    let m = message(&state, &id).await?;
    const ALLOWED: &str = "PREPARED and VERIFY_FAILED";
    if m.status.is_final() {
        return Err(not_now(&m, "resolve", ALLOWED));
    }
    let commit = matches!(req.decision, OperatorDecision::Commit);
    let request = DecideRequest {
        target: Target::Id(m.id),
        commit,
        actor: actor.clone(),
        reason,
        send_lease: state.send_lease,
        verify_attempt: false,
    };
    // The decision and its hand-off to the forwarder run on their own task:
    // a request cut off after the commit is written still hands it over,
    // instead of leaving the row claimed for a send that never starts.
    let (store, commits) = (state.store.clone(), state.commits.clone());
    let decided = tokio::spawn(async move {
        let outcome = store::decide(store.as_ref(), request).await;
        if let Ok(DecideOutcome::Decided(done)) = &outcome {
            crate::workers::flow::count_decided(done.status);
            if commit {
                commits.committed(done.clone());
            }
        }
        outcome
    });
    let outcome = match decided.await {
        Ok(outcome) => outcome?,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    };
    match outcome {
        DecideOutcome::Decided(done) => {
            tracing::info!(message_id = done.id, %actor, commit, "resolved by an operator");
            Ok(axum::Json(done.view()))
        }
        DecideOutcome::AlreadyDecided(now) | DecideOutcome::Conflict(now) => {
            Err(not_now(&now, "resolve", ALLOWED))
        }
        DecideOutcome::NotFound => Err(ApiError::not_found(
            "message_not_found",
            format!("no message {}", m.id),
        )),
    }
}

/// VERIFY_FAILED → PREPARED: attempts back to 0, checked again at once.
#[utoipa::path(post, path = "/v1/admin/messages/{id}/reverify", tag = "admin",
    params(("id" = u64, Path, description = "trustmsg's message id", minimum = 0, maximum = 9223372036854775807_f64), OperatorHeader),
    request_body = ActionRequest,
    responses(
        (status = 200, description = "PREPARED again, due for check-back now", body = MessageView),
        (status = 400, description = "No reason, or a bad operator name", body = ErrorBody),
        (status = 404, description = "No such message", body = ErrorBody),
        (status = 409, description = "The message is not VERIFY_FAILED (any more)", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn reverify(
    State(state): State<AppState>,
    Path(id): Path<String>,
    acting: Acting,
) -> Result<axum::Json<MessageView>, ApiError> {
    act_on_one(&state, &id, acting, Repair::Reverify).await
}

/// SEND_FAILED → PENDING: send attempts back to 0, sent again at once.
#[utoipa::path(post, path = "/v1/admin/messages/{id}/redeliver", tag = "admin",
    params(("id" = u64, Path, description = "trustmsg's message id", minimum = 0, maximum = 9223372036854775807_f64), OperatorHeader),
    request_body = ActionRequest,
    responses(
        (status = 200, description = "PENDING again, due for sending now", body = MessageView),
        (status = 400, description = "No reason, or a bad operator name", body = ErrorBody),
        (status = 404, description = "No such message", body = ErrorBody),
        (status = 409, description = "The message's send is not SEND_FAILED (any more)", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn redeliver(
    State(state): State<AppState>,
    Path(id): Path<String>,
    acting: Acting,
) -> Result<axum::Json<MessageView>, ApiError> {
    act_on_one(&state, &id, acting, Repair::Redeliver).await
}

/// Gives up on the SEND_FAILED head of an ordered key: the message stays
/// SEND_FAILED (audited `skip`) and leaves its key's order, and the next
/// message of its key is sent at once (the rest follow in order).
#[utoipa::path(post, path = "/v1/admin/messages/{id}/skip", tag = "admin",
    params(("id" = u64, Path, description = "trustmsg's message id", minimum = 0, maximum = 9223372036854775807_f64), OperatorHeader),
    request_body = ActionRequest,
    responses(
        (status = 200, description = "Skipped: still SEND_FAILED, no longer holding its key back", body = MessageView),
        (status = 400, description = "No reason, or a bad operator name", body = ErrorBody),
        (status = 404, description = "No such message", body = ErrorBody),
        (status = 409, description = "Not the SEND_FAILED head of an ordered key (any more)", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn skip(
    State(state): State<AppState>,
    Path(id): Path<String>,
    acting: Acting,
) -> Result<axum::Json<MessageView>, ApiError> {
    const ALLOWED: &str = "SEND_FAILED messages of an ordered producer (the head of their key)";
    let Acting { actor, reason } = acting;
    let m = message(&state, &id).await?;
    if m.send_status != Some(SendStatus::SendFailed) || m.order_pos().is_none() {
        return Err(not_now(&m, "skip", ALLOWED));
    }
    match state.store.skip_blocked(&m, &actor, &reason).await? {
        Some(done) => {
            tracing::info!(message_id = done.id, %actor, "ordered head skipped by an operator");
            Ok(axum::Json(done.view()))
        }
        None => Err(lost_race(&state, m.id, "skip", ALLOWED).await),
    }
}

/// A message waiting for its `deliver_at` is due now: sent at once (by a
/// sweeper, within `--sweep-interval`) instead of at its time.
#[utoipa::path(post, path = "/v1/admin/messages/{id}/send-now", tag = "admin",
    params(("id" = u64, Path, description = "trustmsg's message id", minimum = 0, maximum = 9223372036854775807_f64), OperatorHeader),
    request_body = ActionRequest,
    responses(
        (status = 200, description = "Due for sending now (its deliver_at is now)", body = MessageView),
        (status = 400, description = "No reason, or a bad operator name", body = ErrorBody),
        (status = 404, description = "No such message", body = ErrorBody),
        (status = 409, description = "Not a committed message waiting for its deliver_at (any more)", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn send_now(
    State(state): State<AppState>,
    Path(id): Path<String>,
    acting: Acting,
) -> Result<axum::Json<MessageView>, ApiError> {
    const ALLOWED: &str = "COMMITTED / PENDING messages waiting for their deliver_at";
    let Acting { actor, reason } = acting;
    let m = message(&state, &id).await?;
    // Whether its time is still ahead is the store's guard (database clock).
    if m.send_status != Some(SendStatus::Pending) || m.deliver_at.is_none() {
        return Err(not_now(&m, "send-now", ALLOWED));
    }
    match state
        .store
        .send_now(m.id, m.version, &actor, &reason)
        .await?
    {
        Some(done) => {
            tracing::info!(message_id = done.id, %actor, "sent now by an operator");
            Ok(axum::Json(done.view()))
        }
        None => Err(lost_race(&state, m.id, "send-now", ALLOWED).await),
    }
}

/// What re-verify and redeliver have in common: a failed message put back
/// in the queue it failed out of, under the guard of the version read.
#[derive(Debug, Clone, Copy)]
enum Repair {
    /// VERIFY_FAILED → PREPARED.
    Reverify,
    /// SEND_FAILED → PENDING.
    Redeliver,
}

impl Repair {
    fn name(self) -> &'static str {
        match self {
            Self::Reverify => "reverify",
            Self::Redeliver => "redeliver",
        }
    }

    /// The state it applies to, for messages.
    fn allowed(self) -> &'static str {
        match self {
            Self::Reverify => "VERIFY_FAILED",
            Self::Redeliver => "SEND_FAILED",
        }
    }

    /// The store's bulk form of this repair.
    fn requeue(self) -> Requeue {
        match self {
            Self::Reverify => Requeue::Reverify,
            Self::Redeliver => Requeue::Redeliver,
        }
    }

    fn applies_to(self, m: &Message) -> bool {
        match self {
            Self::Reverify => m.status == MessageStatus::VerifyFailed,
            Self::Redeliver => m.send_status == Some(SendStatus::SendFailed),
        }
    }

    /// Narrows `filter` to the state it applies to; false when the filter
    /// already excludes that state.
    fn narrow(self, filter: &mut MessageFilter) -> bool {
        match self {
            Self::Reverify => {
                let ok = filter
                    .status
                    .is_none_or(|s| s == MessageStatus::VerifyFailed);
                filter.status = Some(MessageStatus::VerifyFailed);
                ok
            }
            Self::Redeliver => {
                let ok = filter
                    .send_status
                    .is_none_or(|s| s == SendStatus::SendFailed)
                    && filter.status.is_none_or(|s| s == MessageStatus::Committed);
                filter.send_status = Some(SendStatus::SendFailed);
                ok
            }
        }
    }

    /// The guarded change; None when `m` changed meanwhile.
    async fn apply(
        self,
        state: &AppState,
        m: &Message,
        actor: &Actor,
        reason: &str,
    ) -> Result<Option<Message>, ApiError> {
        Ok(match self {
            Self::Reverify => {
                let t = Transition {
                    id: m.id,
                    from: MessageStatus::VerifyFailed,
                    version: m.version,
                    to: MessageStatus::Prepared,
                    send_lease: state.send_lease,
                    verify_attempt: false,
                    error: None,
                    actor: actor.clone(),
                    reason: reason.to_string(),
                };
                state.store.transition(&t).await?
            }
            Self::Redeliver => {
                state
                    .store
                    .redeliver(m.id, m.version, actor, reason)
                    .await?
            }
        })
    }
}

async fn act_on_one(
    state: &AppState,
    id: &str,
    Acting { actor, reason }: Acting,
    repair: Repair,
) -> Result<axum::Json<MessageView>, ApiError> {
    let m = message(state, id).await?;
    if !repair.applies_to(&m) {
        return Err(not_now(&m, repair.name(), repair.allowed()));
    }
    match repair.apply(state, &m, &actor, &reason).await? {
        Some(done) => Ok(axum::Json(done.view())),
        None => Err(lost_race(state, m.id, repair.name(), repair.allowed()).await),
    }
}

/// Rows one transaction of a bulk action changes: big enough that 100,000
/// take a few seconds, small enough that one chunk stays well inside the
/// request deadline.
const BULK_CHUNK: u32 = 5000;

/// A bulk action, set-based: chunk after chunk in id order until none is
/// left (see `store::sql::requeue`). The route is not under the request
/// deadline as a whole; each chunk is, so a database that stops answering
/// still ends the request with 503 `request_timeout`, having written whole
/// chunks only, and a repeat changes only what is left.
async fn act_in_bulk(
    state: &AppState,
    headers: &HeaderMap,
    req: BulkRequest,
    repair: Repair,
) -> Result<axum::Json<BulkResult>, ApiError> {
    let actor = operator(headers)?;
    let reason = reason_of(req.reason.clone())?;
    let mut filter = bulk_filter(&req)?;
    if !repair.narrow(&mut filter) {
        return Ok(axum::Json(BulkResult {
            matched: 0,
            changed: 0,
        }));
    }
    let (store, limit) = (&state.store, state.request_timeout);
    if req.dry_run {
        let matched = within(limit, store.count_requeueable(repair.requeue(), &filter)).await?;
        return Ok(axum::Json(BulkResult {
            matched,
            changed: 0,
        }));
    }
    let (mut changed, mut after_id) = (0, 0);
    loop {
        let chunk = store.requeue_chunk(
            repair.requeue(),
            &filter,
            after_id,
            BULK_CHUNK,
            &actor,
            &reason,
        );
        let chunk = within(limit, chunk).await?;
        changed += chunk.changed;
        match chunk.last_id {
            Some(last) if chunk.changed == u64::from(BULK_CHUNK) => after_id = last,
            _ => break,
        }
    }
    tracing::info!(%actor, action = repair.name(), changed, "bulk action by an operator");
    Ok(axum::Json(BulkResult {
        matched: changed,
        changed,
    }))
}

/// `call`, or 503 `request_timeout` once `limit` has passed.
async fn within<T>(
    limit: Duration,
    call: impl std::future::Future<Output = store::StoreResult<T>>,
) -> Result<T, ApiError> {
    match tokio::time::timeout(limit, call).await {
        Ok(done) => Ok(done?),
        Err(_) => Err(ApiError::Timeout(limit)),
    }
}

/// The filter of a bulk request, checked like the list's.
fn bulk_filter(req: &BulkRequest) -> Result<MessageFilter, ApiError> {
    let mut params = BTreeMap::new();
    for (k, v) in &req.filter {
        if k == "limit" || k == "cursor" {
            return Err(bad(format!(
                "{k} is for the list; a bulk action takes every match"
            )));
        }
        let v = v
            .as_str()
            .ok_or_else(|| bad(format!("filter.{k} must be a string")))?;
        params.insert(k.clone(), v.to_string());
    }
    filter_of(&params)
}

/// Re-verifies every VERIFY_FAILED message the filter matches.
/// Set-based, chunk by chunk: not bounded by the request deadline as a
/// whole, only each chunk is.
#[utoipa::path(post, path = "/v1/admin/messages/reverify", tag = "admin",
    params(OperatorHeader),
    request_body = BulkRequest,
    responses(
        (status = 200, description = "How many matched and how many this call changed", body = BulkResult),
        (status = 400, description = "No reason, or a bad filter or operator name", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn bulk_reverify(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(req): Json<BulkRequest>,
) -> Result<axum::Json<BulkResult>, ApiError> {
    act_in_bulk(&state, &headers, req, Repair::Reverify).await
}

/// Redelivers every SEND_FAILED message the filter matches.
/// Set-based, chunk by chunk: not bounded by the request deadline as a
/// whole, only each chunk is.
#[utoipa::path(post, path = "/v1/admin/messages/redeliver", tag = "admin",
    params(OperatorHeader),
    request_body = BulkRequest,
    responses(
        (status = 200, description = "How many matched and how many this call changed", body = BulkResult),
        (status = 400, description = "No reason, or a bad filter or operator name", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn bulk_redeliver(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(req): Json<BulkRequest>,
) -> Result<axum::Json<BulkResult>, ApiError> {
    act_in_bulk(&state, &headers, req, Repair::Redeliver).await
}
