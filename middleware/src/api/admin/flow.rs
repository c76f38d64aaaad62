//! `GET /v1/admin/flow`: the flow of the last minutes (prepared, committed,
//! rolled back, sent, failed, check-back answers, backlog), summed over
//! every instance from `flow_minutes` (see `crate::workers::flow`), one entry per
//! minute with zeros where nothing happened. Nothing here changes anything.

use std::collections::BTreeMap;

use axum::extract::{Query, State};
use chrono::{TimeDelta, Utc};
use trustmsg_verify_api::admin::{FlowMinuteView, FlowPage, FlowQuery};
use trustmsg_verify_api::ErrorBody;

use super::alerts::only;
use super::{bad, number_param};
use crate::api::error::ApiError;
use crate::api::AppState;
use crate::store::FlowMinute;
use crate::workers::flow::minute_of;

/// Minutes when `minutes` is not given, and at most (a day: what is kept).
const DEFAULT_MINUTES: u32 = 60;
const MAX_MINUTES: u32 = 1440;

fn minutes(params: &BTreeMap<String, String>) -> Result<u32, ApiError> {
    only(params, &["minutes"])?;
    match number_param(params, "minutes") {
        None => Ok(DEFAULT_MINUTES),
        Some(v) => v
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_MINUTES).contains(n))
            .ok_or_else(|| {
                bad(format!(
                    "minutes must be a whole number from 1 to {MAX_MINUTES} (got {v:?})"
                ))
            }),
    }
}

fn view(f: FlowMinute) -> FlowMinuteView {
    let c = f.counts;
    FlowMinuteView {
        at: f.minute,
        prepared: c.prepared,
        committed: c.committed,
        rolled_back: c.rolled_back,
        sent: c.sent,
        failed: c.failed,
        checks_commit: c.checks_commit,
        checks_rollback: c.checks_rollback,
        checks_unknown: c.checks_unknown,
        checks_failed: c.checks_failed,
        backlog_prepared: f.backlog.map(|b| b.prepared),
        backlog_pending: f.backlog.map(|b| b.pending),
    }
}

/// The flow per minute, oldest first, the current minute last.
#[utoipa::path(get, path = "/v1/admin/flow", tag = "admin",
    params(FlowQuery),
    responses(
        (status = 200, description = "One entry per minute, oldest first, zeros where nothing happened", body = FlowPage),
        (status = 400, description = "A parameter is not one the flow takes, or minutes is not from 1 to 1440", body = ErrorBody),
        (status = 403, description = "Not the admin token", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn flow(
    State(state): State<AppState>,
    Query(params): Query<BTreeMap<String, String>>,
) -> Result<axum::Json<FlowPage>, ApiError> {
    let n = minutes(&params)?;
    // The instances count by their own clocks; so does the window.
    let last = minute_of(Utc::now());
    let first = last - TimeDelta::minutes(i64::from(n) - 1);
    let mut stored = state.store.flow_since(first).await?.into_iter().peekable();
    let mut out = Vec::with_capacity(n as usize);
    for i in 0..i64::from(n) {
        let at = first + TimeDelta::minutes(i);
        // Rows are whole minutes, oldest first; one from a skewed clock
        // beyond `last` is left out.
        while stored.peek().is_some_and(|f| f.minute < at) {
            stored.next();
        }
        out.push(match stored.next_if(|f| f.minute == at) {
            Some(f) => view(f),
            None => view(FlowMinute {
                minute: at,
                counts: Default::default(),
                backlog: None,
            }),
        });
    }
    Ok(axum::Json(FlowPage { minutes: out }))
}
