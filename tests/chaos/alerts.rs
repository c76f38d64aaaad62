//! Which alerts are owed and which arrived. Every entry into VERIFY_FAILED
//! or SEND_FAILED is an audit row, and owes one alert of its kind; the
//! webhook may receive an alert more than once (delivery is at least once:
//! an instance that dies after the webhook answered and before it marked the
//! alert delivered sends it again), so what counts is the distinct alert
//! ids per message and kind, and a repeat of an id is only counted.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use crate::sql::Pool;

/// The alert kinds a failed message owes, by the audit row's new state.
pub(crate) const VERIFY_FAILED: &str = "verify_failed";
pub(crate) const SEND_FAILED: &str = "send_failed";

/// (message id, alert kind).
pub(crate) type Failure = (u64, &'static str);

/// Entries into VERIFY_FAILED / SEND_FAILED of messages with ids up to
/// `up_to`, counted per message and kind.
pub(crate) async fn owed(pool: &Pool, up_to: u64) -> sqlx::Result<HashMap<Failure, usize>> {
    let rows = pool.failures(up_to).await?;
    let mut owed = HashMap::new();
    for (id, status, send) in rows {
        let kind = if status.as_deref() == Some("VERIFY_FAILED") {
            VERIFY_FAILED
        } else if send.as_deref() == Some("SEND_FAILED") {
            SEND_FAILED
        } else {
            continue;
        };
        *owed.entry((id, kind)).or_default() += 1;
    }
    Ok(owed)
}

/// What reached the webhook, sorted out.
#[derive(Debug, Default)]
pub(crate) struct Delivered {
    /// Distinct alert ids per message and failure kind.
    pub(crate) ids: HashMap<Failure, HashSet<String>>,
    /// Deliveries of a failure kind, repeats included.
    pub(crate) deliveries: usize,
    /// Alerts of the other kinds (quarantined, overdue), by kind.
    pub(crate) other: BTreeMap<String, usize>,
    /// Alerts without an `alert_id`, which a receiver cannot de-duplicate,
    /// or whose `trustmsg-alert-id` header names another.
    pub(crate) unidentified: usize,
}

impl Delivered {
    pub(crate) fn sort(alerts: &[Value]) -> Self {
        let mut d = Self::default();
        for a in alerts {
            let id = a["message_id"]
                .as_u64()
                .expect("an alert names its message");
            let kind = match a["kind"].as_str() {
                Some(VERIFY_FAILED) => VERIFY_FAILED,
                Some(SEND_FAILED) => SEND_FAILED,
                other => {
                    *d.other.entry(format!("{other:?}")).or_default() += 1;
                    continue;
                }
            };
            let header = a["header_alert_id"].as_str();
            if a["alert_id"].is_null() || header != Some(a["alert_id"].to_string().as_str()) {
                d.unidentified += 1;
            }
            d.deliveries += 1;
            d.ids
                .entry((id, kind))
                .or_default()
                .insert(a["alert_id"].to_string());
        }
        d
    }

    /// Distinct ids delivered for one failure.
    pub(crate) fn distinct(&self, failure: &Failure) -> usize {
        self.ids.get(failure).map_or(0, HashSet::len)
    }

    /// Whether every owed alert arrived (at least one distinct id per entry).
    pub(crate) fn covers(&self, owed: &HashMap<Failure, usize>) -> bool {
        owed.iter().all(|(f, n)| self.distinct(f) >= *n)
    }
}
