//! The backlog in `/metrics`: how many messages wait for a decision or a
//! send, and how long the oldest of them have waited.
//!
//! Read by one grouped query over the waiting states on an interval
//! (`--backlog-interval`), not per scrape, so a scraper hitting every
//! instance often costs the database nothing more. The query touches only
//! the waiting ranges of the status index, never the (growing) final rows.
//!
//! Gauges: `trustmsg_backlog_messages{status, send_status}` for PREPARED,
//! VERIFY_FAILED, COMMITTED/PENDING and COMMITTED/SEND_FAILED (0 when there
//! are none), `trustmsg_backlog_oldest_prepared_seconds` and
//! `trustmsg_backlog_oldest_pending_send_seconds` (0 when nothing waits);
//! a committed message waiting for its `deliver_at` is not backlog: it is
//! counted in `trustmsg_messages_scheduled` instead, and once due its wait
//! is counted from `deliver_at`;
//! `trustmsg_alerts_undelivered` and `trustmsg_alerts_oldest_undelivered_seconds`
//! for the alert outbox's pending alerts (a count over the state index).
//! Each reading of PREPARED and PENDING is also the sample of the flow's
//! backlog for its minute (`crate::workers::flow`).

use chrono::{DateTime, Utc};

use crate::store::{Backlog, BacklogSample};
use crate::workers::flow;
use crate::workers::periodic;

/// The waiting states, as (status, send_status) labels.
const WAITING: [(&str, &str); 4] = [
    ("PREPARED", ""),
    ("VERIFY_FAILED", ""),
    ("COMMITTED", "PENDING"),
    ("COMMITTED", "SEND_FAILED"),
];

/// The gauges, read every `--backlog-interval` ([`periodic::gauges`]).
pub(crate) const GAUGES: periodic::Gauges<Backlog> = periodic::Gauges {
    what: "read the backlog",
    read: |s| s.backlog(),
    publish,
};

fn publish(b: Backlog) {
    let count = |status: &str, send: &str| {
        b.counts
            .iter()
            .find(|(s, ss, _)| s == status && ss.as_deref().unwrap_or("") == send)
            .map_or(0, |(_, _, n)| *n)
    };
    flow::sample_backlog(BacklogSample {
        at: b.at,
        prepared: count("PREPARED", ""),
        pending: count("COMMITTED", "PENDING"),
    });
    for (status, send) in WAITING {
        let n = count(status, send);
        metrics::gauge!("trustmsg_backlog_messages", "status" => status, "send_status" => send)
            .set(n as f64);
    }
    let age = |t: Option<DateTime<Utc>>| {
        t.map_or(0.0, |t| {
            ((b.at - t).num_milliseconds().max(0) as f64) / 1000.0
        })
    };
    metrics::gauge!("trustmsg_backlog_oldest_prepared_seconds").set(age(b.oldest_prepared_at));
    metrics::gauge!("trustmsg_backlog_oldest_pending_send_seconds")
        .set(age(b.oldest_pending_send_at));
    metrics::gauge!("trustmsg_messages_scheduled").set(b.scheduled as f64);
    metrics::gauge!("trustmsg_alerts_undelivered").set(b.pending_alerts as f64);
    metrics::gauge!("trustmsg_submit_waiting").set(b.waiting_commits as f64);
    metrics::gauge!("trustmsg_alerts_oldest_undelivered_seconds")
        .set(age(b.oldest_pending_alert_at));
}
