//! What the producers did and were told (their side of the ledger), and
//! the verdict once everything has settled.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::alerts::{self, Delivered, Failure};
use crate::recovery::CAP;
use crate::rig::Fault;

/// What a producer's local transaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Local {
    Committed,
    RolledBack,
}

/// How a producer left a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Commit called and acknowledged (200, COMMITTED).
    AckedCommit,
    /// Rollback called and acknowledged (200, ROLLED_BACK).
    AckedRollback,
    /// The local transaction finished, but the producer never called
    /// (crashed, in effect): check-back must find out which way.
    NeverDecided(Local),
    /// The producer whose check endpoint always fails: must end
    /// VERIFY_FAILED with one alert, never in Kafka.
    Unverifiable,
    /// A row of the local message table whose transaction's COMMIT was
    /// acknowledged: must be relayed and reach Kafka.
    OutboxCommitted,
    /// A row of the local message table whose transaction rolled back or
    /// never reached its COMMIT: must exist nowhere.
    OutboxRolledBack,
    /// A row whose COMMIT failed or timed out (the database killed or
    /// frozen under it): the source table tells, once the database is back,
    /// whether it committed, and it must then be delivered, or not.
    OutboxAmbiguous,
}

impl Fate {
    /// A row of the local message table: its message id is known only once
    /// it is relayed, so recovery leaves it to the verdict.
    pub(crate) fn is_outbox(self) -> bool {
        matches!(
            self,
            Fate::OutboxCommitted | Fate::OutboxRolledBack | Fate::OutboxAmbiguous
        )
    }

    /// Whether the message must reach Kafka.
    pub(crate) fn must_deliver(self) -> bool {
        matches!(
            self,
            Fate::AckedCommit | Fate::NeverDecided(Local::Committed) | Fate::OutboxCommitted
        )
    }
}

/// The producers' records: per message key, its id, its local outcome (what
/// the check endpoint answers) and its fate; when the producer was told its
/// decision, and when check-back first had an answer.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    local: Mutex<HashMap<String, Local>>,
    messages: Mutex<BTreeMap<String, (u64, Fate)>>,
    acked: Mutex<HashMap<String, Instant>>,
    checked: Mutex<HashMap<String, Instant>>,
}

impl Ledger {
    /// The local transaction of `key` finished this way (before any call).
    pub(crate) fn local_done(&self, key: &str, outcome: Local) {
        self.local.lock().unwrap().insert(key.to_string(), outcome);
    }

    /// What the producer's check endpoint answers for `key`: None while its
    /// local transaction has not finished. The first answer's time is kept.
    pub(crate) fn answer_check(&self, key: &str) -> Option<Local> {
        let local = self.local.lock().unwrap().get(key).copied();
        if local.is_some() {
            self.checked
                .lock()
                .unwrap()
                .entry(key.to_string())
                .or_insert_with(Instant::now);
        }
        local
    }

    /// `key` (message `id`) ended this way for its producer; for an
    /// acknowledged decision, the producer was told it now.
    pub(crate) fn record(&self, key: &str, id: u64, fate: Fate) {
        if matches!(fate, Fate::AckedCommit | Fate::AckedRollback) {
            self.acked
                .lock()
                .unwrap()
                .insert(key.to_string(), Instant::now());
        }
        self.messages
            .lock()
            .unwrap()
            .insert(key.to_string(), (id, fate));
    }

    /// Whether check-back had an answer for `key` before its producer was
    /// told its decision: only then may check-back have decided an
    /// acknowledged message (it came first, and the producer's call found
    /// the decision made). Check-back deciding after the acknowledgement
    /// means the acknowledged decision was lost.
    pub(crate) fn checked_before_ack(&self, key: &str) -> bool {
        let checked = self.checked.lock().unwrap().get(key).copied();
        let acked = self.acked.lock().unwrap().get(key).copied();
        matches!((checked, acked), (Some(c), Some(a)) if c < a)
    }

    /// Every message, by key.
    pub(crate) fn messages(&self) -> BTreeMap<String, (u64, Fate)> {
        self.messages.lock().unwrap().clone()
    }
}

/// The verdict.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) per_fault: BTreeMap<String, usize>,
    pub(crate) prepared: usize,
    pub(crate) acked_commits: usize,
    pub(crate) acked_rollbacks: usize,
    pub(crate) check_back_commits: usize,
    /// Acknowledged decisions check-back made first (it asked before the
    /// producer's call was answered).
    pub(crate) check_back_first: usize,
    /// Acknowledged decisions on record as check-back's (or anyone's but
    /// the producer's) although it asked only after the acknowledgement:
    /// the producer's decision was lost.
    pub(crate) not_own: Vec<String>,
    pub(crate) check_back_rollbacks: usize,
    pub(crate) unverifiable: usize,
    /// Local message table rows: committed, rolled back, and those whose
    /// COMMIT was ambiguous (how many of those had committed).
    pub(crate) outbox_committed: usize,
    pub(crate) outbox_rolled_back: usize,
    pub(crate) outbox_ambiguous: usize,
    pub(crate) outbox_ambiguous_committed: usize,
    pub(crate) delivered: usize,
    pub(crate) records: usize,
    pub(crate) lost: Vec<String>,
    /// Acknowledged by a broker that lost them with its state, unread.
    pub(crate) lost_by_broker: Vec<String>,
    pub(crate) wrong: Vec<String>,
    pub(crate) corrupted: Vec<String>,
    pub(crate) undecided: Vec<String>,
    pub(crate) duplicates: usize,
    pub(crate) duplicates_by_fault: BTreeMap<String, usize>,
    /// Rows VERIFY_FAILED / SEND_FAILED at the end.
    pub(crate) verify_failed: usize,
    pub(crate) send_failed: usize,
    /// Entries into VERIFY_FAILED / SEND_FAILED (audit rows): the alerts owed.
    pub(crate) owed_verify_failed: usize,
    pub(crate) owed_send_failed: usize,
    pub(crate) alert_deliveries: usize,
    pub(crate) alert_ids: usize,
    pub(crate) alerts_unidentified: usize,
    pub(crate) other_alerts: BTreeMap<String, usize>,
    pub(crate) alert_log_lines: usize,
    /// Failures with fewer distinct alert ids delivered than entries.
    pub(crate) alerts_lost: Vec<String>,
    /// Failures with more distinct alert ids than entries, or alerts for
    /// no failure at all.
    pub(crate) alerts_extra: Vec<String>,
    pub(crate) settle: Duration,
    /// Per fault kind, each cycle's time to full recovery (None: not
    /// within the cap).
    pub(crate) recovery: BTreeMap<Fault, Vec<Option<Duration>>>,
}

impl Report {
    pub(crate) fn count_fault(&mut self, fault: Fault) {
        *self.per_fault.entry(format!("{fault:?}")).or_default() += 1;
    }

    /// Every owed alert delivered under exactly one distinct id (repeats of
    /// that id are only counted), none for a failure that did not happen.
    pub(crate) fn judge_alerts(&mut self, owed: &HashMap<Failure, usize>, delivered: &Delivered) {
        for ((id, kind), n) in owed {
            match kind {
                &alerts::VERIFY_FAILED => self.owed_verify_failed += n,
                _ => self.owed_send_failed += n,
            }
            let got = delivered.distinct(&(*id, kind));
            if got < *n {
                self.alerts_lost.push(format!(
                    "message {id} {kind}: {got} alert ids for {n} failures"
                ));
            } else if got > *n {
                self.alerts_extra.push(format!(
                    "message {id} {kind}: {got} alert ids for {n} failures"
                ));
            }
        }
        for (id, kind) in delivered.ids.keys() {
            if !owed.contains_key(&(*id, kind)) {
                self.alerts_extra
                    .push(format!("message {id} {kind}: alerted, never failed"));
            }
        }
        self.alert_deliveries = delivered.deliveries;
        self.alert_ids = delivered.ids.values().map(|ids| ids.len()).sum();
        self.alerts_unidentified = delivered.unidentified;
        self.other_alerts = delivered.other.clone();
    }

    /// Per fault kind: cycles, p50 and max of the time to full recovery,
    /// and the cycles that did not recover within the cap.
    fn recovery_rows(&self) -> Vec<[String; 5]> {
        self.recovery
            .iter()
            .map(|(fault, times)| {
                let mut ok: Vec<Duration> = times.iter().flatten().copied().collect();
                ok.sort();
                let at = |q: f64| {
                    ok.get(((ok.len() as f64 - 1.0) * q).round() as usize)
                        .map_or("–".to_string(), |d| format!("{:.1} s", d.as_secs_f64()))
                };
                [
                    format!("{fault:?}"),
                    times.len().to_string(),
                    at(0.5),
                    at(1.0),
                    (times.len() - ok.len()).to_string(),
                ]
            })
            .collect()
    }

    fn rows(&self, cycles: usize, faults_took: Duration) -> Vec<(String, String)> {
        let per_fault = self
            .per_fault
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let dups = if self.duplicates_by_fault.is_empty() {
            "none".to_string()
        } else {
            self.duplicates_by_fault
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        vec![
            (
                "fault cycles".into(),
                format!("{cycles} in {faults_took:.0?}"),
            ),
            ("cycles per fault kind".into(), per_fault),
            ("messages prepared".into(), self.prepared.to_string()),
            (
                "commits acknowledged".into(),
                self.acked_commits.to_string(),
            ),
            (
                "rollbacks acknowledged".into(),
                self.acked_rollbacks.to_string(),
            ),
            (
                "never decided by the producer: committed / rolled back by check-back".into(),
                format!(
                    "{} / {}",
                    self.check_back_commits, self.check_back_rollbacks
                ),
            ),
            (
                "acknowledged decisions check-back made first (asked before the answer)".into(),
                self.check_back_first.to_string(),
            ),
            (
                "**acknowledged, yet re-decided by check-back afterwards**".into(),
                self.not_own.len().to_string(),
            ),
            (
                "check endpoint never answers (must end VERIFY_FAILED)".into(),
                self.unverifiable.to_string(),
            ),
            (
                "local message table rows: committed / rolled back / COMMIT ambiguous (of which committed)".into(),
                format!(
                    "{} / {} / {} ({})",
                    self.outbox_committed,
                    self.outbox_rolled_back,
                    self.outbox_ambiguous,
                    self.outbox_ambiguous_committed
                ),
            ),
            (
                "must be delivered / delivered".into(),
                format!(
                    "{} / {}",
                    self.acked_commits
                        + self.check_back_commits
                        + self.outbox_committed
                        + self.outbox_ambiguous_committed,
                    self.delivered
                ),
            ),
            ("records consumed".into(), self.records.to_string()),
            ("**lost**".into(), self.lost.len().to_string()),
            (
                "acknowledged by Kafka, then lost with the broker's state before anyone read them (Kafka's loss)".into(),
                self.lost_by_broker.len().to_string(),
            ),
            (
                "**wrong** (rolled back or never committed, yet consumed)".into(),
                self.wrong.len().to_string(),
            ),
            (
                "records whose payload or key differ".into(),
                self.corrupted.len().to_string(),
            ),
            (
                "messages left undecided or unsent".into(),
                self.undecided.len().to_string(),
            ),
            (
                "duplicates (records beyond the first)".into(),
                self.duplicates.to_string(),
            ),
            ("duplicates by the fault of their window".into(), dups),
            (
                "entries into VERIFY_FAILED / SEND_FAILED (alerts owed)".into(),
                format!("{} / {}", self.owed_verify_failed, self.owed_send_failed),
            ),
            (
                "VERIFY_FAILED / SEND_FAILED at the end (SEND_FAILED redelivered)".into(),
                format!("{} / {}", self.verify_failed, self.send_failed),
            ),
            (
                "alert deliveries / distinct alert ids / ALERT log lines".into(),
                format!(
                    "{} / {} / {}",
                    self.alert_deliveries, self.alert_ids, self.alert_log_lines
                ),
            ),
            ("**alerts lost**".into(), self.alerts_lost.len().to_string()),
            (
                "failures with more than one alert id, or alerts for none".into(),
                self.alerts_extra.len().to_string(),
            ),
            (
                "alerts without an alert id, or whose header names another".into(),
                self.alerts_unidentified.to_string(),
            ),
            (
                "alerts of other kinds".into(),
                if self.other_alerts.is_empty() {
                    "none".to_string()
                } else {
                    format!("{:?}", self.other_alerts)
                },
            ),
            (
                "time to settle after the last fault".into(),
                format!("{:.1?}", self.settle),
            ),
        ]
    }

    pub(crate) fn markdown(&self, cycles: usize, faults_took: Duration) -> String {
        let mut out = String::from("| figure | value |\n| --- | --- |\n");
        for (k, v) in self.rows(cycles, faults_took) {
            out.push_str(&format!("| {k} | {v} |\n"));
        }
        out.push_str(&format!(
            "\nTime from the fault's end to full recovery (cap {} s):\n\n\
             | fault | cycles | p50 | max | not recovered |\n| --- | --- | --- | --- | --- |\n",
            CAP.as_secs()
        ));
        for row in self.recovery_rows() {
            out.push_str(&format!("| {} |\n", row.join(" | ")));
        }
        out
    }

    pub(crate) fn print(&self, cycles: usize, faults_took: Duration) {
        eprintln!("\n{}", self.markdown(cycles, faults_took));
        for (what, keys) in [
            ("lost", &self.lost),
            ("wrong", &self.wrong),
            ("corrupted", &self.corrupted),
            ("undecided", &self.undecided),
            ("not the producer's own decision", &self.not_own),
            ("alerts lost", &self.alerts_lost),
            ("alerts extra", &self.alerts_extra),
        ] {
            if !keys.is_empty() {
                eprintln!("{what}: {:?}", &keys[..keys.len().min(20)]);
            }
        }
    }

    pub(crate) fn assert_holds(&self) {
        assert!(self.lost.is_empty(), "lost: {:?}", self.lost);
        assert!(self.wrong.is_empty(), "wrongly published: {:?}", self.wrong);
        assert!(self.corrupted.is_empty(), "corrupted: {:?}", self.corrupted);
        assert!(self.undecided.is_empty(), "undecided: {:?}", self.undecided);
        assert!(
            self.not_own.is_empty(),
            "acknowledged, yet not on record as the producer's decision: {:?}",
            self.not_own
        );
        assert!(
            self.alerts_lost.is_empty(),
            "alerts lost: {:?}",
            self.alerts_lost
        );
        assert!(
            self.alerts_extra.is_empty(),
            "alerts beyond one id per failure: {:?}",
            self.alerts_extra
        );
        assert_eq!(
            self.alerts_unidentified, 0,
            "alerts without an alert id, or whose header names another"
        );
        let unrecovered: Vec<_> = self
            .recovery
            .iter()
            .filter(|(_, t)| t.iter().any(Option::is_none))
            .map(|(f, _)| f)
            .collect();
        assert!(
            unrecovered.is_empty(),
            "cycles not recovered within {CAP:?}: {unrecovered:?}"
        );
        assert!(self.prepared > 0 && self.delivered > 0, "the load ran");
    }
}
