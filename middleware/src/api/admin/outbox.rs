//! The producers' outbox tables this instance relays (the local message
//! table way, [`crate::outbox`]), for operators:
//! `GET /v1/admin/outbox-sources` (each source as this instance sees it:
//! its relay's state, counters and last error, and the table's gauges as
//! last read; all from memory, so it answers while a source is down),
//! `GET …/{biz_id}/rows` (the table's rows of one status, by id, read from
//! the source's database), and the two actions on a failed row: `retry`
//! (pending again, as a new attempt) and `give-up` (never relayed).
//!
//! An action needs a reason and is a guarded UPDATE of the source row
//! (`… WHERE status = 3`): a row that is not failed (any more) is left
//! alone and the answer is 409 saying what it is now. It is audited in
//! trustmsg's `outbox_actions` *before* the source row changes: the two
//! are different databases with no transaction across them, and a change
//! must never go unaudited. So the row is read first (a row that is not
//! failed, or a source that does not answer, is refused before anything
//! is written), and only a race lost between that read and the UPDATE, or
//! a source failing in between, leaves the audit of an attempt that
//! changed nothing (its answer says so: 409 or 503).
//!
//! Every call to a source has until three quarters of the request deadline:
//! a source that does not answer by then is a 503
//! `outbox_source_unavailable` naming the source by its URL with the
//! password hidden (the cause is logged), not the request deadline's
//! `request_timeout`, which would blame trustmsg's own store.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use chrono::{DateTime, SubsecRound, Utc};
use tokio::time::Instant;
use trustmsg_verify_api::admin::{
    ActionRequest, OperatorHeader, OutboxActionResult, OutboxRelayState, OutboxRowAction,
    OutboxRowPage, OutboxRowStatus, OutboxRowView, OutboxRowsQuery, OutboxSourceList,
    OutboxSourceView,
};
use trustmsg_verify_api::ErrorBody;

use super::act::Acting;
use super::alerts::only;
use super::{bad, limit_param, number_param, param};
use crate::api::error::ApiError;
use crate::api::AppState;
use crate::outbox::source::{status, ListedRow};
use crate::outbox::{RelayState, Source};
use crate::store::{OutboxAction, OutboxActionKind};

/// Rows in a page when `limit` is not given, and at most.
const MAX_LIMIT: u32 = 1000;

fn state_view(s: RelayState) -> OutboxRelayState {
    match s {
        RelayState::Starting => OutboxRelayState::Starting,
        RelayState::Relaying => OutboxRelayState::Relaying,
        RelayState::Standby => OutboxRelayState::Standby,
        RelayState::WaitingForProducer => OutboxRelayState::WaitingForProducer,
        RelayState::Down => OutboxRelayState::Down,
    }
}

fn source_view(source: &Source, table: &str) -> OutboxSourceView {
    let s = source.status();
    let stats = s.stats;
    // The instance's own clock, to the millisecond as every stored time is.
    let ms = |t: Option<DateTime<Utc>>| t.map(|t| t.trunc_subsecs(3));
    OutboxSourceView {
        biz_id: source.biz_id.clone(),
        table: table.to_string(),
        database: source.url.to_string(),
        state: state_view(s.state),
        pending_rows: stats.map(|st| st.pending),
        oldest_pending_age_ms: stats
            .and_then(|st| st.oldest_pending_age)
            .map(|age| u64::try_from(age.as_millis()).unwrap_or(u64::MAX)),
        failed_rows: stats.map(|st| st.failed),
        relayed_per_s: s.relayed_per_s,
        relayed_total: s.relayed,
        failed_total: s.failed,
        errors_total: s.errors,
        last_error: s.last_error,
        last_error_at: ms(s.last_error_at),
        last_relayed_at: ms(s.last_relayed_at),
        stats_at: ms(s.stats_at),
    }
}

fn status_view(code: i64) -> OutboxRowStatus {
    match code {
        status::PENDING => OutboxRowStatus::Pending,
        status::RELAYED => OutboxRowStatus::Relayed,
        status::FAILED => OutboxRowStatus::Failed,
        status::GIVEN_UP => OutboxRowStatus::GivenUp,
        _ => OutboxRowStatus::Unknown,
    }
}

/// The table's number for a status a list asks for.
fn status_code(s: OutboxRowStatus) -> i64 {
    match s {
        OutboxRowStatus::Pending => status::PENDING,
        OutboxRowStatus::Relayed => status::RELAYED,
        OutboxRowStatus::Failed => status::FAILED,
        OutboxRowStatus::GivenUp => status::GIVEN_UP,
        // Not a status a list can ask for (`parse` never gives it).
        OutboxRowStatus::Unknown => -1,
    }
}

fn row_view(r: ListedRow) -> OutboxRowView {
    OutboxRowView {
        id: r.id,
        message_key: r.message_key,
        topic: r.topic,
        record_key: r.record_key,
        status: status_view(r.status),
        retry_count: r.retry_count,
        fail_reason: r.fail_reason,
        last_execute_time: r.last_execute_time,
        created: r.created,
    }
}

/// The source of `biz_id` on this instance (404 naming the ones it has).
fn source_of(state: &AppState, biz_id: &str) -> Result<Arc<Source>, ApiError> {
    if let Some(source) = state.outbox.get(biz_id) {
        return Ok(source.clone());
    }
    let known: Vec<&str> = state.outbox.all().map(|s| s.biz_id.as_str()).collect();
    let relays = if known.is_empty() {
        "none (it was started without --outbox-source)".to_string()
    } else {
        known.join(", ")
    };
    Err(ApiError::not_found(
        "outbox_source_not_found",
        format!("this instance relays no outbox source of producer {biz_id:?}; it relays {relays}"),
    ))
}

/// The row id a path names (400 if it is not one).
fn row_id(id: &str) -> Result<u64, ApiError> {
    // Ids are at most i64's maximum (SQLite stores them signed).
    id.parse::<i64>()
        .ok()
        .and_then(|id| u64::try_from(id).ok())
        .ok_or_else(|| {
            ApiError::invalid(
                "invalid_id",
                format!(
                    "an outbox row id is a whole number from 0 to {} (got {id:?})",
                    i64::MAX
                ),
            )
        })
}

/// When every call to a source of this request must have answered.
fn source_deadline(state: &AppState) -> Instant {
    Instant::now() + state.request_timeout.mul_f64(0.75)
}

/// `call` to `source`'s database, or 503 `outbox_source_unavailable` when
/// it fails or has not answered by `until`.
async fn from_source<T>(
    source: &Source,
    until: Instant,
    what: &str,
    call: impl std::future::Future<Output = Result<T, sqlx::Error>>,
) -> Result<T, ApiError> {
    let cause = match tokio::time::timeout_at(until, call).await {
        Ok(Ok(v)) => return Ok(v),
        Ok(Err(e)) => format!("{what}: {e}"),
        Err(_) => format!("{what}: no answer in time"),
    };
    Err(ApiError::SourceUnavailable {
        biz_id: source.biz_id.clone(),
        database: source.url.to_string(),
        cause,
    })
}

fn no_row(biz_id: &str, id: u64) -> ApiError {
    ApiError::not_found(
        "outbox_row_not_found",
        format!("producer {biz_id}'s outbox table has no row {id}"),
    )
}

/// The 409 of an action on a row that is not failed (any more).
fn not_failed(biz_id: &str, row: &ListedRow, action: &str) -> ApiError {
    ApiError::conflict(
        "wrong_state",
        format!(
            "row {} of producer {biz_id}'s outbox table is {}: {action} applies to failed rows \
             only; nothing changed",
            row.id,
            status::name(row.status)
        ),
    )
}

/// Every outbox source this instance relays, as it sees it.
#[utoipa::path(get, path = "/v1/admin/outbox-sources", tag = "admin",
    responses(
        (status = 200, description = "Every source this instance relays (none without --outbox-source)", body = OutboxSourceList),
        (status = 403, description = "Not the admin token", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn list_sources(State(state): State<AppState>) -> axum::Json<OutboxSourceList> {
    let table = &state.outbox.table;
    axum::Json(OutboxSourceList {
        items: state.outbox.all().map(|s| source_view(s, table)).collect(),
    })
}

/// The status, position and page size a row list asks for.
fn rows_request(params: &BTreeMap<String, String>) -> Result<(i64, u64, u32), ApiError> {
    only(params, &["status", "after", "limit"])?;
    let wanted = match param(params, "status") {
        None => OutboxRowStatus::Failed,
        Some(s) => OutboxRowStatus::parse(s).ok_or_else(|| {
            bad(format!(
                "status must be one of failed, pending, relayed, given_up (got {s:?})"
            ))
        })?,
    };
    let after = match number_param(params, "after") {
        None => 0,
        Some(v) => v
            .parse::<i64>()
            .ok()
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| {
                bad(format!(
                    "after must be a row id, a whole number from 0 to {} (got {v:?})",
                    i64::MAX
                ))
            })?,
    };
    let limit = limit_param(params, MAX_LIMIT)?;
    Ok((status_code(wanted), after, limit))
}

/// A source's rows of one status (failed by default), by id, a page at a time.
#[utoipa::path(get, path = "/v1/admin/outbox-sources/{biz_id}/rows", tag = "admin",
    params(("biz_id" = String, Path, description = "The source's producer"), OutboxRowsQuery),
    responses(
        (status = 200, description = "A page of rows, lowest id first", body = OutboxRowPage),
        (status = 400, description = "A parameter is not one the list takes, or its value is not", body = ErrorBody),
        (status = 403, description = "Not the admin token", body = ErrorBody),
        (status = 404, description = "This instance relays no source of that producer", body = ErrorBody),
        (status = 503, description = "The source's database did not answer (`outbox_source_unavailable`)", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn list_rows(
    State(state): State<AppState>,
    Path(biz_id): Path<String>,
    Query(params): Query<BTreeMap<String, String>>,
) -> Result<axum::Json<OutboxRowPage>, ApiError> {
    let source = source_of(&state, &biz_id)?;
    let (wanted, after, limit) = rows_request(&params)?;
    let until = source_deadline(&state);
    let rows = from_source(
        &source,
        until,
        "listing rows",
        source.db.list(wanted, after, limit),
    )
    .await?;
    let next_after = (rows.len() == limit as usize)
        .then(|| rows.last().map(|r| r.id))
        .flatten();
    Ok(axum::Json(OutboxRowPage {
        items: rows.into_iter().map(row_view).collect(),
        next_after,
    }))
}

/// A failed row is relayed again, as a new attempt (`retry_count` + 1):
/// fix what its `fail_reason` names first (in the row, or in trustmsg).
#[utoipa::path(post, path = "/v1/admin/outbox-sources/{biz_id}/rows/{id}/retry", tag = "admin",
    params(
        ("biz_id" = String, Path, description = "The source's producer"),
        ("id" = u64, Path, description = "The row's id in the source table", minimum = 0, maximum = 9223372036854775807_f64),
        OperatorHeader,
    ),
    request_body = ActionRequest,
    responses(
        (status = 200, description = "Pending again (or already relayed); audited", body = OutboxActionResult),
        (status = 400, description = "No reason, or a bad row id or operator name", body = ErrorBody),
        (status = 404, description = "No such source on this instance, or no such row", body = ErrorBody),
        (status = 409, description = "The row is not failed (any more): nothing changed", body = ErrorBody),
        (status = 503, description = "The source's database did not answer (`outbox_source_unavailable`) or trustmsg's store did not (`store_unavailable`)", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn retry(
    State(state): State<AppState>,
    Path((biz_id, id)): Path<(String, String)>,
    acting: Acting,
) -> Result<axum::Json<OutboxActionResult>, ApiError> {
    act(&state, &biz_id, &id, acting, OutboxActionKind::Retry).await
}

/// A failed row is given up: never relayed (status 4), and deleted by the
/// source's retention like a relayed row.
#[utoipa::path(post, path = "/v1/admin/outbox-sources/{biz_id}/rows/{id}/give-up", tag = "admin",
    params(
        ("biz_id" = String, Path, description = "The source's producer"),
        ("id" = u64, Path, description = "The row's id in the source table", minimum = 0, maximum = 9223372036854775807_f64),
        OperatorHeader,
    ),
    request_body = ActionRequest,
    responses(
        (status = 200, description = "Given up; audited", body = OutboxActionResult),
        (status = 400, description = "No reason, or a bad row id or operator name", body = ErrorBody),
        (status = 404, description = "No such source on this instance, or no such row", body = ErrorBody),
        (status = 409, description = "The row is not failed (any more): nothing changed", body = ErrorBody),
        (status = 503, description = "The source's database did not answer (`outbox_source_unavailable`) or trustmsg's store did not (`store_unavailable`)", body = ErrorBody),
    ),
    security(("admin" = [])))]
pub(crate) async fn give_up(
    State(state): State<AppState>,
    Path((biz_id, id)): Path<(String, String)>,
    acting: Acting,
) -> Result<axum::Json<OutboxActionResult>, ApiError> {
    act(&state, &biz_id, &id, acting, OutboxActionKind::GiveUp).await
}

/// Read, audit, change, read again (see the module docs for why in this order).
async fn act(
    state: &AppState,
    biz_id: &str,
    id: &str,
    Acting { actor, reason }: Acting,
    kind: OutboxActionKind,
) -> Result<axum::Json<OutboxActionResult>, ApiError> {
    let source = source_of(state, biz_id)?;
    let id = row_id(id)?;
    let name = match kind {
        OutboxActionKind::Retry => "retry",
        OutboxActionKind::GiveUp => "give-up",
    };
    let until = source_deadline(state);
    let row = from_source(&source, until, "reading the row", source.db.row(id))
        .await?
        .ok_or_else(|| no_row(biz_id, id))?;
    if row.status != status::FAILED {
        return Err(not_failed(biz_id, &row, name));
    }
    state
        .store
        .record_outbox_action(&OutboxAction {
            biz_id: source.biz_id.clone(),
            source_row_id: id,
            message_key: row.message_key.clone(),
            actor: actor.to_string(),
            action: kind,
            reason,
            at: Utc::now(),
        })
        .await?;
    let changed = match kind {
        OutboxActionKind::Retry => {
            from_source(
                &source,
                until,
                "retrying the row",
                source.db.retry_failed(id),
            )
            .await?
        }
        OutboxActionKind::GiveUp => {
            from_source(
                &source,
                until,
                "giving up the row",
                source.db.give_up_failed(id),
            )
            .await?
        }
    };
    let now = from_source(&source, until, "reading the row", source.db.row(id)).await?;
    if !changed {
        return Err(match &now {
            Some(now) => not_failed(biz_id, now, name),
            None => no_row(biz_id, id),
        });
    }
    tracing::info!(source = %source.biz_id, row = id, %actor, action = name, "outbox row changed by an operator");
    Ok(axum::Json(OutboxActionResult {
        biz_id: source.biz_id.clone(),
        id,
        action: match kind {
            OutboxActionKind::Retry => OutboxRowAction::Retry,
            OutboxActionKind::GiveUp => OutboxRowAction::GiveUp,
        },
        actor: actor.to_string(),
        row: now.map(row_view),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_row_list_asks_for_failed_rows_from_the_start_unless_told_otherwise() {
        assert_eq!(rows_request(&params(&[])).unwrap(), (status::FAILED, 0, 50));
        assert_eq!(
            rows_request(&params(&[
                ("status", "given_up"),
                ("after", "7"),
                ("limit", "1000")
            ]))
            .unwrap(),
            (status::GIVEN_UP, 7, 1000)
        );
        for (k, v) in [
            ("status", "unknown"),
            ("status", "FAILED"),
            ("after", "-1"),
            ("after", ""),
            ("limit", "0"),
            ("limit", "1001"),
            ("cursor", "x"),
        ] {
            assert!(rows_request(&params(&[(k, v)])).is_err(), "{k}={v}");
        }
    }

    #[test]
    fn every_status_a_list_can_ask_for_is_the_tables_own_number() {
        for s in OutboxRowStatus::LISTED {
            assert_eq!(status_view(status_code(s)), s);
        }
    }
}
