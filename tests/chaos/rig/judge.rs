//! The verdict: once every message has settled, what the producers were
//! told against what the database holds, what reached Kafka and what
//! reached the webhook.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use trustmsg_tests::deciders;
use trustmsg_tests::kafka::Consumed;

use super::{Fault, Rig, SHOP};
use crate::alerts::{self, Delivered};
use crate::ledger::{Fate, Ledger, Local, Report};
use crate::load::payload;

impl Rig {
    /// Waits until every message has reached its end (nothing PREPARED,
    /// nothing PENDING), reads what reached Kafka and the webhook, and
    /// judges it against the producers' ledger.
    pub(crate) async fn settle_and_judge(
        &mut self,
        ledger: &Ledger,
        windows: &[(Fault, Instant, Instant)],
    ) -> Report {
        let settle = Instant::now();
        let pool = self.pool.clone();
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let waiting = pool.waiting().await.unwrap();
            let unrelayed = self
                .outbox_rows()
                .await
                .unwrap()
                .values()
                .filter(|s| **s == 0)
                .count() as i64;
            let waiting = waiting + unrelayed;
            if waiting == 0 {
                break;
            }
            if Instant::now() > deadline {
                eprintln!("chaos: {waiting} messages still waiting after 180 s");
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        // Stragglers (a paused instance's late resend) have time to show.
        self.reader.read_for(Duration::from_secs(3)).await;
        let settled = settle.elapsed();
        // Whatever the consumers missed: the topic read afresh.
        self.read_afresh();
        let mut count = usize::MAX;
        while self.reader.poll().len() != count {
            count = self.reader.records.len();
            self.reader.read_for(Duration::from_secs(2)).await;
        }
        let before = self.seen.len();
        self.take_in();
        eprintln!(
            "chaos: the topic holds {} records; {} were first read only by the last consumer",
            self.seen.len(),
            self.seen.len() - before
        );

        let rows: HashMap<String, (u64, String, Option<String>)> = pool
            .rows()
            .await
            .unwrap()
            .into_iter()
            .map(|(k, id, st, ss)| (k, (id, st, ss)))
            .collect();
        let decided_by = deciders(&self.db.url("chaos"), SHOP).await;
        let source = self
            .outbox_rows()
            .await
            .expect("read the outbox shop's table");
        let owed = alerts::owed(&pool, u64::MAX)
            .await
            .expect("read the audit log");

        let mut report = Report::default();
        for (fault, _, _) in windows {
            report.count_fault(*fault);
        }
        report.records = self.seen.len();
        let mut by_id: BTreeMap<u64, Vec<&Consumed>> = BTreeMap::new();
        for r in self.seen.values() {
            by_id.entry(r.message_id).or_default().push(r);
        }
        let messages = ledger.messages();
        let mut known = HashSet::new();
        for (key, (id, fate)) in &messages {
            if fate.is_outbox() {
                self.judge_outbox_row(key, *fate, &source, &rows, &by_id, &mut known, &mut report);
                continue;
            }
            known.insert(*id);
            report.prepared += 1;
            match fate {
                Fate::AckedCommit => report.acked_commits += 1,
                Fate::AckedRollback => report.acked_rollbacks += 1,
                Fate::NeverDecided(Local::Committed) => report.check_back_commits += 1,
                Fate::NeverDecided(Local::RolledBack) => report.check_back_rollbacks += 1,
                Fate::Unverifiable => report.unverifiable += 1,
                Fate::OutboxCommitted | Fate::OutboxRolledBack | Fate::OutboxAmbiguous => {
                    unreachable!("judged above")
                }
            }
            if matches!(fate, Fate::AckedCommit | Fate::AckedRollback) {
                let actors = decided_by.get(id).map_or(&[][..], Vec::as_slice);
                let own = actors == [format!("producer:{SHOP}")];
                let first = actors == ["verifier"] && ledger.checked_before_ack(key);
                if first {
                    report.check_back_first += 1;
                } else if !own {
                    report.not_own.push(format!("{key}: decided by {actors:?}"));
                }
            }
            let got = by_id.get(id).map_or(&[][..], Vec::as_slice);
            if fate.must_deliver() {
                judge_delivery(&mut report, key, self.lost_by_broker.contains(id), got);
            } else if !got.is_empty() {
                report.wrong.push(key.clone());
            }
            let (status, send) = rows
                .get(key)
                .map(|(_, st, ss)| (st.as_str(), ss.as_deref()))
                .unwrap_or(("MISSING", None));
            let expected: (&str, Option<&str>) = match fate {
                f if f.must_deliver() => ("COMMITTED", Some("SENT")),
                Fate::Unverifiable => ("VERIFY_FAILED", None),
                _ => ("ROLLED_BACK", None),
            };
            if (status, send) != expected {
                report
                    .undecided
                    .push(format!("{key}: {status}/{send:?}, expected {expected:?}"));
            }
        }
        let delivered = Delivered::sort(&self.alerts.alerts());
        report.judge_alerts(&owed, &delivered);
        for (id, got) in &by_id {
            report.duplicates += got.len().saturating_sub(1);
            if !known.contains(id) {
                report.wrong.push(format!("unknown message id {id}"));
            }
            for r in got.iter().skip(1) {
                let fault = windows
                    .iter()
                    .find(|(_, from, to)| (*from..=*to).contains(&r.at))
                    .map_or("between faults".to_string(), |(f, _, _)| format!("{f:?}"));
                *report.duplicates_by_fault.entry(fault).or_default() += 1;
            }
        }
        report.verify_failed = rows
            .values()
            .filter(|(_, st, _)| st == "VERIFY_FAILED")
            .count();
        report.send_failed = rows
            .values()
            .filter(|(_, _, ss)| ss.as_deref() == Some("SEND_FAILED"))
            .count();
        report.alert_log_lines = self
            .logs
            .iter()
            .map(|p| {
                std::fs::read_to_string(p)
                    .unwrap_or_default()
                    .lines()
                    .filter(|l| l.contains("ALERT: message needs an operator"))
                    .count()
            })
            .sum();
        report.settle = settled;
        report
    }

    /// One row of the outbox shop: what its writer was told (or, for an
    /// ambiguous COMMIT, what the source table says) against what trustmsg
    /// holds and what reached Kafka. A committed row must be relayed (2),
    /// one COMMITTED and SENT message, its record byte for byte; a row that
    /// never committed must exist nowhere.
    #[allow(clippy::too_many_arguments)]
    fn judge_outbox_row(
        &self,
        key: &str,
        fate: Fate,
        source: &HashMap<String, i64>,
        rows: &HashMap<String, (u64, String, Option<String>)>,
        by_id: &BTreeMap<u64, Vec<&Consumed>>,
        known: &mut HashSet<u64>,
        report: &mut Report,
    ) {
        let in_source = source.get(key).copied();
        let committed = match fate {
            Fate::OutboxCommitted => {
                report.outbox_committed += 1;
                if in_source.is_none() {
                    report
                        .lost
                        .push(format!("{key}: its COMMIT was acknowledged, yet no row"));
                    return;
                }
                true
            }
            Fate::OutboxAmbiguous => {
                report.outbox_ambiguous += 1;
                report.outbox_ambiguous_committed += usize::from(in_source.is_some());
                in_source.is_some()
            }
            _ => {
                report.outbox_rolled_back += 1;
                false
            }
        };
        let message = rows.get(key);
        if let Some((id, _, _)) = message {
            known.insert(*id);
        }
        let got = message
            .and_then(|(id, _, _)| by_id.get(id))
            .map_or(&[][..], Vec::as_slice);
        if !committed {
            if in_source.is_some() || message.is_some() || !got.is_empty() {
                report
                    .wrong
                    .push(format!("{key}: never committed, yet relayed or consumed"));
            }
            return;
        }
        let lost_by_broker = message.is_some_and(|(id, _, _)| self.lost_by_broker.contains(id));
        judge_delivery(report, key, lost_by_broker, got);
        let state = message.map(|(_, st, ss)| (st.as_str(), ss.as_deref()));
        if state != Some(("COMMITTED", Some("SENT"))) || in_source != Some(2) {
            report.undecided.push(format!(
                "{key}: {state:?}, source row {in_source:?}, expected COMMITTED/SENT and 2"
            ));
        }
    }
}

/// `key`'s message, which must be delivered, reached Kafka as `got`: lost
/// (by the broker, when `lost_by_broker`) if nothing did, else delivered;
/// and each record corrupted unless its payload and key are `key`'s.
fn judge_delivery(report: &mut Report, key: &str, lost_by_broker: bool, got: &[&Consumed]) {
    if got.is_empty() && lost_by_broker {
        report.lost_by_broker.push(key.to_string());
    } else if got.is_empty() {
        report.lost.push(key.to_string());
    } else {
        report.delivered += 1;
    }
    for r in got {
        let payload_ok = r.payload.as_deref() == Some(payload(key).as_bytes());
        let key_ok = r.key.as_deref() == Some(key.as_bytes());
        if !(payload_ok && key_ok) {
            report.corrupted.push(key.to_string());
        }
    }
}
