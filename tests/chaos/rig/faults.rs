//! The faults: what each does to the rig, and when it is over.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::json;
use trustmsg_tests::kafka::{RDKafkaApiKey, RDKafkaRespErr};
use trustmsg_tests::{ServiceProcess, ADMIN_TOKEN};

use super::endpoints::{ERROR_500, GARBAGE, HANG, NORMAL};
use super::{Rig, INSTANCES};
use crate::ledger::{Ledger, Local};
use crate::load;
use crate::procnet;

/// `--kafka-message-timeout` of the rig: an outage longer than this
/// outlives every send in flight.
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a `PauseInstance` keeps an instance stopped: past every claim
/// it may hold, so it comes back a zombie writer. The longest is a
/// check-back claim of the hold producer (its 2 s timeout plus the default
/// 5 s `--verify-lease-margin`); a send claim lasts `--send-lease` (4 s).
const PAUSE: Duration = Duration::from_secs(8);

/// Messages left to check-back in a `KillDuringCheckBack` burst, and
/// messages no check-back can decide in a `KillBeforeAlert` burst.
const HOLD_BURST: usize = 12;
const ALERT_BURST: usize = 6;
/// Sends Kafka refuses for good (an ACL) in a `KillBeforeAlert`.
const REFUSED_SENDS: usize = 3;
/// Produce requests the empty broker refuses as from a producer it does
/// not know, in a `BrokerLosesState`. The mock cannot tell whose request it
/// refuses, so it refuses the first of all instances' requests, enough that
/// each instance's producer meets one (four each on average), as each
/// does against a real broker that lost its producer state.
const REFUSED_AFTER_LOSS: usize = 12;
/// How long a `FreezeDatabase` keeps the database server stopped: past the request
/// deadline (`--request-timeout` 2 s) and the Kafka message timeout.
const FREEZE: Duration = Duration::from_secs(5);

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Fault {
    KillInstance,
    PauseInstance,
    KillDatabase,
    BrokersDown,
    EndpointHangs,
    EndpointGarbage,
    KillDuringCheckBack,
    KillBeforeAlert,
    FreezeDatabase,
    BrokerLosesState,
}

/// One cycle of each, in this order, over and over.
pub(crate) const FAULTS: [Fault; 10] = [
    Fault::KillInstance,
    Fault::PauseInstance,
    Fault::KillDatabase,
    Fault::BrokersDown,
    Fault::EndpointHangs,
    Fault::EndpointGarbage,
    Fault::KillDuringCheckBack,
    Fault::KillBeforeAlert,
    Fault::FreezeDatabase,
    Fault::BrokerLosesState,
];

impl Rig {
    /// Injects `fault` and returns when it is over (everything it broke is
    /// back); `round` picks which instance it hits.
    pub(crate) async fn inject(&mut self, fault: Fault, round: usize, ledger: &Ledger) {
        let i = round % INSTANCES;
        match fault {
            Fault::KillInstance => {
                self.services[i].kill_9();
                tokio::time::sleep(Duration::from_secs(1)).await;
                self.services[i].restart().await;
            }
            Fault::PauseInstance => {
                self.services[i].pause();
                tokio::time::sleep(PAUSE).await;
                self.services[i].resume();
            }
            Fault::KillDatabase => {
                self.db.kill_9();
                tokio::time::sleep(Duration::from_secs(2)).await;
                self.db.restart().await;
            }
            Fault::BrokersDown => {
                self.kafka.brokers_down();
                tokio::time::sleep(MESSAGE_TIMEOUT * 2 + Duration::from_secs(1)).await;
                self.kafka.brokers_up();
                // The test's own consumer does not always resume after the
                // mock cluster's outage: read on with a new one (records it
                // reads again are known by their offsets).
                self.read_afresh();
            }
            Fault::EndpointHangs => {
                self.mode.store(HANG, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_secs(3)).await;
                self.mode.store(NORMAL, Ordering::Relaxed);
            }
            Fault::EndpointGarbage => {
                self.mode.store(GARBAGE, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(1500)).await;
                self.mode.store(ERROR_500, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(1500)).await;
                self.mode.store(NORMAL, Ordering::Relaxed);
            }
            Fault::KillDuringCheckBack => self.kill_during_check_back(round, ledger).await,
            Fault::KillBeforeAlert => self.kill_before_alert(i, round, ledger).await,
            Fault::FreezeDatabase => {
                self.db.pause();
                tokio::time::sleep(FREEZE).await;
                self.db.resume();
            }
            Fault::BrokerLosesState => self.broker_loses_state().await,
        }
    }

    /// The broker goes away with everything it held and, past the Kafka
    /// message timeout, a broker with no state at all answers at the same
    /// address: it knows none of the records and none of the producers'
    /// ids, so it refuses the first sends as fenced, as a real broker
    /// refuses a producer it no longer knows (librdkafka's mock checks
    /// producer ids only for transactional producers, so the refusal is
    /// injected).
    ///
    /// The mock can only lose its records with its producer state (a real
    /// broker that expires a producer id keeps its log), so the records it
    /// had acknowledged and the test's consumer had not read yet are gone
    /// with it. Those are Kafka's loss, not trustmsg's: trustmsg's promise
    /// ends at the broker's acknowledgement. A message counts as lost by the
    /// broker if its row was marked SENT in the 5 s before the loss or
    /// during the outage (before the empty broker existed, so the old one
    /// acknowledged it) and it had not been read; the consumer reads each
    /// record within milliseconds of its acknowledgement, so an older
    /// unread SENT row is trustmsg's loss and counted as lost.
    async fn broker_loses_state(&mut self) {
        let lost_at = self.db_now().await;
        self.kafka.lose_state();
        tokio::time::sleep(MESSAGE_TIMEOUT + Duration::from_secs(1)).await;
        let back_at = self.db_now().await;
        // All the old broker handed over, in before it comes back.
        let read = self.delivered_ids();
        self.kafka.come_back_empty();
        self.kafka.request_errors(
            RDKafkaApiKey::Produce,
            &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_PRODUCER_FENCED; REFUSED_AFTER_LOSS],
        );
        // The reader reads on from the empty broker's offset 0; whatever it
        // takes in from now on is the new cluster's.
        self.cluster += 1;
        let acked = self
            .pool
            .sent_between(&lost_at, &back_at)
            .await
            .expect("read what the lost broker had acknowledged");
        self.lost_by_broker
            .extend(acked.into_iter().filter(|id| !read.contains(id)));
    }

    /// The database's clock now (the one `sent_at` is written by).
    async fn db_now(&self) -> String {
        self.pool.now().await.expect("the database's clock")
    }

    /// Messages of the hold producer left to check-back; once its calls for
    /// them are in flight (held by the endpoint), kill -9 of the instance
    /// making most of them, and a restart after 1 s. Whatever that instance
    /// had claimed must be checked again by another within the producer's
    /// timeout and a margin, not after the global lease.
    async fn kill_during_check_back(&mut self, round: usize, ledger: &Ledger) {
        self.held.holding.store(true, Ordering::SeqCst);
        for j in 0..HOLD_BURST {
            let local = if j % 2 == 0 {
                Local::Committed
            } else {
                Local::RolledBack
            };
            load::undecided(&self.hold, &format!("h-{round}-{j}"), j, local, ledger).await;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut first_call: Option<Instant> = None;
        let calls = loop {
            let calls = self.held.calls.lock().unwrap().clone();
            if !calls.is_empty() {
                first_call.get_or_insert_with(Instant::now);
            }
            // All of them, or as many as the callers' concurrency lets in.
            let settled = first_call.is_some_and(|t| t.elapsed() > Duration::from_millis(500));
            if calls.len() >= HOLD_BURST || settled || Instant::now() > deadline {
                break calls;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let pids: Vec<u32> = self
            .services
            .iter()
            .filter_map(ServiceProcess::pid)
            .collect();
        let mut per_instance = vec![0usize; INSTANCES];
        for peer in &calls {
            let pid = procnet::caller(*peer, self.hold_addr, &pids);
            if let Some(i) = self
                .services
                .iter()
                .position(|s| s.pid().is_some() && s.pid() == pid)
            {
                per_instance[i] += 1;
            }
        }
        let victim = (0..INSTANCES)
            .max_by_key(|i| (per_instance[*i], std::cmp::Reverse(*i)))
            .filter(|i| per_instance[*i] > 0)
            .unwrap_or(round % INSTANCES);
        self.services[victim].kill_9();
        self.held.holding.store(false, Ordering::SeqCst);
        eprintln!(
            "chaos: kill -9 of instance {victim} with {} of the {} check-back calls in flight ({per_instance:?})",
            per_instance[victim],
            calls.len()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        self.services[victim].restart().await;
    }

    /// With the webhook answering 500: messages no check-back can decide
    /// (VERIFY_FAILED) and sends Kafka refuses for good (SEND_FAILED), so
    /// alerts are raised and not delivered; then kill -9 of instance `i`, a
    /// restart, the webhook healthy again, and the operator redelivering
    /// what failed (its ACL fixed). Every alert raised must still arrive.
    async fn kill_before_alert(&mut self, i: usize, round: usize, ledger: &Ledger) {
        self.alerts.answer(StatusCode::INTERNAL_SERVER_ERROR);
        let refused = self.alerts.refused();
        self.kafka.request_errors(
            RDKafkaApiKey::Produce,
            &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED; REFUSED_SENDS],
        );
        let mut ids = Vec::new();
        for j in 0..ALERT_BURST {
            let key = format!("a-{round}-{j}");
            ids.push(load::unverifiable(&self.broken, &key, j, ledger).await);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline
            && !(self.alerts.refused() > refused && self.all_verify_failed(&ids).await)
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.services[i].kill_9();
        tokio::time::sleep(Duration::from_secs(1)).await;
        self.services[i].restart().await;
        self.kafka.clear_request_errors(RDKafkaApiKey::Produce);
        self.alerts.answer(StatusCode::NO_CONTENT);
        self.redeliver_send_failed().await;
    }

    async fn all_verify_failed(&self, ids: &[u64]) -> bool {
        let rows = self.pool.statuses(ids).await;
        rows.is_ok_and(|rows| {
            rows.iter().filter(|(_, s)| s == "VERIFY_FAILED").count() == ids.len()
        })
    }

    /// An operator's bulk redeliver of every SEND_FAILED message, through
    /// whichever instance answers.
    async fn redeliver_send_failed(&self) {
        let http = trustmsg_tests::http_client();
        for n in 0..100 {
            let res = http
                .post(format!(
                    "{}/v1/admin/messages/redeliver",
                    self.services[n % INSTANCES].url()
                ))
                .bearer_auth(ADMIN_TOKEN)
                .json(&json!({"filter": {"send_status": "SEND_FAILED"},
                              "reason": "chaos: the ACL is fixed"}))
                .send()
                .await;
            if res.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no instance took the redeliver for 10 s");
    }
}
