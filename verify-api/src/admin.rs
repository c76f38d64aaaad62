//! Wire types of the operator API (`/v1/admin/…`, admin token): what the
//! service answers and what an operator sends. The service serializes and
//! deserializes these; `trustmsg admin` and `trustmsg dev` read them, so a
//! renamed field breaks the build instead of printing a silent `-`.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{AnyOfBuilder, ObjectBuilder, Type};
use utoipa::openapi::{KnownFormat, Object, Schema, SchemaFormat};
use utoipa::{IntoParams, ToSchema};

use crate::{MessageView, PayloadEncoding};

/// One page of messages (`GET /v1/admin/messages`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MessagePage {
    /// Newest first.
    pub items: Vec<MessageView>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// One change in a message's life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuditView {
    /// When (database clock).
    pub at: DateTime<Utc>,
    /// `producer:<biz_id>`, `kafka` (a decision the producer submitted through
    /// Kafka), `verifier`, `forwarder`, `admin` or an operator's name.
    pub actor: String,
    /// `commit`, `rollback`, `verify_failed`, `send_failed`, `reverify`, `quarantine`, …
    pub action: String,
    /// The status before, if it changed.
    pub from_status: Option<String>,
    /// The status after, if it changed.
    pub to_status: Option<String>,
    /// The send status before, if it changed.
    pub from_send_status: Option<String>,
    /// The send status after, if it changed.
    pub to_send_status: Option<String>,
    /// Why, as the actor said.
    pub reason: String,
}

/// One check-back call, as the verifier recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CheckAttemptView {
    /// 1 for the first call of the message.
    pub attempt: u32,
    /// When the call was made.
    pub at: DateTime<Utc>,
    /// How long it took, in milliseconds.
    pub duration_ms: u32,
    /// The answer's HTTP status; null when no answer came (refused, timed out, denied address).
    pub http_status: Option<u16>,
    /// `commit`, `rollback`, `unknown` or `failed`.
    pub outcome: String,
    /// A short reason when the call decided nothing.
    pub error: Option<String>,
}

/// One message in full (`GET /v1/admin/messages/{id}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MessageDetail {
    /// The message.
    pub message: MessageView,
    /// The record value: text, or base64 when it is not UTF-8.
    pub payload: String,
    /// How `payload` is written: `utf8` (as is) or `base64` (standard, of bytes that are not UTF-8).
    pub payload_encoding: PayloadEncoding,
    /// The user's record headers.
    pub headers: BTreeMap<String, String>,
    /// Oldest first.
    pub audit: Vec<AuditView>,
    /// Every check-back call (the newest 50), oldest first.
    pub check_attempts: Vec<CheckAttemptView>,
    /// For a committed message of an ordered producer that waits for an
    /// earlier message of its key: the id of that key's head, the earliest
    /// message not yet SENT (or skipped), which holds this one back. Absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_by: Option<u64>,
    /// Every consumer group's consumption of the message through the
    /// consumption ledger (`POST /v1/consumptions/begin`), by group name;
    /// empty when no registered group has begun it.
    #[serde(default)]
    pub consumptions: Vec<crate::consumers::ConsumptionView>,
}

/// One producer's messages at a glance: exact counts of the live messages
/// (those an operator may still have to act on) and how many finished within
/// the summary's `recent_window_secs`. Finished messages older than that are
/// not counted: counting them would read the whole table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProducerSummaryView {
    /// The producer's id.
    pub biz_id: String,
    /// Live messages by status, exact: `PREPARED`, `VERIFY_FAILED`, and
    /// `COMMITTED` not yet in Kafka (send `PENDING` or `SEND_FAILED`); states
    /// with none are absent. Finished messages (`ROLLED_BACK`, or `COMMITTED`
    /// and `SENT`) are not here: see `sent_recently`, `rolled_back_recently`.
    pub by_status: BTreeMap<String, u64>,
    /// Committed messages not yet in Kafka by send status, exact: `PENDING`,
    /// `SEND_FAILED`. A message waiting for its `deliver_at` is not counted
    /// here (nor in `by_status`) but in `scheduled`.
    pub by_send_status: BTreeMap<String, u64>,
    /// Committed messages whose send waits for their `deliver_at`, still in
    /// the future: scheduled, not backlog.
    #[serde(default)]
    pub scheduled: u64,
    /// Messages SENT within the last `recent_window_secs` (by their last change).
    pub sent_recently: u64,
    /// Messages ROLLED_BACK within the last `recent_window_secs`.
    pub rolled_back_recently: u64,
    /// When the oldest message still PREPARED was prepared.
    pub oldest_prepared_at: Option<DateTime<Utc>>,
    /// Its age by the database clock, in milliseconds.
    pub oldest_prepared_age_ms: Option<u64>,
    /// Since when the oldest message whose send is still PENDING (and due)
    /// has waited: its commit, or its `deliver_at` if that came later.
    pub oldest_pending_send_at: Option<DateTime<Utc>>,
    /// Its age by the database clock, in milliseconds.
    pub oldest_pending_send_age_ms: Option<u64>,
}

/// Every producer with live messages or messages finished within the
/// window (`GET /v1/admin/summary`). Computed at most once every few seconds
/// per instance, whoever asks: `at` says when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Summary {
    /// By biz_id.
    pub producers: Vec<ProducerSummaryView>,
    /// The database clock the counts and ages were taken at.
    pub at: DateTime<Utc>,
    /// The registered producers that have no topic allow-list (they may
    /// publish to any topic), by biz_id: each needs one.
    #[serde(default)]
    pub producers_without_topics: Vec<String>,
    /// The window of `sent_recently` and `rolled_back_recently`, in seconds
    /// before `at`.
    pub recent_window_secs: u64,
    /// Commits submitted through Kafka that wait for their prepare
    /// (`GET /v1/admin/submit/waiting` lists them).
    #[serde(default)]
    pub submit_waiting: u64,
}

/// The decision an operator makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OperatorDecision {
    /// Deliver the message.
    Commit,
    /// Drop the message.
    Rollback,
}

/// `POST /v1/admin/messages/{id}/resolve`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolveRequest {
    /// Commit or roll back.
    pub decision: OperatorDecision,
    /// Why; required (1 to 1000 bytes, not only white space), kept in the audit trail.
    #[schema(
        value_type = String,
        required = true,
        min_length = 1,
        max_length = 1000,
        pattern = "[^\\t-\\r \\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]"
    )]
    pub reason: Option<String>,
}

/// `POST /v1/admin/messages/{id}/reverify`, `…/redeliver`, `…/skip` and
/// `…/send-now`; `POST /v1/admin/outbox-sources/{biz_id}/rows/{id}/retry`
/// and `…/give-up`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionRequest {
    /// Why; required (1 to 1000 bytes, not only white space), kept in the audit trail.
    #[schema(
        value_type = String,
        required = true,
        min_length = 1,
        max_length = 1000,
        pattern = "[^\\t-\\r \\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]"
    )]
    pub reason: Option<String>,
}

/// `POST /v1/admin/messages/reverify` and `…/redeliver`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkRequest {
    /// The list's filters (`status`, `send_status`, `biz_id`, `topic`,
    /// `created_after`, `created_before`), as strings. A value of another
    /// type is refused with `invalid_filter`, as an unknown name is (and
    /// `limit` and `cursor`: a bulk action takes every match).
    #[serde(default)]
    #[schema(schema_with = bulk_filter)]
    pub filter: BTreeMap<String, serde_json::Value>,
    /// Why; required (1 to 1000 bytes, not only white space), kept in each
    /// message's audit trail.
    #[schema(
        value_type = String,
        required = true,
        min_length = 1,
        max_length = 1000,
        pattern = "[^\\t-\\r \\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]"
    )]
    pub reason: Option<String>,
    /// Count only; change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// What a bulk action did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BulkResult {
    /// Messages the filter matched that the action applies to: on a dry
    /// run, counted at once; otherwise the ones found in the repaired state
    /// as the action went through them in id order, chunk by chunk (a
    /// message changed by someone else first is not counted).
    pub matched: u64,
    /// Of those, the ones this call changed, each with its audit row (0 on
    /// a dry run). A repeat changes only what is still in the repaired
    /// state.
    pub changed: u64,
}

/// The header that names who acts, on every operator action.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Header)]
pub struct OperatorHeader {
    /// Who acts, for the audit trail (default admin): 1 to 64 printable ASCII characters
    #[param(
        rename = "x-trustmsg-operator",
        min_length = 1,
        max_length = 64,
        pattern = "^[!-~]([ -~]{0,62}[!-~])?$"
    )]
    #[serde(rename = "x-trustmsg-operator")]
    pub operator: Option<String>,
}

/// The query of `GET /v1/admin/messages`: every filter given combines with
/// AND; an empty value is no filter. Any other parameter is refused (400).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// PREPARED, COMMITTED, ROLLED_BACK or VERIFY_FAILED.
    #[param(schema_with = status_filter)]
    pub status: Option<String>,
    /// PENDING, SENT or SEND_FAILED.
    #[param(schema_with = send_status_filter)]
    pub send_status: Option<String>,
    /// One producer's messages.
    pub biz_id: Option<String>,
    /// One topic's messages.
    pub topic: Option<String>,
    /// RFC 3339; created at or after.
    #[param(schema_with = time_filter)]
    pub created_after: Option<String>,
    /// RFC 3339; created before.
    #[param(schema_with = time_filter)]
    pub created_before: Option<String>,
    /// Rows per page, 1 to 500 (default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    /// The previous page's `next_cursor`, unchanged (400 for any other).
    /// Treat it as opaque: the pattern only says which strings can be one
    /// (empty: the first page).
    #[param(schema_with = cursor_param)]
    pub cursor: Option<String>,
}

/// Which strings can be a list's `next_cursor` (`v1:<id>` in unpadded
/// URL-safe base64), or empty for the first page: a cursor is opaque, the
/// pattern only lets a client (or a test generator) tell one apart.
const CURSOR_PATTERN: &str = "^(?:djE6(?:(?:(?:M[DTjz]|N[DTjz]|O[DT])[AEIMQUYcgk][w-z0-5]){0,6}(?:M[AQgw]|N[AQgw]|O[AQ])|(?:(?:M[DTjz]|N[DTjz]|O[DT])[AEIMQUYcgk][w-z0-5]){0,5}(?:(?:M[DTjz]|N[DTjz]|O[DT])[AEIMQUYcgk][w-z0-5]|(?:M[DTjz]|N[DTjz]|O[DT])[AEIMQUYcgk])))?$";

/// A list's `cursor` parameter (a parameter's schema_with drops its doc
/// comment, so the schema says it).
fn cursor_param() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(CURSOR_PATTERN))
        .description(Some(
            "The previous page's `next_cursor`, unchanged (400 for any other). Treat it as \
             opaque: the pattern only says which strings can be one (empty: the first page).",
        ))
        .build()
}

/// A string that is one of `words`, or empty (no filter).
fn one_of_or_empty(words: &[&str]) -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(std::iter::once("").chain(words.iter().copied())))
        .build()
}

fn status_filter() -> Object {
    one_of_or_empty(&["PREPARED", "COMMITTED", "ROLLED_BACK", "VERIFY_FAILED"])
}

fn send_status_filter() -> Object {
    one_of_or_empty(&["PENDING", "SENT", "SEND_FAILED"])
}

/// An RFC 3339 time, or empty (no filter).
fn time_filter() -> Schema {
    Schema::AnyOf(
        AnyOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime))),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .max_length(Some(0)),
            )
            .build(),
    )
}

/// The filters of a bulk action: the list's, without `limit` and `cursor`.
fn bulk_filter() -> Object {
    let string = || ObjectBuilder::new().schema_type(Type::String).build();
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("status", status_filter())
        .property("send_status", send_status_filter())
        .property("biz_id", string())
        .property("topic", string())
        .property("created_after", time_filter())
        .property("created_before", time_filter())
        .additional_properties(Some(
            utoipa::openapi::schema::AdditionalProperties::FreeForm(false),
        ))
        .build()
}

/// What went wrong with a message, as an alert names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    /// Check-back gave no decision within the attempt limit: VERIFY_FAILED.
    VerifyFailed,
    /// Kafka refused the message for good, or the attempt limit was reached: SEND_FAILED.
    SendFailed,
    /// A claim found the row due but could not read it and set it aside: it is
    /// neither sent nor checked until a person repairs it.
    Quarantined,
    /// A committed message is still not in Kafka long after its commit.
    SendOverdue,
    /// A message is still PREPARED long after its prepare.
    VerifyOverdue,
    /// The head of an ordered key went SEND_FAILED while later messages of
    /// its key wait behind it (or one started to wait behind it): they are
    /// held until an operator redelivers or skips the head.
    KeyBlocked,
    /// A consumer group's processing of a message failed `max_failures`
    /// times (the alert names the group): raised once per message and group.
    ConsumptionFailing,
    /// A consumer group's delivery began processing a message and neither
    /// finished nor was taken over within the group's
    /// `in_progress_timeout_ms`: raised once per begin.
    ConsumptionStuck,
    /// A row of a producer's own outbox table (the local message table
    /// way) was marked failed: refused for good (its content conflicts with
    /// the message already under its key, or its topic, size or fields are
    /// invalid). Raised once per row and attempt; an operator retries or
    /// gives it up.
    OutboxFailed,
}

impl AlertKind {
    /// Every kind, in declaration order.
    pub const ALL: [Self; 9] = [
        Self::VerifyFailed,
        Self::SendFailed,
        Self::Quarantined,
        Self::SendOverdue,
        Self::VerifyOverdue,
        Self::KeyBlocked,
        Self::ConsumptionFailing,
        Self::ConsumptionStuck,
        Self::OutboxFailed,
    ];

    /// The wire and database spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::VerifyFailed => "verify_failed",
            Self::SendFailed => "send_failed",
            Self::Quarantined => "quarantined",
            Self::SendOverdue => "send_overdue",
            Self::VerifyOverdue => "verify_overdue",
            Self::KeyBlocked => "key_blocked",
            Self::ConsumptionFailing => "consumption_failing",
            Self::ConsumptionStuck => "consumption_stuck",
            Self::OutboxFailed => "outbox_failed",
        }
    }

    /// Parses the wire/database spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// Where an alert is on its way to the webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AlertState {
    /// Not delivered yet: due for a POST at `next_attempt_at`.
    Pending,
    /// The webhook answered 2xx.
    Delivered,
    /// Taken by an instance without `--alert-webhook`: its ERROR log line and
    /// counter were its only outlets.
    NoWebhook,
}

impl AlertState {
    /// Every state, in declaration order.
    pub const ALL: [Self; 3] = [Self::Pending, Self::Delivered, Self::NoWebhook];

    /// The wire and database spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::NoWebhook => "no_webhook",
        }
    }

    /// Parses the wire/database spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One alert from the outbox (`GET /v1/admin/alerts`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AlertView {
    /// The alert's stable id: the same in every delivery of it (the webhook
    /// body's `alert_id` and the `trustmsg-alert-id` header).
    pub alert_id: u64,
    /// What went wrong.
    pub kind: AlertKind,
    /// trustmsg's message id.
    pub message_id: u64,
    /// The producer.
    pub biz_id: String,
    /// The producer's message key.
    pub message_key: String,
    /// Check-back attempts (verify_failed, verify_overdue) or send attempts
    /// (send_failed, send_overdue); 0 for a quarantined row; the group's
    /// attempts for a consumption alert.
    pub attempts: u32,
    /// The message's last error when the alert was raised (a consumption
    /// alert: the group's last error, or what kept it in progress).
    pub last_error: String,
    /// When the alert was raised (database clock), with its state change.
    pub created_at: DateTime<Utc>,
    /// Where it is on its way to the webhook.
    pub state: AlertState,
    /// When the next POST is due (pending only).
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// POSTs made so far, failed ones included.
    pub delivery_attempts: u32,
    /// Why the last POST failed, if it did.
    pub last_delivery_error: Option<String>,
    /// When the webhook took it (delivered only).
    pub delivered_at: Option<DateTime<Utc>>,
    /// The message's W3C trace id (see the message view's `trace_id`); null
    /// when its prepare carried no `traceparent`.
    #[serde(default)]
    #[schema(pattern = "^[0-9a-f]{32}$")]
    pub trace_id: Option<String>,
    /// The consumer group a `consumption_failing` or `consumption_stuck`
    /// alert is about; null for the alerts about a message's own life.
    #[serde(default)]
    pub group: Option<String>,
}

/// One page of alerts (`GET /v1/admin/alerts`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AlertPage {
    /// Newest first.
    pub items: Vec<AlertView>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// A commit submitted through Kafka before its prepare was seen
/// (`GET /v1/admin/submit/waiting`): it waits for its prepare until
/// `give_up_at`, then goes to the dead-letter topic (`message_not_found`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WaitingCommitView {
    /// The waiting row's id (not a message id).
    pub id: u64,
    /// The producer.
    pub biz_id: String,
    /// The message it commits.
    pub message_key: String,
    /// Where the commit record was read: its partition of the submit topic.
    pub partition: i32,
    /// And its offset.
    pub offset: i64,
    /// Tries so far to apply it (each found no prepare).
    pub attempts: u32,
    /// When it was read.
    pub received_at: DateTime<Utc>,
    /// When it is dead-lettered if its prepare is still missing.
    pub give_up_at: DateTime<Utc>,
}

/// One page of waiting commits, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WaitingCommitPage {
    /// Oldest first.
    pub items: Vec<WaitingCommitView>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// The query of `GET /v1/admin/submit/waiting`. Any other parameter is refused (400).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WaitingListQuery {
    /// Rows per page, 1 to 500 (default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    /// The previous page's `next_cursor`, unchanged (400 for any other).
    #[param(schema_with = cursor_param)]
    pub cursor: Option<String>,
}

/// The query of `GET /v1/admin/alerts`. Any other parameter is refused (400).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AlertListQuery {
    /// pending (undelivered), delivered or no_webhook; empty: every alert.
    #[param(schema_with = alert_state_filter)]
    pub state: Option<String>,
    /// One message's alerts.
    #[param(minimum = 0, maximum = 9223372036854775807_f64)]
    pub message_id: Option<u64>,
    /// Rows per page, 1 to 500 (default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    /// The previous page's `next_cursor`, unchanged (400 for any other).
    /// Treat it as opaque, as the messages list's.
    #[param(schema_with = cursor_param)]
    pub cursor: Option<String>,
}

fn alert_state_filter() -> Object {
    one_of_or_empty(&["pending", "delivered", "no_webhook"])
}

/// The flow of the last minutes (`GET /v1/admin/flow`), summed over every
/// instance, one entry per minute, oldest first, the current minute last
/// (still filling up). Counts are added by each instance every few seconds
/// (`--flow-interval`), so the newest minute lags by as much.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FlowPage {
    /// Oldest first; a minute in which nothing happened has zeros.
    pub minutes: Vec<FlowMinuteView>,
}

/// One minute of the flow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FlowMinuteView {
    /// The minute's start (UTC, seconds zero).
    pub at: DateTime<Utc>,
    /// Messages prepared (a repeated prepare is not counted).
    pub prepared: u64,
    /// Messages committed, by the producer, check-back or an operator.
    pub committed: u64,
    /// Messages rolled back (a rollback of an unknown message included).
    pub rolled_back: u64,
    /// Records Kafka acknowledged.
    pub sent: u64,
    /// Messages that went VERIFY_FAILED or SEND_FAILED.
    pub failed: u64,
    /// Check-back calls answered `commit`.
    pub checks_commit: u64,
    /// Check-back calls answered `rollback`.
    pub checks_rollback: u64,
    /// Check-back calls answered `unknown`.
    pub checks_unknown: u64,
    /// Check-back calls that got no usable answer (timeout, refused, non-2xx, bad body…).
    pub checks_failed: u64,
    /// Messages PREPARED, as last sampled in the minute (the backlog
    /// gauges, every `--backlog-interval`); null when not sampled.
    pub backlog_prepared: Option<u64>,
    /// Committed messages whose send is PENDING, as last sampled; null when not sampled.
    pub backlog_pending: Option<u64>,
}

/// The query of `GET /v1/admin/flow`. Any other parameter is refused (400).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FlowQuery {
    /// How many minutes, the current one included: 1 to 1440 (default 60).
    #[param(minimum = 1, maximum = 1440)]
    pub minutes: Option<u32>,
}

/// What an outbox source's relay is doing, as the instance answering sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutboxRelayState {
    /// Not connected to the source yet.
    Starting,
    /// This instance holds the source's lock and relays its rows.
    Relaying,
    /// Another instance relays the source; this one takes over if it goes.
    Standby,
    /// The source's producer is not registered: its rows wait until it is.
    WaitingForProducer,
    /// The source (or trustmsg's own database) does not answer: retried
    /// with backoff; `last_error` says why.
    Down,
}

impl OutboxRelayState {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Relaying => "relaying",
            Self::Standby => "standby",
            Self::WaitingForProducer => "waiting_for_producer",
            Self::Down => "down",
        }
    }
}

/// One producer's outbox table (the local message table way) as the
/// instance answering relays it: its relay's state and counters since that
/// instance started, and the table's gauges as last read (every
/// `--backlog-interval`; `stats_at` says when, null until first read).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OutboxSourceView {
    /// The producer whose rows the table holds.
    pub biz_id: String,
    /// The table's name (`--outbox-table`).
    pub table: String,
    /// The source database's URL, its password shown as `***`.
    pub database: String,
    /// What the relay is doing.
    pub state: OutboxRelayState,
    /// Rows waiting to be relayed (counted up to 1,000,000); null until the
    /// gauges are first read.
    pub pending_rows: Option<u64>,
    /// How long the oldest pending row has waited, in milliseconds; null
    /// when none waits or the gauges are not read yet.
    pub oldest_pending_age_ms: Option<u64>,
    /// Rows marked failed that wait for an operator to retry or give them
    /// up; null until the gauges are first read.
    pub failed_rows: Option<u64>,
    /// Rows relayed per second by this instance between the last two
    /// gauge readings.
    pub relayed_per_s: f64,
    /// Rows this instance relayed since it started.
    pub relayed_total: u64,
    /// Rows this instance marked failed since it started.
    pub failed_total: u64,
    /// Errors of the source or of trustmsg's database this instance met
    /// while relaying (each retried), since it started.
    pub errors_total: u64,
    /// The last of those errors.
    pub last_error: Option<String>,
    /// When it happened.
    pub last_error_at: Option<DateTime<Utc>>,
    /// When this instance last relayed a row.
    pub last_relayed_at: Option<DateTime<Utc>>,
    /// When the gauges (`pending_rows`, `oldest_pending_age_ms`,
    /// `failed_rows`) were read.
    pub stats_at: Option<DateTime<Utc>>,
}

/// Every outbox source the instance answering relays
/// (`GET /v1/admin/outbox-sources`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OutboxSourceList {
    /// By biz_id; empty when the instance was started without `--outbox-source`.
    pub items: Vec<OutboxSourceView>,
}

/// A row's status in a producer's outbox table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutboxRowStatus {
    /// Waiting to be relayed (0).
    Pending,
    /// Relayed: its message is committed in trustmsg (2).
    Relayed,
    /// Refused for good (`fail_reason` says why): waits for an operator
    /// to retry or give it up (3).
    Failed,
    /// An operator gave it up: never relayed (4).
    GivenUp,
    /// A status number trustmsg does not use (written by something else).
    Unknown,
}

impl OutboxRowStatus {
    /// The statuses a row list can ask for.
    pub const LISTED: [Self; 4] = [Self::Failed, Self::Pending, Self::Relayed, Self::GivenUp];

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Relayed => "relayed",
            Self::Failed => "failed",
            Self::GivenUp => "given_up",
            Self::Unknown => "unknown",
        }
    }

    /// Parses the wire spelling of a status a row list can ask for.
    pub fn parse(s: &str) -> Option<Self> {
        Self::LISTED.into_iter().find(|k| k.as_str() == s)
    }
}

/// One row of a producer's outbox table, without its payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OutboxRowView {
    /// The row's id in the source table.
    pub id: u64,
    /// The message's key (the message's `message_key` in trustmsg once relayed).
    pub message_key: String,
    /// The Kafka topic the row names.
    pub topic: String,
    /// The Kafka record key, if any.
    pub record_key: Option<String>,
    /// Where the row is.
    pub status: OutboxRowStatus,
    /// Times an operator retried it.
    pub retry_count: u32,
    /// Why the relay refused it (a failed row).
    pub fail_reason: Option<String>,
    /// When the relay last relayed or failed it, or an operator gave it up (UTC).
    pub last_execute_time: Option<DateTime<Utc>>,
    /// The row's `gmt_create` as the source database wrote it: its own
    /// clock and time zone, without an offset (`2026-11-23T08:00:00.123`).
    #[schema(value_type = Option<String>, example = "2026-11-23T08:00:00.123")]
    pub created: Option<NaiveDateTime>,
}

/// One page of a source's rows
/// (`GET /v1/admin/outbox-sources/{biz_id}/rows`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OutboxRowPage {
    /// By id, lowest first.
    pub items: Vec<OutboxRowView>,
    /// Pass as `after` for the next page; null on the last page.
    pub next_after: Option<u64>,
}

/// The query of `GET /v1/admin/outbox-sources/{biz_id}/rows`. Any other
/// parameter is refused (400).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OutboxRowsQuery {
    /// failed (the default), pending, relayed or given_up.
    #[param(schema_with = outbox_status_filter)]
    pub status: Option<String>,
    /// Rows with ids above this one: the previous page's `next_after`
    /// (default 0, the first page).
    #[param(minimum = 0, maximum = 9223372036854775807_f64)]
    pub after: Option<u64>,
    /// Rows per page, 1 to 1000 (default 50).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

/// An outbox row list's `status` (a parameter's schema_with drops its doc
/// comment, so the schema says it).
fn outbox_status_filter() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(["", "failed", "pending", "relayed", "given_up"]))
        .description(Some(
            "failed (the default, also when empty), pending, relayed or given_up.",
        ))
        .build()
}

/// An operator's action on a failed outbox row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutboxRowAction {
    /// Pending again, as a new attempt (`retry_count` + 1).
    Retry,
    /// Never relayed (status 4); deleted by the source's retention.
    GiveUp,
}

/// What `POST /v1/admin/outbox-sources/{biz_id}/rows/{id}/retry` or
/// `…/give-up` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OutboxActionResult {
    /// The source's producer.
    pub biz_id: String,
    /// The row's id in the source table.
    pub id: u64,
    /// What was done.
    pub action: OutboxRowAction,
    /// Who did it, as audited: `operator:<name>`.
    pub actor: String,
    /// The row as it is now (a retried row may already be relayed); null
    /// when it is gone already (relayed and deleted: `--outbox-retention 0`).
    pub row: Option<OutboxRowView>,
}

/// What the large tables hold (`GET /v1/admin/storage`): their rows and
/// bytes, how old the oldest stored message is, and the retention that
/// keeps them bounded. Read from the database's catalog, at most every
/// 10 s whatever the number of callers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StorageView {
    /// The large tables (messages and what hangs off them, the alerts),
    /// those that exist; a partitioned table's figures are the sum over
    /// its partitions, and over the shards when there are several.
    pub tables: Vec<TableSizeView>,
    /// When the oldest stored message (the lowest id) was prepared; absent
    /// when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_message_at: Option<DateTime<Utc>>,
    /// Its age in seconds, by the database's clock (0 when there is none).
    pub oldest_message_age_secs: f64,
    /// The oldest partition, when the tables are partitioned by time;
    /// absent while they are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_partition: Option<PartitionView>,
    /// This instance's `--retention` in seconds: finished messages older
    /// than this are removed; absent when retention is off (everything is
    /// kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_secs: Option<u64>,
    /// When this was read (the database clock).
    pub at: DateTime<Utc>,
}

/// One large table's size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TableSizeView {
    /// Its name (`messages`, `audit_log`, `check_attempts`, `consumptions`,
    /// `message_payloads`, `alerts`, `message_keys`).
    pub table: String,
    /// Its rows as the database estimates them (InnoDB's statistics,
    /// PostgreSQL's live rows; exact on SQLite): close, not a count.
    pub rows: u64,
    /// Bytes of its data and indexes (pages allocated: space freed by
    /// deleted rows is reused, not given back to the file system).
    pub bytes: u64,
}

/// One time partition of the partitioned tables (issue 60): the messages
/// created while it took new ones, with everything hanging off them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PartitionView {
    /// Its name in the database: `p<period>` (on PostgreSQL each table's
    /// partition is `<table>_p<period>`).
    pub name: String,
    /// When it began to take new messages.
    pub from: DateTime<Utc>,
    /// When the next one began to (the time of this reading while it is
    /// the one taking them).
    pub to: DateTime<Utc>,
}
