//! Wire types of the consumption ledger (issue 30): the consumer-group
//! registry (`/v1/consumer-groups`, admin token), what a consumer sends and
//! reads (`POST /v1/consumptions/begin` and `…/finish`, the group's token or
//! the admin token), and what operators read (a message's `consumptions`,
//! `GET /v1/admin/consumer-groups`). Field names are the contract the console
//! and consumers in any language are written against.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `PUT /v1/consumer-groups/{group}`: creates a group or replaces its
/// settings (a field left out takes its default). A field it does not know
/// is refused (400).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsumerGroupSettings {
    /// The topics the group consumes (required): 1 to 100 entries, each an
    /// exact topic name (`orders`) or a prefix ending in `*` (`shop.*`); `*`
    /// alone is every topic. They define the group's lag: messages SENT to
    /// these topics since the group was registered that it has not processed.
    #[schema(schema_with = crate::schemas::topic_list_required)]
    pub topics: Vec<String>,
    /// Failed consumptions of one message before the `consumption_failing`
    /// alert (once per message and group), 1 to 1000; default 5.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "optional_u32"
    )]
    #[schema(minimum = 1, maximum = 1000)]
    pub max_failures: Option<u32>,
    /// How long a begun consumption holds its message, in milliseconds
    /// (1000 to 86400000; default 300000, five minutes): after it, another
    /// delivery's begin takes it over and the `consumption_stuck` alert fires
    /// (once per begin).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "optional_u32"
    )]
    #[schema(minimum = 1000, maximum = 86400000)]
    pub in_progress_timeout_ms: Option<u32>,
}

/// A consumer group's registration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ConsumerGroupView {
    /// The group's name.
    pub group: String,
    /// The topics it consumes (exact names and prefixes ending in `*`).
    pub topics: Vec<String>,
    /// Failed consumptions of one message before the alert.
    pub max_failures: u32,
    /// How long a begun consumption holds its message, in milliseconds.
    pub in_progress_timeout_ms: u32,
    /// The group's bearer token (`tc_…`). Present only in the response that
    /// issued it (creation or rotation): trustmsg keeps only its hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// When the group was registered; its lag counts messages sent since.
    pub created_at: DateTime<Utc>,
    /// When its registration last changed.
    pub updated_at: DateTime<Utc>,
}

/// Every consumer group (`GET /v1/consumer-groups`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ConsumerGroupList {
    /// By name.
    pub items: Vec<ConsumerGroupView>,
}

/// `POST /v1/consumptions/begin`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BeginRequest {
    /// The consumer group: 1 to 64 of A-Z a-z 0-9 . _ -
    #[schema(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub group: String,
    /// trustmsg's message id (the record's `trustmsg-message-id` header).
    #[serde(deserialize_with = "message_id")]
    #[schema(minimum = 0, maximum = 9223372036854775807_i64)]
    pub message_id: u64,
}

/// An optional whole number that fits 32 bits, also when written with a
/// zero fraction (JSON Schema's `integer`).
fn optional_u32<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    use serde::de::Error;
    crate::whole_number::optional(d)?
        .map(|v| u32::try_from(v).map_err(|_| D::Error::custom(format!("{v} is over 4294967295"))))
        .transpose()
}

/// A message id: a whole number from 0 to 2^63 - 1 (ids are signed 64-bit
/// in every store), also when written with a zero fraction.
fn message_id<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    use serde::de::Error;
    match crate::whole_number::optional(d)? {
        Some(id) if i64::try_from(id).is_ok() => Ok(id),
        Some(id) => Err(D::Error::custom(format!(
            "a message id is at most 9223372036854775807 (got {id})"
        ))),
        None => Err(D::Error::custom("a message id is a whole number, not null")),
    }
}

/// What a begin tells the consumer to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BeginState {
    /// Process the message now, then call finish: the first delivery, a
    /// retry after a failure, or a takeover of a delivery whose
    /// `in_progress_timeout_ms` ran out.
    Go,
    /// Another delivery is processing it (since `since`): do not process it;
    /// ask again later if the record must not be dropped.
    InProgress,
    /// Already processed by this group: skip it.
    Done,
}

/// The answer to a begin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BeginResponse {
    /// What to do.
    pub state: BeginState,
    /// Begins of this message by this group that were told to go, this one
    /// included when `state` is `go`.
    pub attempts: u32,
    /// For `in_progress`: when the delivery that holds it began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
}

/// `POST /v1/consumptions/finish`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FinishRequest {
    /// The consumer group: 1 to 64 of A-Z a-z 0-9 . _ -
    #[schema(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub group: String,
    /// trustmsg's message id.
    #[serde(deserialize_with = "message_id")]
    #[schema(minimum = 0, maximum = 9223372036854775807_i64)]
    pub message_id: u64,
    /// Whether the processing succeeded.
    pub ok: bool,
    /// Why it failed (only with `ok: false`; at most 2000 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 2000)]
    pub error: Option<String>,
}

/// A group's consumption of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ConsumptionState {
    /// A delivery began it and has not finished.
    InProgress,
    /// The last delivery failed; the next begin is a retry.
    Failed,
    /// Processed.
    Done,
}

impl ConsumptionState {
    /// Every state, in declaration order.
    pub const ALL: [Self; 3] = [Self::InProgress, Self::Failed, Self::Done];

    /// The wire and database spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InProgress => "in_progress",
            Self::Failed => "failed",
            Self::Done => "done",
        }
    }

    /// Parses the wire/database spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// The answer to a finish.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FinishResponse {
    /// The consumption's state now: `done` or `failed`.
    pub state: ConsumptionState,
    /// Begins that were told to go so far.
    pub attempts: u32,
}

/// One group's consumption of a message, in the message view
/// (`GET /v1/admin/messages/{id}`'s `consumptions`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ConsumptionView {
    /// The consumer group.
    pub group: String,
    /// `in_progress`, `failed` or `done`.
    pub state: ConsumptionState,
    /// Begins that were told to go.
    pub attempts: u32,
    /// The last failure's error, if any was given.
    pub last_error: Option<String>,
    /// When the first delivery began.
    pub first_began_at: DateTime<Utc>,
    /// When the latest delivery began.
    pub last_began_at: DateTime<Utc>,
    /// When the latest delivery finished (null while in progress).
    pub finished_at: Option<DateTime<Utc>>,
    /// When the row last changed.
    pub updated_at: DateTime<Utc>,
}

/// One group at a glance (`GET /v1/admin/consumer-groups`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ConsumerGroupStats {
    /// The group's name.
    pub group: String,
    /// The topics it consumes.
    pub topics: Vec<String>,
    /// Messages it processed (`done`).
    pub processed: u64,
    /// Messages whose last delivery failed (`failed`).
    pub failing: u64,
    /// Messages a delivery is processing now (`in_progress`).
    pub in_progress: u64,
    /// Messages SENT to its topics since it was registered that it has not
    /// processed (not `done`).
    pub lag: u64,
}

/// Every consumer group at a glance (`GET /v1/admin/consumer-groups`).
/// Computed at most once every few seconds per instance, whoever asks: `at`
/// says when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ConsumerGroupStatsList {
    /// By name.
    pub items: Vec<ConsumerGroupStats>,
    /// When the counts were taken (database clock).
    pub at: DateTime<Utc>,
}
