//! How the admin API's answers read in a terminal: tables with aligned
//! columns, ages like `3m12s`, one line for what an action did.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use comfy_table::Table;
use trustmsg_verify_api::admin::{
    AlertPage, MessageDetail, MessagePage, OutboxActionResult, OutboxRowAction, OutboxRowPage,
    OutboxRowView, OutboxSourceList, Summary,
};
use trustmsg_verify_api::consumers::{ConsumerGroupStatsList, ConsumerGroupView};
use trustmsg_verify_api::{
    MessageStatus, MessageView, PayloadEncoding, ProducerList, ProducerView, SendStatus,
};

/// An optional value as a cell: `-` when absent.
fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

/// A status or send status as a cell.
fn status_cell(s: Option<&str>) -> String {
    s.unwrap_or("-").to_string()
}

/// A time as the server wrote it (RFC 3339, UTC).
fn time(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// Milliseconds as `3m12s`, `2h5m`, `4d3h`.
fn age(ms: u64) -> String {
    let s = ms / 1000;
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}d{h}h")
    } else if h > 0 {
        format!("{h}h{m}m")
    } else if m > 0 {
        format!("{m}m{sec}s")
    } else {
        format!("{sec}s")
    }
}

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.set_header(header.to_vec());
    t
}

fn age_cell(ms: Option<u64>) -> String {
    ms.map_or_else(|| "-".into(), age)
}

pub(super) fn summary_table(v: &Summary) -> String {
    let window = humantime::format_duration(std::time::Duration::from_secs(v.recent_window_secs));
    let mut t = table(&[
        "producer",
        "prepared",
        "verify failed",
        "pending",
        "scheduled",
        "send failed",
        &format!("sent ({window})"),
        &format!("rolled back ({window})"),
        "oldest prepared",
        "oldest pending",
    ]);
    for p in &v.producers {
        let n = |m: &BTreeMap<String, u64>, k: &str| m.get(k).copied().unwrap_or(0).to_string();
        t.add_row(vec![
            p.biz_id.clone(),
            n(&p.by_status, MessageStatus::Prepared.as_str()),
            n(&p.by_status, MessageStatus::VerifyFailed.as_str()),
            n(&p.by_send_status, SendStatus::Pending.as_str()),
            p.scheduled.to_string(),
            n(&p.by_send_status, SendStatus::SendFailed.as_str()),
            p.sent_recently.to_string(),
            p.rolled_back_recently.to_string(),
            age_cell(p.oldest_prepared_age_ms),
            age_cell(p.oldest_pending_send_age_ms),
        ]);
    }
    let text = if v.producers.is_empty() {
        "no live or recently finished messages".to_string()
    } else {
        t.to_string()
    };
    let mut text = text;
    if v.submit_waiting > 0 {
        text.push_str(&format!(
            "\n{} commit(s) submitted through Kafka wait for their prepare \
             (GET /v1/admin/submit/waiting lists them)",
            v.submit_waiting
        ));
    }
    if !v.producers_without_topics.is_empty() {
        text.push_str(&format!(
            "\nwarning: no topic allow-list (may publish to any topic): {}",
            v.producers_without_topics.join(", ")
        ));
    }
    text
}

pub(super) fn messages_table(v: &MessagePage) -> String {
    if v.items.is_empty() {
        return "no message matches".into();
    }
    let mut t = table(&[
        "id",
        "producer",
        "key",
        "topic",
        "status",
        "send",
        "attempts",
        "created",
        "due at",
        "last error",
    ]);
    for m in &v.items {
        t.add_row(vec![
            m.id.to_string(),
            m.biz_id.clone(),
            m.message_key.clone(),
            opt(m.topic.as_deref()),
            m.status.as_str().to_string(),
            status_cell(m.send_status.map(SendStatus::as_str)),
            format!("{}/{}", m.verify_attempts, m.send_attempts),
            time(&m.created_at),
            opt(m.deliver_at.as_ref().map(time)),
            clipped(m.last_error.as_deref()),
        ]);
    }
    with_more(t, v.next_cursor.as_deref())
}

/// A table, and how to get the next page when there is one.
fn with_more(t: Table, next_cursor: Option<&str>) -> String {
    match next_cursor {
        Some(c) => format!("{t}\nmore: --cursor {c}"),
        None => t.to_string(),
    }
}

/// An error as a cell: at most 60 bytes, cut on a character boundary.
fn clipped(e: Option<&str>) -> String {
    let mut err = opt(e);
    if err.len() > 60 {
        let mut end = 60;
        while !err.is_char_boundary(end) {
            end -= 1;
        }
        err.truncate(end);
        err.push('…');
    }
    err
}

pub(super) fn alerts_table(v: &AlertPage) -> String {
    if v.items.is_empty() {
        return "no alert matches".into();
    }
    let mut t = table(&[
        "alert",
        "kind",
        "message",
        "producer",
        "key",
        "group",
        "state",
        "posts",
        "created",
        "last delivery error",
    ]);
    for a in &v.items {
        t.add_row(vec![
            a.alert_id.to_string(),
            a.kind.as_str().to_string(),
            a.message_id.to_string(),
            a.biz_id.clone(),
            a.message_key.clone(),
            opt(a.group.as_deref()),
            a.state.as_str().to_string(),
            a.delivery_attempts.to_string(),
            time(&a.created_at),
            clipped(a.last_delivery_error.as_deref()),
        ]);
    }
    with_more(t, v.next_cursor.as_deref())
}

pub(super) fn outbox_sources_table(v: &OutboxSourceList) -> String {
    if v.items.is_empty() {
        return "this instance relays no outbox source (trustmsg serve --outbox-source \
                BIZ_ID=DATABASE_URL starts one)"
            .into();
    }
    let mut t = table(&[
        "producer",
        "state",
        "pending",
        "oldest pending",
        "failed rows",
        "relayed/s",
        "relayed",
        "failed",
        "errors",
        "last relayed",
        "last error",
    ]);
    for s in &v.items {
        t.add_row(vec![
            s.biz_id.clone(),
            s.state.as_str().to_string(),
            opt(s.pending_rows),
            age_cell(s.oldest_pending_age_ms),
            opt(s.failed_rows),
            format!("{:.1}", s.relayed_per_s),
            s.relayed_total.to_string(),
            s.failed_total.to_string(),
            s.errors_total.to_string(),
            opt(s.last_relayed_at.as_ref().map(time)),
            clipped(
                s.last_error
                    .as_ref()
                    .map(|e| match &s.last_error_at {
                        Some(at) => format!("{}: {e}", time(at)),
                        None => e.clone(),
                    })
                    .as_deref(),
            ),
        ]);
    }
    let mut out = vec![t.to_string()];
    for s in &v.items {
        out.push(format!(
            "{}: table {} in {}{}",
            s.biz_id,
            s.table,
            s.database,
            s.stats_at
                .as_ref()
                .map(|at| format!(", rows counted at {}", time(at)))
                .unwrap_or_default()
        ));
    }
    out.push(
        "as this instance sees them: with several instances, one relays each source and the \
         others stand by; `trustmsg admin outbox-rows BIZ_ID` lists a source's failed rows"
            .into(),
    );
    out.join("\n")
}

pub(super) fn outbox_rows_table(v: &OutboxRowPage) -> String {
    if v.items.is_empty() {
        return "no row matches".into();
    }
    let mut t = table(&[
        "id",
        "key",
        "topic",
        "record key",
        "status",
        "retries",
        "last attempt",
        "created",
        "fail reason",
    ]);
    for r in &v.items {
        t.add_row(vec![
            r.id.to_string(),
            r.message_key.clone(),
            r.topic.clone(),
            opt(r.record_key.as_deref()),
            r.status.as_str().to_string(),
            r.retry_count.to_string(),
            opt(r.last_execute_time.as_ref().map(time)),
            opt(r.created.map(|c| c.format("%Y-%m-%d %H:%M:%S%.3f"))),
            clipped(r.fail_reason.as_deref()),
        ]);
    }
    match v.next_after {
        Some(after) => format!("{t}\nmore: --after {after}"),
        None => t.to_string(),
    }
}

fn outbox_row_line(r: &OutboxRowView) -> String {
    format!(
        "{} (retries: {}), key {}, topic {}",
        r.status.as_str(),
        r.retry_count,
        r.message_key,
        r.topic
    )
}

pub(super) fn outbox_action_line(v: &OutboxActionResult) -> String {
    let done = match v.action {
        OutboxRowAction::Retry => "retried",
        OutboxRowAction::GiveUp => "given up",
    };
    let now = v.row.as_ref().map_or_else(
        || "already relayed and deleted".to_string(),
        outbox_row_line,
    );
    format!(
        "outbox row {} of {}: {done} by {}; now {now}",
        v.id, v.biz_id, v.actor
    )
}

pub(super) fn view_line(m: &MessageView) -> String {
    format!(
        "message {}: {} / {} ({} {})",
        m.id,
        m.status.as_str(),
        status_cell(m.send_status.map(SendStatus::as_str)),
        m.biz_id,
        m.message_key
    )
}

pub(super) fn message_detail(d: &MessageDetail) -> String {
    let m = &d.message;
    let mut out = vec![view_line(m)];
    for (k, v) in [
        ("topic", opt(m.topic.as_deref())),
        ("key", opt(m.key.as_deref())),
        ("check-back attempts", m.verify_attempts.to_string()),
        ("send attempts", m.send_attempts.to_string()),
        ("last error", opt(m.last_error.as_deref())),
        ("created", time(&m.created_at)),
        ("decided", opt(m.decided_at.as_ref().map(time))),
        ("due at", opt(m.deliver_at.as_ref().map(time))),
        ("sent", opt(m.sent_at.as_ref().map(time))),
        ("partition", opt(m.kafka_partition)),
        ("offset", opt(m.kafka_offset)),
        ("trace id", opt(m.trace_id.as_deref())),
    ] {
        out.push(format!("{k:>20}: {v}"));
    }
    if let Some(seq) = m.order_seq {
        out.push(format!("{:>20}: {seq}", "place in its key"));
    }
    if let Some(head) = d.blocked_by {
        out.push(format!(
            "{:>20}: message {head} (sent only after it is SENT or skipped)",
            "blocked by"
        ));
    }
    let encoding = match d.payload_encoding {
        PayloadEncoding::Utf8 => "utf8",
        PayloadEncoding::Base64 => "base64",
    };
    out.push(format!("{:>20}: ({encoding}) {}", "payload", d.payload));
    for (k, v) in &d.headers {
        out.push(format!("{:>20}: {k}: {v}", "header"));
    }
    let mut audit = table(&["at", "actor", "action", "status", "send", "reason"]);
    for a in &d.audit {
        audit.add_row(vec![
            time(&a.at),
            a.actor.clone(),
            a.action.clone(),
            format!(
                "{} → {}",
                opt(a.from_status.as_deref()),
                opt(a.to_status.as_deref())
            ),
            format!(
                "{} → {}",
                opt(a.from_send_status.as_deref()),
                opt(a.to_send_status.as_deref())
            ),
            a.reason.clone(),
        ]);
    }
    out.push(format!("audit trail:\n{audit}"));
    if !d.check_attempts.is_empty() {
        let mut t = table(&["#", "at", "took", "http", "outcome", "error"]);
        for c in &d.check_attempts {
            t.add_row(vec![
                c.attempt.to_string(),
                time(&c.at),
                format!("{} ms", c.duration_ms),
                opt(c.http_status),
                c.outcome.clone(),
                opt(c.error.as_deref()),
            ]);
        }
        out.push(format!("check-back calls:\n{t}"));
    }
    if d.consumptions.is_empty() {
        out.push("consumptions: none recorded".into());
    } else {
        let mut t = table(&[
            "group",
            "state",
            "attempts",
            "first began",
            "last began",
            "finished",
            "last error",
        ]);
        for c in &d.consumptions {
            t.add_row(vec![
                c.group.clone(),
                c.state.as_str().to_string(),
                c.attempts.to_string(),
                time(&c.first_began_at),
                time(&c.last_began_at),
                opt(c.finished_at.as_ref().map(time)),
                opt(c.last_error.as_deref()),
            ]);
        }
        out.push(format!("consumptions:\n{t}"));
    }
    out.join("\n")
}

pub(super) fn groups_table(v: &ConsumerGroupStatsList) -> String {
    if v.items.is_empty() {
        return "no consumer group is registered".into();
    }
    let mut t = table(&[
        "group",
        "topics",
        "processed",
        "failing",
        "in progress",
        "lag",
    ]);
    for g in &v.items {
        t.add_row(vec![
            g.group.clone(),
            g.topics.join(", "),
            g.processed.to_string(),
            g.failing.to_string(),
            g.in_progress.to_string(),
            g.lag.to_string(),
        ]);
    }
    format!(
        "{t}
as of {}",
        time(&v.at)
    )
}

pub(super) fn group_detail(g: &ConsumerGroupView) -> String {
    let mut out = vec![format!("consumer group {}", g.group)];
    for (k, v) in [
        ("topics", g.topics.join(", ")),
        ("max failures", g.max_failures.to_string()),
        ("hold ms", g.in_progress_timeout_ms.to_string()),
        ("registered", time(&g.created_at)),
    ] {
        out.push(format!("{k:>16}: {v}"));
    }
    if let Some(token) = &g.token {
        out.push(format!(
            "{:>16}: {token}   (shown once: store it now)",
            "token"
        ));
    }
    out.join("\n")
}

pub(super) fn producers_table(v: &ProducerList) -> String {
    if v.items.is_empty() {
        return "no producer is registered".into();
    }
    let mut t = table(&[
        "producer",
        "topics",
        "check-back url",
        "timeout",
        "first check",
        "max attempts",
    ]);
    for p in &v.items {
        t.add_row(vec![
            p.biz_id.clone(),
            topics_cell(p),
            p.verify_url.clone(),
            format!("{} ms", p.verify_timeout_ms),
            format!("{} ms", p.first_verify_after_ms),
            p.max_verify_attempts.to_string(),
        ]);
    }
    let unlisted = v.items.iter().filter(|p| p.topics_missing).count();
    if unlisted > 0 {
        format!(
            "{t}\nwarning: {unlisted} producer(s) without a topic allow-list may publish to any \
             topic; give each one with `trustmsg admin producers put <biz_id> … --topics …`"
        )
    } else {
        t.to_string()
    }
}

/// A registration's allow-list as a cell; a missing one says so loudly.
fn topics_cell(p: &ProducerView) -> String {
    match &p.topics {
        Some(list) => list.join(", "),
        None => "ANY (no allow-list)".into(),
    }
}

pub(super) fn producer_detail(p: &ProducerView) -> String {
    let mut out = vec![format!("producer {}", p.biz_id)];
    for (k, v) in [
        ("check-back url", p.verify_url.clone()),
        ("timeout ms", p.verify_timeout_ms.to_string()),
        ("first check ms", p.first_verify_after_ms.to_string()),
        ("max attempts", p.max_verify_attempts.to_string()),
        ("topics", topics_cell(p)),
        (
            "ordered",
            if p.ordered {
                "yes (in order per key)"
            } else {
                "no"
            }
            .to_string(),
        ),
    ] {
        out.push(format!("{k:>16}: {v}"));
    }
    if p.topics_missing {
        out.push(format!(
            "{:>16}: no topic allow-list: this producer may publish to any topic \
             (set one with --topics)",
            "warning"
        ));
    }
    if let Some(secret) = &p.signing_secret {
        out.push(format!("{:>16}: {secret}", "signing secret"));
    }
    if let Some(token) = &p.token {
        out.push(format!(
            "{:>16}: {token}   (shown once: store it now)",
            "token"
        ));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_a_person_would_write_them() {
        assert_eq!(age(0), "0s");
        assert_eq!(age(59_999), "59s");
        assert_eq!(age(192_000), "3m12s");
        assert_eq!(age(7_500_000), "2h5m");
        assert_eq!(age(360_000_000), "4d4h");
    }
}
