//! What operators read: `GET /v1/admin/messages` (filters, keyset pages,
//! newest first), `GET /v1/admin/messages/{id}` (the message with its
//! payload, headers, audit trail and check-back calls) and
//! `GET /v1/admin/summary` (per producer: counts by state, the oldest waiting
//! message of each kind), and `GET /v1/admin/consumer-groups` (the
//! consumption ledger per group). Nothing here changes anything.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{DateTime, Utc};
use trustmsg_verify_api::admin::{
    ListQuery, MessageDetail, MessagePage, ProducerSummaryView, Summary,
};
use trustmsg_verify_api::ErrorBody;

use super::{filter_of, limit_param, message, param};
use crate::api::error::ApiError;
use crate::api::AppState;
use crate::store::{MessageFilter, ProducerSummary};
use trustmsg_verify_api::consumers::{ConsumerGroupStats, ConsumerGroupStatsList};

/// Rows in a page when `limit` is not given, and at most.
pub(super) const MAX_LIMIT: u32 = 500;

/// A cursor is the last id of a page, wrapped so clients treat it as opaque.
pub(super) fn cursor_of(id: u64) -> String {
    URL_SAFE_NO_PAD.encode(format!("v1:{id}"))
}

fn cursor_id(cursor: &str) -> Result<u64, ApiError> {
    URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.strip_prefix("v1:").and_then(|id| id.parse().ok()))
        .ok_or_else(|| {
            ApiError::invalid(
                "invalid_cursor",
                "cursor is not one this API issued: pass the next_cursor of the previous page \
                 unchanged, or leave it out for the first page",
            )
        })
}

/// The page size and position a list request asks for (`limit`, `cursor`):
/// shared by every keyset-paged list.
pub(super) fn page_position(
    params: &BTreeMap<String, String>,
) -> Result<(u32, Option<u64>), ApiError> {
    let limit = limit_param(params, MAX_LIMIT)?;
    let before = param(params, "cursor").map(cursor_id).transpose()?;
    Ok((limit, before))
}

/// The filter, page size and position a list request asks for.
fn list_request(
    params: &BTreeMap<String, String>,
) -> Result<(MessageFilter, u32, Option<u64>), ApiError> {
    let filter = filter_of(params)?;
    let (limit, before) = page_position(params)?;
    Ok((filter, limit, before))
}

/// Lists messages, newest first, a page at a time.
#[utoipa::path(get, path = "/v1/admin/messages", tag = "admin",
    params(ListQuery),
    responses(
        (status = 200, description = "A page of messages", body = MessagePage),
        (status = 400, description = "A parameter is not one the list takes, or its value is not", body = ErrorBody),
        (status = 403, description = "Not the admin token", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn list_messages(
    State(state): State<AppState>,
    Query(params): Query<BTreeMap<String, String>>,
) -> Result<axum::Json<MessagePage>, ApiError> {
    let (filter, limit, before) = list_request(&params)?;
    let items = state.store.list_messages(&filter, limit, before).await?;
    let next_cursor = (items.len() == limit as usize)
        .then(|| items.last().map(|m| cursor_of(m.id)))
        .flatten();
    Ok(axum::Json(MessagePage { items, next_cursor }))
}

/// One message with its payload, headers and audit trail.
#[utoipa::path(get, path = "/v1/admin/messages/{id}", tag = "admin",
    params(("id" = u64, Path, description = "trustmsg's message id", minimum = 0, maximum = 9223372036854775807_f64)),
    responses(
        (status = 200, description = "The message", body = MessageDetail),
        (status = 400, description = "The id is not a number", body = ErrorBody),
        (status = 403, description = "Not the admin token", body = ErrorBody),
        (status = 404, description = "No such message", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn get_message(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<axum::Json<MessageDetail>, ApiError> {
    let m = message(&state, &id).await?;
    let id = m.id;
    let audit = state.store.audit_trail(id).await?;
    let check_attempts = state.store.check_attempts(id).await?;
    let blocked_by = state.store.blocked_by(&m).await?;
    let consumptions = state.store.consumptions_of(id).await?;
    Ok(axum::Json(m.detail(
        audit,
        check_attempts,
        blocked_by,
        consumptions,
    )))
}

/// The window of the summary's counts of finished messages.
pub(crate) const SUMMARY_RECENT: Duration = Duration::from_secs(15 * 60);
/// How long one computed summary is served. Every console tab refreshes its
/// overview every few seconds; whatever the number of tabs and CLI calls,
/// an instance runs the summary's statements at most once in this time.
const SUMMARY_MAX_AGE: Duration = Duration::from_secs(2);

/// A view computed by one caller at a time and shared with every caller
/// for `max_age` (single flight: callers that arrive while it is being
/// computed wait for that computation). A failure is not kept: the next
/// caller tries again, and the callers that waited on it share its error.
#[derive(Clone)]
pub(crate) struct SharedView<T>(moka::future::Cache<(), Arc<T>>);

impl<T: Send + Sync + 'static> SharedView<T> {
    pub(super) fn new(max_age: Duration) -> Self {
        Self(
            moka::future::Cache::builder()
                .max_capacity(1)
                .time_to_live(max_age)
                .build(),
        )
    }

    /// The shared view, computed by `compute` when there is none fresh.
    pub(super) async fn get(
        &self,
        compute: impl std::future::Future<Output = Result<T, crate::store::StoreError>>,
    ) -> Result<Arc<T>, ApiError> {
        self.0
            .try_get_with((), async move { compute.await.map(Arc::new) })
            .await
            .map_err(|e| match Arc::try_unwrap(e) {
                Ok(e) => ApiError::from(e),
                Err(shared) => {
                    ApiError::from(crate::store::StoreError::Unavailable(shared.to_string()))
                }
            })
    }
}

/// The summary, shared for [`SUMMARY_MAX_AGE`].
pub(crate) type SummaryCache = SharedView<Summary>;

impl Default for SummaryCache {
    fn default() -> Self {
        Self::new(SUMMARY_MAX_AGE)
    }
}

fn summary_view(s: ProducerSummary, now: DateTime<Utc>) -> ProducerSummaryView {
    let age = |t: Option<DateTime<Utc>>| {
        t.map(|t| u64::try_from((now - t).num_milliseconds()).unwrap_or(0))
    };
    ProducerSummaryView {
        oldest_prepared_age_ms: age(s.oldest_prepared_at),
        oldest_pending_send_age_ms: age(s.oldest_pending_send_at),
        biz_id: s.biz_id,
        by_status: s.by_status,
        by_send_status: s.by_send_status,
        scheduled: s.scheduled,
        sent_recently: s.sent_recently,
        rolled_back_recently: s.rolled_back_recently,
        oldest_prepared_at: s.oldest_prepared_at,
        oldest_pending_send_at: s.oldest_pending_send_at,
    }
}

/// Per producer: exact counts of the live states, how long the oldest
/// waiting messages have waited, and how many finished within the last
/// `recent_window_secs`. Served from a copy at most 2 s old (`at` says when),
/// computed once per instance however many ask.
#[utoipa::path(get, path = "/v1/admin/summary", tag = "admin",
    responses(
        (status = 200, description = "Every producer with live or recently finished messages", body = Summary),
        (status = 403, description = "Not the admin token", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn summary(
    State(state): State<AppState>,
) -> Result<axum::Json<Summary>, ApiError> {
    let store = state.store.clone();
    let summary = state
        .summary
        .get(async move {
            let now = store.now().await?;
            let producers = store
                .summary(SUMMARY_RECENT)
                .await?
                .into_iter()
                .map(|s| summary_view(s, now))
                .collect();
            let producers_without_topics = store
                .list_producers()
                .await?
                .into_iter()
                .filter(|p| p.topics.is_none())
                .map(|p| p.biz_id)
                .collect();
            let submit_waiting = store.count_waiting_commits().await?;
            Ok(Summary {
                producers,
                at: now,
                producers_without_topics,
                recent_window_secs: SUMMARY_RECENT.as_secs(),
                submit_waiting,
            })
        })
        .await?;
    Ok(axum::Json(Summary::clone(&summary)))
}

/// How long one computed set of consumer-group counts is served: like the
/// summary, an instance counts at most once in this time however many ask.
const GROUP_COUNTS_MAX_AGE: Duration = Duration::from_secs(2);

/// The consumer groups at a glance, shared for [`GROUP_COUNTS_MAX_AGE`]:
/// the lag counts read every message sent to a group's topics since its
/// registration (an index range each), so they must not run once per
/// console tab.
pub(crate) type GroupCountsCache = SharedView<ConsumerGroupStatsList>;

impl Default for GroupCountsCache {
    fn default() -> Self {
        Self::new(GROUP_COUNTS_MAX_AGE)
    }
}

/// Per consumer group: processed (`done`), failing (`failed`), in progress,
/// and lag (messages SENT to its topics since it was registered that it has
/// not processed). Served from a copy at most 2 s old (`at` says when).
#[utoipa::path(get, path = "/v1/admin/consumer-groups", tag = "admin",
    responses(
        (status = 200, description = "Every registered consumer group", body = ConsumerGroupStatsList),
        (status = 403, description = "Not the admin token", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn consumer_groups(
    State(state): State<AppState>,
) -> Result<axum::Json<ConsumerGroupStatsList>, ApiError> {
    let store = state.store.clone();
    let list = state
        .group_counts
        .get(async move {
            let at = store.now().await?;
            let items = store
                .consumer_group_counts()
                .await?
                .into_iter()
                .map(|c| ConsumerGroupStats {
                    group: c.group,
                    topics: c.topics,
                    processed: c.processed,
                    failing: c.failing,
                    in_progress: c.in_progress,
                    lag: c.lag,
                })
                .collect();
            Ok(ConsumerGroupStatsList { items, at })
        })
        .await?;
    Ok(axum::Json(ConsumerGroupStatsList::clone(&list)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_and_anything_else_is_refused() {
        assert_eq!(cursor_id(&cursor_of(42)).unwrap(), 42);
        for bad in [
            "42",
            "djE6",
            "djE6eA",
            "!!",
            &URL_SAFE_NO_PAD.encode("v2:42"),
        ] {
            assert!(cursor_id(bad).is_err(), "{bad}");
        }
    }
}
