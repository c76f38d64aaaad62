//! Store conformance: one set of test functions, run against every backend.
//!
//! Each test below is a plain `async fn(&DynStore)`; the `conformance!` macro at
//! the bottom instantiates it once per backend (`mysql::…` on a fresh MariaDB
//! database, `sqlite::…` on a fresh temp file), so both backends are held to the
//! same state machine (DESIGN §2), the same claim/lease rules (§5) and the same
//! clock rules (§7).
//!
//! The state × operation matrix: states are missing, PREPARED, COMMITTED+PENDING,
//! COMMITTED+SENT, COMMITTED+SEND_FAILED, ROLLED_BACK, tombstone and
//! VERIFY_FAILED ([`State`]); every operation test walks all of them, checks the
//! outcome, the row, its version and the audit rows the operation added.

use trustmsg_tests as common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use trustmsg::store::{
    self, Actor, AuditEntry, DecideOutcome, DecideRequest, DynStore, Inserted, Message, NewMessage,
    ProducerRecord, SentMark, Store, Target, Transition,
};
use trustmsg_verify_api::{MessageStatus, SendStatus};

const BIZ: &str = "shop";
/// Far enough out that nothing arranged with it becomes due during a test.
const LATER: Duration = Duration::from_secs(3600);
/// An id no test ever creates.
const UNKNOWN_ID: u64 = 987_654_321;

// ---------------------------------------------------------------------------
// Backends

/// A store under test and what keeps its database alive.
struct Backend {
    store: DynStore,
    cleanup: Cleanup,
}

enum Cleanup {
    MySql(common::TestDb),
    Sqlite(tempfile::TempDir),
}

impl Backend {
    async fn mysql() -> Self {
        let db = common::TestDb::create().await;
        let store = store::connect(&db.url).await.expect("connect to MariaDB");
        store.migrate().await.expect("mysql migrations");
        Self {
            store,
            cleanup: Cleanup::MySql(db),
        }
    }

    async fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("trustmsg.db").display()
        );
        let store = store::connect(&url).await.expect("open sqlite file");
        store.migrate().await.expect("sqlite migrations");
        Self {
            store,
            cleanup: Cleanup::Sqlite(dir),
        }
    }

    async fn finish(self) {
        drop(self.store);
        match self.cleanup {
            Cleanup::MySql(db) => db.drop_db().await,
            Cleanup::Sqlite(dir) => drop(dir),
        }
    }
}

// ---------------------------------------------------------------------------
// Fixtures

/// Every state a (biz_id, message_key) can be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Missing,
    Prepared,
    SendPending,
    Sent,
    SendFailed,
    RolledBack,
    Tombstone,
    VerifyFailed,
}

const STATES: [State; 8] = [
    State::Missing,
    State::Prepared,
    State::SendPending,
    State::Sent,
    State::SendFailed,
    State::RolledBack,
    State::Tombstone,
    State::VerifyFailed,
];

/// Whether the arranged row's check-back / send is due now or only much later.
#[derive(Debug, Clone, Copy)]
enum Due {
    Now,
    Later,
}

impl Due {
    fn delay(self) -> Duration {
        match self {
            Due::Now => Duration::ZERO,
            Due::Later => LATER,
        }
    }
}

fn new_message(key: &str, first_verify_after: Duration) -> NewMessage {
    NewMessage {
        biz_id: BIZ.into(),
        message_key: key.into(),
        topic: "orders".into(),
        key: Some("order-1".into()),
        payload: b"{\"amount\":42}".to_vec(),
        headers: BTreeMap::from([("content-type".to_string(), "application/json".to_string())]),
        first_verify_after,
    }
}

fn key_of(state: State) -> String {
    format!("key-{state:?}")
}

async fn prepare(s: &dyn Store, key: &str, due: Due) -> Message {
    match s
        .insert_prepared(&new_message(key, due.delay()))
        .await
        .unwrap()
    {
        Inserted::Created(m) => m,
        other => panic!("prepare of {key} did not create a row: {other:?}"),
    }
}

async fn decide_key(
    s: &dyn Store,
    key: &str,
    commit: bool,
    actor: Actor,
    lease: Duration,
) -> DecideOutcome {
    store::decide(
        s,
        DecideRequest {
            target: Target::Key {
                biz_id: BIZ,
                message_key: key,
            },
            commit,
            actor,
            reason: "decided by the test".into(),
            send_lease: lease,
            verify_attempt: false,
        },
    )
    .await
    .unwrap()
}

fn producer() -> Actor {
    Actor::Producer(BIZ.into())
}

fn verify_failed(m: &Message) -> Transition {
    Transition {
        id: m.id,
        from: MessageStatus::Prepared,
        version: m.version,
        to: MessageStatus::VerifyFailed,
        send_lease: Duration::ZERO,
        verify_attempt: true,
        error: Some("check-back timed out".into()),
        actor: Actor::Verifier,
        reason: "attempt limit reached".into(),
    }
}

fn decided(outcome: DecideOutcome) -> Message {
    match outcome {
        DecideOutcome::Decided(m) => m,
        other => panic!("expected Decided, got {other:?}"),
    }
}

/// Puts `key` into `state` through the store's own operations.
async fn arrange_key(s: &dyn Store, key: &str, state: State, due: Due) -> Option<Message> {
    let lease = due.delay();
    let m = match state {
        State::Missing => return None,
        State::Prepared => prepare(s, key, due).await,
        State::SendPending => {
            prepare(s, key, Due::Later).await;
            decided(decide_key(s, key, true, producer(), lease).await)
        }
        State::Sent => {
            prepare(s, key, Due::Later).await;
            let m = decided(decide_key(s, key, true, producer(), LATER).await);
            let mark = SentMark {
                id: m.id,
                version: m.version,
                partition: 3,
                offset: 42,
            };
            assert_eq!(s.mark_sent(&[mark]).await.unwrap(), 1);
            s.find_message_by_id(m.id).await.unwrap().unwrap()
        }
        State::SendFailed => {
            prepare(s, key, Due::Later).await;
            let m = decided(decide_key(s, key, true, producer(), LATER).await);
            s.mark_send_failed(m.id, m.version, "record too large", &Actor::Forwarder)
                .await
                .unwrap()
                .expect("pending row fails")
        }
        State::RolledBack => {
            prepare(s, key, Due::Later).await;
            decided(decide_key(s, key, false, producer(), LATER).await)
        }
        State::Tombstone => decided(decide_key(s, key, false, producer(), LATER).await),
        State::VerifyFailed => {
            let m = prepare(s, key, due).await;
            s.transition(&verify_failed(&m))
                .await
                .unwrap()
                .expect("prepared row fails check-back")
        }
    };
    Some(m)
}

async fn arrange(s: &dyn Store, state: State, due: Due) -> Option<Message> {
    arrange_key(s, &key_of(state), state, due).await
}

fn id_of(m: &Option<Message>) -> u64 {
    m.as_ref().map_or(UNKNOWN_ID, |m| m.id)
}

fn version_of(m: &Option<Message>) -> u64 {
    m.as_ref().map_or(0, |m| m.version)
}

/// One audit row in a form that compares and prints well.
fn line(e: &AuditEntry) -> String {
    fn o(v: &Option<String>) -> &str {
        v.as_deref().unwrap_or("-")
    }
    format!(
        "{} {} {}=>{} send {}=>{}",
        e.actor,
        e.action,
        o(&e.from_status),
        o(&e.to_status),
        o(&e.from_send_status),
        o(&e.to_send_status)
    )
}

async fn audit_lines(s: &dyn Store, id: u64) -> Vec<String> {
    s.audit_trail(id).await.unwrap().iter().map(line).collect()
}

/// The row and its audit trail are exactly as before (or there is still no row).
async fn assert_untouched(s: &dyn Store, state: State, before: &Option<Message>, audit: usize) {
    match before {
        Some(m) => {
            let now = s.find_message_by_id(m.id).await.unwrap();
            assert_eq!(now.as_ref(), Some(m), "{state:?}: row changed");
            assert_eq!(
                s.audit_trail(m.id).await.unwrap().len(),
                audit,
                "{state:?}: audit rows added"
            );
        }
        None => {
            assert_eq!(
                s.find_message(BIZ, &key_of(state)).await.unwrap(),
                None,
                "{state:?}: a row appeared"
            );
            assert_eq!(s.find_message_by_id(UNKNOWN_ID).await.unwrap(), None);
        }
    }
}

async fn audit_len(s: &dyn Store, m: &Option<Message>) -> usize {
    match m {
        Some(m) => s.audit_trail(m.id).await.unwrap().len(),
        None => 0,
    }
}

/// Polls `claim` until it returns something, for at most 10 s.
async fn claim_eventually<F, Fut>(mut claim: F) -> Vec<Message>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Vec<Message>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got = claim().await;
        if !got.is_empty() {
            return got;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the lease never ran out"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn is_whole_ms(t: DateTime<Utc>) -> bool {
    t.timestamp_subsec_nanos() == t.timestamp_subsec_millis() * 1_000_000
}

// ---------------------------------------------------------------------------
// prepare

async fn prepare_of_a_new_key_creates_a_prepared_row_due_after_the_first_check_delay(s: &DynStore) {
    let s = s.as_ref();
    let new = new_message("order-17", Duration::from_secs(30));
    let Inserted::Created(m) = s.insert_prepared(&new).await.unwrap() else {
        panic!("a new key must create a row");
    };
    assert_eq!(m.biz_id, BIZ);
    assert_eq!(m.message_key, "order-17");
    assert_eq!(m.topic.as_deref(), Some("orders"));
    assert_eq!(m.key.as_deref(), Some("order-1"));
    assert_eq!(m.payload, new.payload);
    assert_eq!(m.headers, new.headers);
    assert_eq!(m.content_digest, Some(new.digest()));
    assert_eq!(m.status, MessageStatus::Prepared);
    assert_eq!(m.send_status, None);
    assert!(!m.tombstone);
    assert_eq!(m.version, 0);
    assert_eq!((m.verify_attempts, m.send_attempts), (0, 0));
    assert_eq!(m.last_error, None);
    assert_eq!(
        m.next_verify_at,
        Some(m.created_at + chrono::Duration::seconds(30))
    );
    assert_eq!(m.next_send_at, None);
    assert_eq!(m.updated_at, m.created_at);
    assert_eq!((m.decided_at, m.sent_at), (None, None));
    assert_eq!((m.kafka_partition, m.kafka_offset), (None, None));
    assert_eq!(
        s.find_message(BIZ, "order-17").await.unwrap().as_ref(),
        Some(&m)
    );
    assert_eq!(s.find_message_by_id(m.id).await.unwrap().as_ref(), Some(&m));
    assert!(
        s.audit_trail(m.id).await.unwrap().is_empty(),
        "a prepare is not a decision and writes no audit row"
    );
}

async fn prepare_again_with_the_same_content_returns_the_stored_row_unchanged_in_every_state(
    s: &DynStore,
) {
    let s = s.as_ref();
    for state in STATES.into_iter().filter(|st| *st != State::Missing) {
        let before = arrange(s, state, Due::Later).await;
        let audit = audit_len(s, &before).await;
        let again = new_message(&key_of(state), Duration::ZERO);
        let got = s.insert_prepared(&again).await.unwrap();
        assert_eq!(
            got,
            Inserted::Existing(before.clone().unwrap()),
            "{state:?}"
        );
        let digest = before.as_ref().unwrap().content_digest.clone();
        if state == State::Tombstone {
            assert_eq!(digest, None, "a tombstone has no content to match");
        } else {
            assert_eq!(digest, Some(again.digest()), "{state:?}: same content");
        }
        assert_untouched(s, state, &before, audit).await;
    }
}

async fn prepare_again_with_different_content_returns_the_stored_row_with_another_digest_in_every_state(
    s: &DynStore,
) {
    let s = s.as_ref();
    for state in STATES.into_iter().filter(|st| *st != State::Missing) {
        let before = arrange(s, state, Due::Later).await;
        let audit = audit_len(s, &before).await;
        let mut other = new_message(&key_of(state), Duration::ZERO);
        other.payload = b"{\"amount\":43}".to_vec();
        let got = s.insert_prepared(&other).await.unwrap();
        assert_eq!(
            got,
            Inserted::Existing(before.clone().unwrap()),
            "{state:?}"
        );
        assert_ne!(
            before.as_ref().unwrap().content_digest,
            Some(other.digest()),
            "{state:?}: different content must not look identical"
        );
        assert_untouched(s, state, &before, audit).await;
    }
}

async fn message_keys_are_unique_byte_for_byte(s: &DynStore) {
    let s = s.as_ref();
    // Case, trailing space and Unicode normalisation all make different keys.
    let keys = ["k", "K", "k ", " k", "caf\u{e9}", "cafe\u{301}"];
    let mut ids = BTreeSet::new();
    for key in keys {
        let Inserted::Created(m) = s.insert_prepared(&new_message(key, LATER)).await.unwrap()
        else {
            panic!("{key:?} collided with another key");
        };
        assert_eq!(m.message_key, key);
        ids.insert(m.id);
    }
    assert_eq!(ids.len(), keys.len());
    for key in keys {
        let found = s.find_message(BIZ, key).await.unwrap().unwrap();
        assert_eq!(found.message_key, key, "lookup of {key:?}");
    }
    for biz in ["Shop", "shop "] {
        let mut other_biz = new_message("k", LATER);
        other_biz.biz_id = biz.into();
        assert!(
            matches!(
                s.insert_prepared(&other_biz).await.unwrap(),
                Inserted::Created(_)
            ),
            "biz_id {biz:?} collided with {BIZ:?}"
        );
    }
    assert!(matches!(
        s.insert_prepared(&new_message("k", LATER)).await.unwrap(),
        Inserted::Existing(m) if m.message_key == "k" && m.biz_id == BIZ
    ));
}

// ---------------------------------------------------------------------------
// commit

async fn commit_of_an_unknown_message_is_not_found_and_creates_nothing(s: &DynStore) {
    let s = s.as_ref();
    let key = key_of(State::Missing);
    let got = decide_key(s, &key, true, producer(), LATER).await;
    assert_eq!(got, DecideOutcome::NotFound);
    assert_untouched(s, State::Missing, &None, 0).await;
}

async fn commit_of_a_prepared_message_commits_it_and_claims_it_for_sending(s: &DynStore) {
    let s = s.as_ref();
    let before = arrange(s, State::Prepared, Due::Later).await.unwrap();
    let lease = Duration::from_millis(60_250);
    let m = decided(decide_key(s, &before.message_key, true, producer(), lease).await);
    assert_eq!(m.id, before.id);
    assert_eq!(m.status, MessageStatus::Committed);
    assert_eq!(m.send_status, Some(SendStatus::Pending));
    assert_eq!(m.version, before.version + 1);
    assert_eq!(m.next_verify_at, None, "check-back stops once decided");
    let decided_at = m.decided_at.expect("decided_at set");
    assert_eq!(
        m.next_send_at,
        Some(decided_at + chrono::Duration::milliseconds(60_250)),
        "the commit claims the row for the send lease"
    );
    assert_eq!(m.updated_at, decided_at);
    assert_eq!(m.verify_attempts, 0);
    assert_eq!(m.created_at, before.created_at);
    assert_eq!(s.find_message_by_id(m.id).await.unwrap(), Some(m.clone()));
    assert_eq!(
        audit_lines(s, m.id).await,
        ["producer:shop commit PREPARED=>COMMITTED send -=>PENDING"]
    );
    let entry = &s.audit_trail(m.id).await.unwrap()[0];
    assert_eq!(entry.reason, "decided by the test");
    assert_eq!(entry.message_id, m.id);
}

async fn commit_of_a_verify_failed_message_commits_it_and_audits_it(s: &DynStore) {
    let s = s.as_ref();
    let before = arrange(s, State::VerifyFailed, Due::Later).await.unwrap();
    let operator = Actor::Operator("alice".into());
    let m = decided(decide_key(s, &before.message_key, true, operator, LATER).await);
    assert_eq!(m.status, MessageStatus::Committed);
    assert_eq!(m.send_status, Some(SendStatus::Pending));
    assert_eq!(m.version, before.version + 1);
    assert!(m.next_send_at.is_some());
    assert_eq!(m.next_verify_at, None);
    assert_eq!(m.verify_attempts, before.verify_attempts);
    assert_eq!(m.last_error, before.last_error, "the last error is kept");
    assert_eq!(
        audit_lines(s, m.id).await,
        [
            "verifier verify_failed PREPARED=>VERIFY_FAILED send -=>-",
            "operator:alice commit VERIFY_FAILED=>COMMITTED send -=>PENDING",
        ]
    );
}

async fn commit_of_a_committed_message_is_an_idempotent_repeat_in_every_send_state(s: &DynStore) {
    let s = s.as_ref();
    for state in [State::SendPending, State::Sent, State::SendFailed] {
        let before = arrange(s, state, Due::Later).await;
        let audit = audit_len(s, &before).await;
        let got = decide_key(s, &key_of(state), true, producer(), LATER).await;
        assert_eq!(
            got,
            DecideOutcome::AlreadyDecided(before.clone().unwrap()),
            "{state:?}"
        );
        assert_untouched(s, state, &before, audit).await;
    }
}

async fn commit_after_rollback_is_a_conflict(s: &DynStore) {
    let s = s.as_ref();
    for state in [State::RolledBack, State::Tombstone] {
        let before = arrange(s, state, Due::Later).await;
        let audit = audit_len(s, &before).await;
        let got = decide_key(s, &key_of(state), true, producer(), LATER).await;
        assert_eq!(
            got,
            DecideOutcome::Conflict(before.clone().unwrap()),
            "{state:?}"
        );
        assert_untouched(s, state, &before, audit).await;
    }
}

// ---------------------------------------------------------------------------
// rollback

async fn rollback_of_an_unknown_message_leaves_an_audited_tombstone(s: &DynStore) {
    let s = s.as_ref();
    let t = decided(decide_key(s, "never-prepared", false, producer(), LATER).await);
    assert!(t.tombstone);
    assert_eq!(t.status, MessageStatus::RolledBack);
    assert_eq!(t.send_status, None);
    assert_eq!((t.topic.as_deref(), t.key.as_deref()), (None, None));
    assert_eq!(t.content_digest, None);
    assert!(t.payload.is_empty() && t.headers.is_empty());
    assert_eq!(t.version, 0);
    assert_eq!((t.next_verify_at, t.next_send_at), (None, None));
    assert_eq!(t.decided_at, Some(t.created_at));
    assert_eq!(
        s.find_message(BIZ, "never-prepared").await.unwrap(),
        Some(t.clone())
    );
    assert_eq!(
        audit_lines(s, t.id).await,
        ["producer:shop rollback -=>ROLLED_BACK send -=>-"]
    );
    // The point of the tombstone: a late prepare finds it instead of creating an orphan.
    assert_eq!(
        s.insert_prepared(&new_message("never-prepared", LATER))
            .await
            .unwrap(),
        Inserted::Existing(t.clone())
    );
    assert_eq!(
        s.insert_tombstone(BIZ, "never-prepared", &producer(), "again")
            .await
            .unwrap(),
        None
    );
    assert_eq!(audit_lines(s, t.id).await.len(), 1);
}

async fn rollback_of_a_prepared_message_rolls_it_back_and_audits_it(s: &DynStore) {
    let s = s.as_ref();
    let before = arrange(s, State::Prepared, Due::Later).await.unwrap();
    let m = decided(decide_key(s, &before.message_key, false, producer(), LATER).await);
    assert_eq!(m.status, MessageStatus::RolledBack);
    assert_eq!(m.send_status, None);
    assert!(!m.tombstone);
    assert_eq!(m.version, before.version + 1);
    assert_eq!((m.next_verify_at, m.next_send_at), (None, None));
    assert_eq!(m.decided_at, Some(m.updated_at));
    assert_eq!(m.content_digest, before.content_digest);
    assert_eq!(
        audit_lines(s, m.id).await,
        ["producer:shop rollback PREPARED=>ROLLED_BACK send -=>-"]
    );
}

async fn rollback_of_a_verify_failed_message_rolls_it_back_and_audits_it(s: &DynStore) {
    let s = s.as_ref();
    let before = arrange(s, State::VerifyFailed, Due::Later).await.unwrap();
    let operator = Actor::Operator("bob".into());
    let m = decided(decide_key(s, &before.message_key, false, operator, LATER).await);
    assert_eq!(m.status, MessageStatus::RolledBack);
    assert_eq!(m.send_status, None);
    assert_eq!(m.version, before.version + 1);
    assert_eq!((m.next_verify_at, m.next_send_at), (None, None));
    assert_eq!(
        audit_lines(s, m.id).await,
        [
            "verifier verify_failed PREPARED=>VERIFY_FAILED send -=>-",
            "operator:bob rollback VERIFY_FAILED=>ROLLED_BACK send -=>-",
        ]
    );
}

async fn rollback_of_a_rolled_back_message_or_tombstone_is_an_idempotent_repeat(s: &DynStore) {
    let s = s.as_ref();
    for state in [State::RolledBack, State::Tombstone] {
        let before = arrange(s, state, Due::Later).await;
        let audit = audit_len(s, &before).await;
        let got = decide_key(s, &key_of(state), false, producer(), LATER).await;
        assert_eq!(
            got,
            DecideOutcome::AlreadyDecided(before.clone().unwrap()),
            "{state:?}"
        );
        assert_untouched(s, state, &before, audit).await;
    }
}

async fn rollback_after_commit_is_a_conflict_in_every_send_state(s: &DynStore) {
    let s = s.as_ref();
    for state in [State::SendPending, State::Sent, State::SendFailed] {
        let before = arrange(s, state, Due::Later).await;
        let audit = audit_len(s, &before).await;
        let got = decide_key(s, &key_of(state), false, producer(), LATER).await;
        assert_eq!(
            got,
            DecideOutcome::Conflict(before.clone().unwrap()),
            "{state:?}"
        );
        assert_untouched(s, state, &before, audit).await;
    }
}

async fn decide_by_id_of_an_unknown_message_is_not_found_and_leaves_no_tombstone(s: &DynStore) {
    let s = s.as_ref();
    for commit in [true, false] {
        let got = store::decide(
            s,
            DecideRequest {
                target: Target::Id(UNKNOWN_ID),
                commit,
                actor: Actor::Verifier,
                reason: "check-back answered".into(),
                send_lease: LATER,
                verify_attempt: true,
            },
        )
        .await
        .unwrap();
        assert_eq!(got, DecideOutcome::NotFound, "commit = {commit}");
    }
    assert_untouched(s, State::Missing, &None, 0).await;
}

async fn a_check_back_decision_by_id_counts_as_a_verify_attempt(s: &DynStore) {
    let s = s.as_ref();
    let before = arrange(s, State::Prepared, Due::Later).await.unwrap();
    let got = store::decide(
        s,
        DecideRequest {
            target: Target::Id(before.id),
            commit: true,
            actor: Actor::Verifier,
            reason: "check-back answered commit".into(),
            send_lease: LATER,
            verify_attempt: true,
        },
    )
    .await
    .unwrap();
    let m = decided(got);
    assert_eq!(m.verify_attempts, before.verify_attempts + 1);
    assert_eq!(
        audit_lines(s, m.id).await,
        ["verifier commit PREPARED=>COMMITTED send -=>PENDING"]
    );
}

// ---------------------------------------------------------------------------
// verify-failed transition and stale versions

async fn verify_failed_transition_applies_only_to_a_prepared_row(s: &DynStore) {
    let s = s.as_ref();
    for state in STATES {
        let before = arrange(s, state, Due::Later).await;
        let audit = audit_len(s, &before).await;
        let t = Transition {
            id: id_of(&before),
            version: version_of(&before),
            ..verify_failed(before.as_ref().unwrap_or(&arrange_dummy()))
        };
        let got = s.transition(&t).await.unwrap();
        if state != State::Prepared {
            assert_eq!(got, None, "{state:?} must not become VERIFY_FAILED");
            assert_untouched(s, state, &before, audit).await;
            continue;
        }
        let before = before.unwrap();
        let m = got.expect("a prepared row fails check-back");
        assert_eq!(m.status, MessageStatus::VerifyFailed);
        assert_eq!(m.send_status, None);
        assert_eq!(m.version, before.version + 1);
        assert_eq!(m.verify_attempts, before.verify_attempts + 1);
        assert_eq!(m.last_error.as_deref(), Some("check-back timed out"));
        assert_eq!((m.next_verify_at, m.next_send_at), (None, None));
        assert_eq!(m.decided_at, Some(m.updated_at));
        assert_eq!(s.find_message_by_id(m.id).await.unwrap(), Some(m.clone()));
        assert_eq!(
            audit_lines(s, m.id).await,
            ["verifier verify_failed PREPARED=>VERIFY_FAILED send -=>-"]
        );
        assert_eq!(
            s.audit_trail(m.id).await.unwrap()[0].reason,
            "attempt limit reached"
        );
    }
}

/// A message-shaped placeholder for the missing state (only id/version are used).
fn arrange_dummy() -> Message {
    Message {
        id: UNKNOWN_ID,
        biz_id: BIZ.into(),
        message_key: key_of(State::Missing),
        topic: None,
        key: None,
        payload: Vec::new(),
        headers: BTreeMap::new(),
        content_digest: None,
        status: MessageStatus::Prepared,
        send_status: None,
        tombstone: false,
        version: 0,
        verify_attempts: 0,
        send_attempts: 0,
        last_error: None,
        next_verify_at: None,
        next_send_at: None,
        kafka_partition: None,
        kafka_offset: None,
        created_at: DateTime::UNIX_EPOCH,
        updated_at: DateTime::UNIX_EPOCH,
        decided_at: None,
        sent_at: None,
    }
}

async fn a_transition_with_a_stale_version_matches_nothing(s: &DynStore) {
    let s = s.as_ref();
    let before = arrange(s, State::Prepared, Due::Now).await.unwrap();
    // A verifier claims the row (version 0 → 1); a writer still holding version 0 loses.
    let claimed = s
        .claim_due_verifies(10, LATER)
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!(claimed.version, before.version + 1);
    let commit = Transition {
        to: MessageStatus::Committed,
        actor: producer(),
        ..verify_failed(&before)
    };
    assert_eq!(s.transition(&commit).await.unwrap(), None);
    assert_eq!(s.transition(&verify_failed(&before)).await.unwrap(), None);
    assert_untouched(s, State::Prepared, &Some(claimed.clone()), 0).await;
    // The current version still wins.
    assert!(s
        .transition(&verify_failed(&claimed))
        .await
        .unwrap()
        .is_some());
}

async fn racing_commit_and_rollback_decide_exactly_once(s: &DynStore) {
    for i in 0..10 {
        let key = format!("race-{i}");
        prepare(s.as_ref(), &key, Due::Later).await;
        let (a, b) = tokio::join!(
            decide_key(s.as_ref(), &key, true, producer(), LATER),
            decide_key(s.as_ref(), &key, false, producer(), LATER),
        );
        let winners = [&a, &b]
            .iter()
            .filter(|o| matches!(o, DecideOutcome::Decided(_)))
            .count();
        let conflicts = [&a, &b]
            .iter()
            .filter(|o| matches!(o, DecideOutcome::Conflict(_)))
            .count();
        assert_eq!((winners, conflicts), (1, 1), "{key}: {a:?} / {b:?}");
        let row = s.find_message(BIZ, &key).await.unwrap().unwrap();
        assert_eq!(row.version, 1);
        assert_eq!(s.audit_trail(row.id).await.unwrap().len(), 1, "{key}");
    }
}

// ---------------------------------------------------------------------------
// sending

async fn claim_due_sends_takes_only_committed_pending_rows_that_are_due(s: &DynStore) {
    let s = s.as_ref();
    let mut rows = Vec::new();
    for state in STATES {
        rows.push((state, arrange(s, state, Due::Now).await));
    }
    let not_due = arrange_key(s, "pending-later", State::SendPending, Due::Later).await;
    rows.push((State::SendPending, not_due));
    let mut audits = Vec::new();
    for (_, m) in &rows {
        audits.push(audit_len(s, m).await);
    }
    let due_id = id_of(&rows[2].1);
    assert_eq!(rows[2].0, State::SendPending);

    let lease = Duration::from_secs(120);
    let t0 = s.now().await.unwrap();
    let claimed = s.claim_due_sends(100, lease).await.unwrap();
    let t1 = s.now().await.unwrap();
    assert_eq!(
        claimed.iter().map(|m| m.id).collect::<Vec<_>>(),
        [due_id],
        "only the due COMMITTED+PENDING row is claimed"
    );
    let m = &claimed[0];
    let before = rows[2].1.as_ref().unwrap();
    assert_eq!(m.version, before.version + 1);
    let next = m.next_send_at.unwrap();
    let lease = chrono::Duration::from_std(lease).unwrap();
    assert!(
        t0 + lease <= next && next <= t1 + lease,
        "{next} vs {t0}..{t1}"
    );
    assert_eq!(
        (m.status, m.send_status),
        (MessageStatus::Committed, Some(SendStatus::Pending))
    );
    assert_eq!(s.find_message_by_id(m.id).await.unwrap().as_ref(), Some(m));
    assert_eq!(
        audit_lines(s, m.id).await.len(),
        1,
        "a claim is not audited"
    );
    for (i, (state, before)) in rows.iter().enumerate() {
        if i != 2 {
            assert_untouched(s, *state, before, audits[i]).await;
        }
    }
}

async fn claim_due_sends_skips_claimed_rows_until_a_short_lease_runs_out(s: &DynStore) {
    let s = s.as_ref();
    let before = arrange(s, State::SendPending, Due::Now).await.unwrap();
    let lease = Duration::from_millis(300);
    let first = s.claim_due_sends(10, lease).await.unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].version, before.version + 1);
    assert!(
        s.claim_due_sends(10, lease).await.unwrap().is_empty(),
        "a claimed row is not claimed again within its lease"
    );
    let again = claim_eventually(|| async { s.claim_due_sends(10, LATER).await.unwrap() }).await;
    let now = s.now().await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].id, before.id);
    assert_eq!(again[0].version, before.version + 2);
    assert!(
        now >= first[0].next_send_at.unwrap(),
        "reclaimed before the lease ran out"
    );
}

async fn claim_due_sends_takes_at_most_the_limit(s: &DynStore) {
    let s = s.as_ref();
    for i in 0..3 {
        arrange_key(s, &format!("batch-{i}"), State::SendPending, Due::Now).await;
    }
    let a = s.claim_due_sends(2, LATER).await.unwrap();
    let b = s.claim_due_sends(2, LATER).await.unwrap();
    let c = s.claim_due_sends(2, LATER).await.unwrap();
    assert_eq!((a.len(), b.len(), c.len()), (2, 1, 0));
    let ids: BTreeSet<u64> = a.iter().chain(&b).map(|m| m.id).collect();
    assert_eq!(ids.len(), 3);
}

async fn racing_claimers_never_take_the_same_row(s: &DynStore) {
    for i in 0..20 {
        arrange_key(
            s.as_ref(),
            &format!("many-{i}"),
            State::SendPending,
            Due::Now,
        )
        .await;
    }
    let claim = || async { s.claim_due_sends(5, LATER).await.unwrap() };
    let (a, b, c, d) = tokio::join!(claim(), claim(), claim(), claim());
    let rest = s.claim_due_sends(100, LATER).await.unwrap();
    let all: Vec<u64> = [a, b, c, d, rest].iter().flatten().map(|m| m.id).collect();
    let distinct: BTreeSet<u64> = all.iter().copied().collect();
    assert_eq!(
        all.len(),
        distinct.len(),
        "a row was claimed twice: {all:?}"
    );
    assert_eq!(distinct.len(), 20);
}

async fn mark_sent_matches_only_the_claimed_version_of_a_pending_row(s: &DynStore) {
    let s = s.as_ref();
    for state in STATES {
        let before = arrange(s, state, Due::Later).await;
        let audit = audit_len(s, &before).await;
        let mark = SentMark {
            id: id_of(&before),
            version: version_of(&before),
            partition: 7,
            offset: 1234,
        };
        let t0 = s.now().await.unwrap();
        let matched = s.mark_sent(&[mark]).await.unwrap();
        let t1 = s.now().await.unwrap();
        if state != State::SendPending {
            assert_eq!(matched, 0, "{state:?} must not become SENT");
            assert_untouched(s, state, &before, audit).await;
            continue;
        }
        assert_eq!(matched, 1);
        let before = before.unwrap();
        let m = s.find_message_by_id(before.id).await.unwrap().unwrap();
        assert_eq!(m.status, MessageStatus::Committed);
        assert_eq!(m.send_status, Some(SendStatus::Sent));
        assert_eq!((m.kafka_partition, m.kafka_offset), (Some(7), Some(1234)));
        assert_eq!(m.version, before.version + 1);
        assert_eq!(m.send_attempts, before.send_attempts + 1);
        assert_eq!(m.next_send_at, None, "a sent row is never due again");
        let sent_at = m.sent_at.unwrap();
        assert!(t0 <= sent_at && sent_at <= t1);
        assert_eq!(m.updated_at, sent_at);
        assert_eq!(
            audit_lines(s, m.id).await.len(),
            audit,
            "SENT is not a decision: no audit row (same as every other send bookkeeping write)"
        );
    }
}

async fn mark_sent_with_a_stale_version_matches_nothing(s: &DynStore) {
    let s = s.as_ref();
    let a = arrange_key(s, "stale-a", State::SendPending, Due::Now)
        .await
        .unwrap();
    let b = arrange_key(s, "stale-b", State::SendPending, Due::Later)
        .await
        .unwrap();
    // Another instance re-claims `a` after our lease ran out: our version is stale.
    let reclaimed = s.claim_due_sends(10, LATER).await.unwrap().pop().unwrap();
    assert_eq!(reclaimed.id, a.id);
    let stale = SentMark {
        id: a.id,
        version: a.version,
        partition: 0,
        offset: 1,
    };
    let fresh = SentMark {
        id: b.id,
        version: b.version,
        partition: 0,
        offset: 2,
    };
    assert_eq!(s.mark_sent(&[stale, fresh]).await.unwrap(), 1);
    assert_eq!(
        s.find_message_by_id(a.id).await.unwrap(),
        Some(reclaimed.clone())
    );
    let b_now = s.find_message_by_id(b.id).await.unwrap().unwrap();
    assert_eq!(b_now.send_status, Some(SendStatus::Sent));
    assert_eq!(s.mark_sent(&[]).await.unwrap(), 0);
    // The current claimer's mark still lands.
    let current = SentMark {
        version: reclaimed.version,
        ..stale
    };
    assert_eq!(s.mark_sent(&[current]).await.unwrap(), 1);
}

async fn reschedule_send_applies_only_to_a_pending_row(s: &DynStore) {
    let s = s.as_ref();
    for state in STATES {
        let before = arrange(s, state, Due::Later).await;
        let audit = audit_len(s, &before).await;
        let delay = Duration::from_millis(5_500);
        let ok = s
            .reschedule_send(id_of(&before), version_of(&before), "broker down", delay)
            .await
            .unwrap();
        if state != State::SendPending {
            assert!(!ok, "{state:?} must not be rescheduled for sending");
            assert_untouched(s, state, &before, audit).await;
            continue;
        }
        assert!(ok);
        let before = before.unwrap();
        let m = s.find_message_by_id(before.id).await.unwrap().unwrap();
        assert_eq!(
            (m.status, m.send_status),
            (MessageStatus::Committed, Some(SendStatus::Pending))
        );
        assert_eq!(m.send_attempts, before.send_attempts + 1);
        assert_eq!(m.last_error.as_deref(), Some("broker down"));
        assert_eq!(m.version, before.version + 1);
        assert_eq!(
            m.next_send_at,
            Some(m.updated_at + chrono::Duration::milliseconds(5_500))
        );
        assert_eq!(
            audit_lines(s, m.id).await.len(),
            audit,
            "a retry is not audited"
        );
        // The version moved on: the same stale write now matches nothing.
        assert!(!s
            .reschedule_send(m.id, before.version, "broker down", delay)
            .await
            .unwrap());
    }
}

async fn mark_send_failed_applies_only_to_a_pending_row_and_audits_it(s: &DynStore) {
    let s = s.as_ref();
    for state in STATES {
        let before = arrange(s, state, Due::Later).await;
        let audit = audit_len(s, &before).await;
        let got = s
            .mark_send_failed(
                id_of(&before),
                version_of(&before),
                "topic authorization failed",
                &Actor::Forwarder,
            )
            .await
            .unwrap();
        if state != State::SendPending {
            assert_eq!(got, None, "{state:?} must not become SEND_FAILED");
            assert_untouched(s, state, &before, audit).await;
            continue;
        }
        let before = before.unwrap();
        let m = got.expect("a pending row fails");
        assert_eq!(
            (m.status, m.send_status),
            (MessageStatus::Committed, Some(SendStatus::SendFailed))
        );
        assert_eq!(m.send_attempts, before.send_attempts + 1);
        assert_eq!(m.last_error.as_deref(), Some("topic authorization failed"));
        assert_eq!(m.next_send_at, None, "a failed send is not due again");
        assert_eq!(m.version, before.version + 1);
        assert_eq!(s.find_message_by_id(m.id).await.unwrap(), Some(m.clone()));
        assert_eq!(
            audit_lines(s, m.id).await,
            [
                "producer:shop commit PREPARED=>COMMITTED send -=>PENDING",
                "forwarder send_failed COMMITTED=>COMMITTED send PENDING=>SEND_FAILED",
            ]
        );
        assert_eq!(
            s.audit_trail(m.id).await.unwrap()[1].reason,
            "topic authorization failed"
        );
        // A stale version (the row moved on) matches nothing.
        assert_eq!(
            s.mark_send_failed(m.id, before.version, "again", &Actor::Forwarder)
                .await
                .unwrap(),
            None
        );
    }
}

// ---------------------------------------------------------------------------
// check-back scheduling

async fn claim_due_verifies_takes_only_prepared_rows_that_are_due(s: &DynStore) {
    let s = s.as_ref();
    let mut rows = Vec::new();
    for state in STATES {
        rows.push((state, arrange(s, state, Due::Now).await));
    }
    let not_due = arrange_key(s, "prepared-later", State::Prepared, Due::Later).await;
    rows.push((State::Prepared, not_due));
    let mut audits = Vec::new();
    for (_, m) in &rows {
        audits.push(audit_len(s, m).await);
    }
    assert_eq!(rows[1].0, State::Prepared);
    let due_id = id_of(&rows[1].1);

    let lease = Duration::from_secs(45);
    let t0 = s.now().await.unwrap();
    let claimed = s.claim_due_verifies(100, lease).await.unwrap();
    let t1 = s.now().await.unwrap();
    assert_eq!(
        claimed.iter().map(|m| m.id).collect::<Vec<_>>(),
        [due_id],
        "only the due PREPARED row is claimed"
    );
    let m = &claimed[0];
    let before = rows[1].1.as_ref().unwrap();
    assert_eq!(m.version, before.version + 1);
    assert_eq!(m.status, MessageStatus::Prepared);
    assert_eq!(
        m.verify_attempts, before.verify_attempts,
        "a claim is not an attempt"
    );
    let next = m.next_verify_at.unwrap();
    let lease = chrono::Duration::from_std(lease).unwrap();
    assert!(
        t0 + lease <= next && next <= t1 + lease,
        "{next} vs {t0}..{t1}"
    );
    assert_eq!(s.find_message_by_id(m.id).await.unwrap().as_ref(), Some(m));
    for (i, (state, before)) in rows.iter().enumerate() {
        if i != 1 {
            assert_untouched(s, *state, before, audits[i]).await;
        }
    }
}

async fn claim_due_verifies_skips_claimed_rows_until_a_short_lease_runs_out(s: &DynStore) {
    let s = s.as_ref();
    let before = arrange(s, State::Prepared, Due::Now).await.unwrap();
    let lease = Duration::from_millis(300);
    let first = s.claim_due_verifies(10, lease).await.unwrap();
    assert_eq!(first.len(), 1);
    assert!(
        s.claim_due_verifies(10, lease).await.unwrap().is_empty(),
        "a claimed row is not claimed again within its lease"
    );
    let again = claim_eventually(|| async { s.claim_due_verifies(10, LATER).await.unwrap() }).await;
    let now = s.now().await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].id, before.id);
    assert_eq!(again[0].version, before.version + 2);
    assert!(
        now >= first[0].next_verify_at.unwrap(),
        "reclaimed before the lease ran out"
    );
}

async fn reschedule_verify_applies_only_to_a_prepared_row(s: &DynStore) {
    let s = s.as_ref();
    for state in STATES {
        let before = arrange(s, state, Due::Later).await;
        let audit = audit_len(s, &before).await;
        let delay = Duration::from_millis(10_250);
        let ok = s
            .reschedule_verify(id_of(&before), version_of(&before), "HTTP 503", delay)
            .await
            .unwrap();
        if state != State::Prepared {
            assert!(!ok, "{state:?} must not be rescheduled for check-back");
            assert_untouched(s, state, &before, audit).await;
            continue;
        }
        assert!(ok);
        let before = before.unwrap();
        let m = s.find_message_by_id(before.id).await.unwrap().unwrap();
        assert_eq!(m.status, MessageStatus::Prepared);
        assert_eq!(m.verify_attempts, before.verify_attempts + 1);
        assert_eq!(m.last_error.as_deref(), Some("HTTP 503"));
        assert_eq!(m.version, before.version + 1);
        assert_eq!(
            m.next_verify_at,
            Some(m.updated_at + chrono::Duration::milliseconds(10_250))
        );
        assert_eq!(m.next_send_at, None);
        assert_eq!(
            audit_lines(s, m.id).await.len(),
            0,
            "a retry is not audited"
        );
        assert!(!s
            .reschedule_verify(m.id, before.version, "HTTP 503", delay)
            .await
            .unwrap());
    }
}

async fn release_verify_hands_a_claim_back_without_counting_an_attempt(s: &DynStore) {
    let s = s.as_ref();
    for state in STATES {
        let before = arrange(s, state, Due::Later).await;
        let audit = audit_len(s, &before).await;
        let delay = Duration::from_millis(1_500);
        let ok = s
            .release_verify(id_of(&before), version_of(&before), delay)
            .await
            .unwrap();
        if state != State::Prepared {
            assert!(!ok, "{state:?} must not be released for check-back");
            assert_untouched(s, state, &before, audit).await;
            continue;
        }
        assert!(ok);
        let before = before.unwrap();
        let m = s.find_message_by_id(before.id).await.unwrap().unwrap();
        assert_eq!(m.status, MessageStatus::Prepared);
        assert_eq!(m.verify_attempts, before.verify_attempts, "not an attempt");
        assert_eq!(m.last_error, before.last_error);
        assert_eq!(m.version, before.version + 1);
        let now = s.now().await.unwrap();
        let due = m.next_verify_at.unwrap();
        assert!(
            due > now + chrono::Duration::milliseconds(1_000)
                && due <= now + chrono::Duration::milliseconds(1_500),
            "due {due} vs now {now}"
        );
        assert!(
            !s.release_verify(m.id, before.version, delay).await.unwrap(),
            "a stale claim matches nothing"
        );
    }
}

// ---------------------------------------------------------------------------
// batches (the producer API's group commit)

async fn a_prepare_batch_creates_each_new_key_once_and_returns_the_rows_already_there(
    s: &DynStore,
) {
    let s = s.as_ref();
    let a = prepare(s, "batch-a", Due::Later).await;
    let batch: Vec<NewMessage> = ["batch-b", "batch-a", "batch-c", "batch-b"]
        .iter()
        .map(|k| new_message(k, Duration::from_secs(30)))
        .collect();
    let results = s.insert_prepared_batch(&batch).await.unwrap();
    let kinds: Vec<(&str, &str)> = results
        .iter()
        .map(|r| match r {
            Inserted::Created(m) => ("created", m.message_key.as_str()),
            Inserted::Existing(m) => ("existing", m.message_key.as_str()),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("created", "batch-b"),
            ("existing", "batch-a"),
            ("created", "batch-c"),
            ("existing", "batch-b"),
        ]
    );
    let row = |i: usize| match &results[i] {
        Inserted::Created(m) | Inserted::Existing(m) => m.clone(),
    };
    assert_eq!(row(1), a, "the existing row comes back unchanged");
    assert_eq!(row(0).id, row(3).id, "a key twice in one batch is one row");
    assert_eq!(row(0).status, MessageStatus::Prepared);
    assert_eq!(row(0).content_digest, Some(batch[0].digest()));
    assert_eq!(
        row(2).next_verify_at,
        Some(row(2).created_at + chrono::Duration::seconds(30))
    );
    for key in ["batch-a", "batch-b", "batch-c"] {
        assert!(s.find_message(BIZ, key).await.unwrap().is_some());
    }
}

async fn a_transition_batch_applies_the_guards_that_hold_and_nothing_for_a_stale_one(s: &DynStore) {
    let s = s.as_ref();
    let rows = [
        prepare(s, "tb-1", Due::Later).await,
        prepare(s, "tb-2", Due::Later).await,
        prepare(s, "tb-3", Due::Later).await,
    ];
    let commit = |m: &Message, version: u64| Transition {
        id: m.id,
        from: MessageStatus::Prepared,
        version,
        to: MessageStatus::Committed,
        send_lease: Duration::from_secs(60),
        verify_attempt: false,
        error: None,
        actor: producer(),
        reason: "batched commit".into(),
    };
    let ts = [
        commit(&rows[0], rows[0].version),
        commit(&rows[1], rows[1].version + 7),
        commit(&rows[2], rows[2].version),
    ];
    let results = s.transition_batch(&ts).await.unwrap();
    assert_eq!(results.len(), 3);
    for i in [0, 2] {
        let m = results[i].as_ref().expect("guard held");
        assert_eq!(m.id, rows[i].id);
        assert_eq!(m.status, MessageStatus::Committed);
        assert_eq!(m.send_status, Some(SendStatus::Pending));
        assert_eq!(m.version, rows[i].version + 1);
        assert_eq!(audit_lines(s, m.id).await.len(), 1);
    }
    assert!(results[1].is_none(), "a stale version matches nothing");
    let untouched = s.find_message_by_id(rows[1].id).await.unwrap().unwrap();
    assert_eq!(untouched, rows[1]);
    assert!(audit_lines(s, rows[1].id).await.is_empty());
}

async fn a_decision_batch_has_the_outcomes_of_deciding_one_by_one(s: &DynStore) {
    let s = s.as_ref();
    prepare(s, "db-commit", Due::Later).await;
    prepare(s, "db-rollback", Due::Later).await;
    let committed = decided(decide_key(s, "db-committed", false, producer(), Duration::ZERO).await);
    prepare(s, "db-committed2", Due::Later).await;
    decide_key(
        s,
        "db-committed2",
        true,
        producer(),
        Duration::from_secs(60),
    )
    .await;
    let req = |key: &'static str, commit: bool| DecideRequest {
        target: Target::Key {
            biz_id: BIZ,
            message_key: key,
        },
        commit,
        actor: producer(),
        reason: "batched".into(),
        send_lease: Duration::from_secs(60),
        verify_attempt: false,
    };
    let reqs = [
        req("db-commit", true),
        req("db-rollback", false),
        req("db-committed", true),
        req("db-committed2", false),
        req("db-missing", true),
        req("db-tombstone", false),
        req("db-commit", true),
    ];
    let outcomes = store::decide_batch(s, &reqs).await.unwrap();
    let names: Vec<String> = outcomes
        .iter()
        .map(|o| match o {
            DecideOutcome::Decided(m) => format!("decided {}", m.status.as_str()),
            DecideOutcome::AlreadyDecided(m) => format!("already {}", m.status.as_str()),
            DecideOutcome::Conflict(m) => format!("conflict {}", m.status.as_str()),
            DecideOutcome::NotFound => "not found".into(),
        })
        .collect();
    assert_eq!(
        names,
        [
            "decided COMMITTED",
            "decided ROLLED_BACK",
            "conflict ROLLED_BACK",
            "conflict COMMITTED",
            "not found",
            "decided ROLLED_BACK",
            "already COMMITTED",
        ]
    );
    assert_eq!(committed.status, MessageStatus::RolledBack);
    assert!(s.find_message(BIZ, "db-missing").await.unwrap().is_none());
    let tomb = s.find_message(BIZ, "db-tombstone").await.unwrap().unwrap();
    assert!(tomb.tombstone);
    let c = s.find_message(BIZ, "db-commit").await.unwrap().unwrap();
    assert_eq!(
        audit_lines(s, c.id).await.len(),
        1,
        "decided once, audited once"
    );
}

// ---------------------------------------------------------------------------
// producers

fn producer_record(biz_id: &str) -> ProducerRecord {
    ProducerRecord {
        biz_id: biz_id.into(),
        verify_url: "http://127.0.0.1:9000/check".into(),
        verify_timeout_ms: 3_000,
        first_verify_after_ms: 30_000,
        max_verify_attempts: 15,
        token_hash: vec![1; 32],
        signing_secret: "whsec_first".into(),
    }
}

async fn producers_can_be_created_found_updated_and_deleted(s: &DynStore) {
    let s = s.as_ref();
    assert_eq!(s.find_producer("billing").await.unwrap(), None);
    let t0 = s.now().await.unwrap();
    let created = s
        .upsert_producer(&producer_record("billing"))
        .await
        .unwrap();
    let t1 = s.now().await.unwrap();
    assert_eq!(created.biz_id, "billing");
    assert_eq!(created.verify_url, "http://127.0.0.1:9000/check");
    assert_eq!(
        (
            created.verify_timeout_ms,
            created.first_verify_after_ms,
            created.max_verify_attempts
        ),
        (3_000, 30_000, 15)
    );
    assert_eq!(created.token_hash, vec![1; 32]);
    assert_eq!(created.signing_secret, "whsec_first");
    assert!(t0 <= created.created_at && created.created_at <= t1);
    assert_eq!(created.updated_at, created.created_at);
    assert_eq!(
        s.find_producer("billing").await.unwrap(),
        Some(created.clone())
    );
    for other in ["Billing", "billing "] {
        assert_eq!(
            s.find_producer(other).await.unwrap(),
            None,
            "{other:?} is another biz_id"
        );
    }

    tokio::time::sleep(Duration::from_millis(5)).await;
    let update = ProducerRecord {
        verify_url: "http://127.0.0.1:9001/v2/check".into(),
        verify_timeout_ms: 1_000,
        first_verify_after_ms: 5_000,
        max_verify_attempts: 3,
        token_hash: vec![2; 32],
        signing_secret: "whsec_second".into(),
        ..producer_record("billing")
    };
    let updated = s.upsert_producer(&update).await.unwrap();
    assert_eq!(updated.verify_url, "http://127.0.0.1:9001/v2/check");
    assert_eq!(
        (
            updated.verify_timeout_ms,
            updated.first_verify_after_ms,
            updated.max_verify_attempts
        ),
        (1_000, 5_000, 3)
    );
    assert_eq!(
        (updated.token_hash.clone(), updated.signing_secret.as_str()),
        (vec![1; 32], "whsec_first"),
        "an update keeps the token and the signing secret"
    );
    assert_eq!(updated.created_at, created.created_at);
    assert!(updated.updated_at > created.updated_at);
    assert_eq!(s.find_producer("billing").await.unwrap(), Some(updated));

    assert!(s.delete_producer("billing").await.unwrap());
    assert_eq!(s.find_producer("billing").await.unwrap(), None);
    assert!(!s.delete_producer("billing").await.unwrap());
}

async fn set_producer_token_replaces_the_hash_of_an_existing_producer_only(s: &DynStore) {
    let s = s.as_ref();
    assert!(!s.set_producer_token("nobody", &[9; 32]).await.unwrap());
    assert_eq!(s.find_producer("nobody").await.unwrap(), None);
    let created = s
        .upsert_producer(&producer_record("billing"))
        .await
        .unwrap();
    let other = s
        .upsert_producer(&producer_record("payments"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(s.set_producer_token("billing", &[9; 32]).await.unwrap());
    let now = s.find_producer("billing").await.unwrap().unwrap();
    assert_eq!(now.token_hash, vec![9; 32]);
    assert_eq!(now.signing_secret, created.signing_secret);
    assert!(now.updated_at > created.updated_at);
    assert_eq!(s.find_producer("payments").await.unwrap(), Some(other));
}

// ---------------------------------------------------------------------------
// clock

async fn times_come_from_the_database_clock_in_utc_with_millisecond_precision(s: &DynStore) {
    let s = s.as_ref();
    let t0 = s.now().await.unwrap();
    assert!(is_whole_ms(t0), "{t0} has sub-millisecond digits");
    let drift = (t0 - Utc::now()).num_seconds().abs();
    assert!(
        drift < 60,
        "database clock is {drift}s off UTC: a time zone mix-up"
    );

    let m = prepare(s, "clock", Due::Later).await;
    let m = s
        .insert_prepared(&new_message("clock-2", Duration::from_millis(1_234)))
        .await
        .map(|i| match i {
            Inserted::Created(m) => m,
            other => panic!("{other:?} (after {m:?})"),
        })
        .unwrap();
    let t1 = s.now().await.unwrap();
    assert!(t0 <= m.created_at && m.created_at <= t1);
    assert_eq!(
        m.next_verify_at,
        Some(m.created_at + chrono::Duration::milliseconds(1_234)),
        "due-times are database time plus the delay, to the millisecond"
    );
    let m = decided(decide_key(s, "clock-2", true, producer(), Duration::from_millis(1_001)).await);
    for t in [
        m.created_at,
        m.updated_at,
        m.decided_at.unwrap(),
        m.next_send_at.unwrap(),
    ] {
        assert!(is_whole_ms(t), "{t} has sub-millisecond digits");
    }
    let audit = &s.audit_trail(m.id).await.unwrap()[0];
    assert!(is_whole_ms(audit.created_at));
    assert!(m.decided_at.unwrap() <= audit.created_at);

    // Milliseconds are real, not a seconds clock padded with zeros.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let t2 = s.now().await.unwrap();
    assert!(t2 > t1, "{t2} is not after {t1}");
    tokio::time::sleep(Duration::from_millis(5)).await;
    let t3 = s.now().await.unwrap();
    assert!(t3 > t2, "{t3} is not after {t2}");
}

// ---------------------------------------------------------------------------

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        /// Every conformance test on a fresh MariaDB database.
        mod mysql {
            $(
                #[tokio::test]
                async fn $name() {
                    let backend = super::Backend::mysql().await;
                    super::$name(&backend.store).await;
                    backend.finish().await;
                }
            )*
        }

        /// Every conformance test on a fresh SQLite file.
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let backend = super::Backend::sqlite().await;
                    super::$name(&backend.store).await;
                    backend.finish().await;
                }
            )*
        }
    };
}

conformance!(
    a_prepare_batch_creates_each_new_key_once_and_returns_the_rows_already_there,
    a_transition_batch_applies_the_guards_that_hold_and_nothing_for_a_stale_one,
    a_decision_batch_has_the_outcomes_of_deciding_one_by_one,
    release_verify_hands_a_claim_back_without_counting_an_attempt,
    prepare_of_a_new_key_creates_a_prepared_row_due_after_the_first_check_delay,
    prepare_again_with_the_same_content_returns_the_stored_row_unchanged_in_every_state,
    prepare_again_with_different_content_returns_the_stored_row_with_another_digest_in_every_state,
    message_keys_are_unique_byte_for_byte,
    commit_of_an_unknown_message_is_not_found_and_creates_nothing,
    commit_of_a_prepared_message_commits_it_and_claims_it_for_sending,
    commit_of_a_verify_failed_message_commits_it_and_audits_it,
    commit_of_a_committed_message_is_an_idempotent_repeat_in_every_send_state,
    commit_after_rollback_is_a_conflict,
    rollback_of_an_unknown_message_leaves_an_audited_tombstone,
    rollback_of_a_prepared_message_rolls_it_back_and_audits_it,
    rollback_of_a_verify_failed_message_rolls_it_back_and_audits_it,
    rollback_of_a_rolled_back_message_or_tombstone_is_an_idempotent_repeat,
    rollback_after_commit_is_a_conflict_in_every_send_state,
    decide_by_id_of_an_unknown_message_is_not_found_and_leaves_no_tombstone,
    a_check_back_decision_by_id_counts_as_a_verify_attempt,
    verify_failed_transition_applies_only_to_a_prepared_row,
    a_transition_with_a_stale_version_matches_nothing,
    racing_commit_and_rollback_decide_exactly_once,
    claim_due_sends_takes_only_committed_pending_rows_that_are_due,
    claim_due_sends_skips_claimed_rows_until_a_short_lease_runs_out,
    claim_due_sends_takes_at_most_the_limit,
    racing_claimers_never_take_the_same_row,
    mark_sent_matches_only_the_claimed_version_of_a_pending_row,
    mark_sent_with_a_stale_version_matches_nothing,
    reschedule_send_applies_only_to_a_pending_row,
    mark_send_failed_applies_only_to_a_pending_row_and_audits_it,
    claim_due_verifies_takes_only_prepared_rows_that_are_due,
    claim_due_verifies_skips_claimed_rows_until_a_short_lease_runs_out,
    reschedule_verify_applies_only_to_a_prepared_row,
    producers_can_be_created_found_updated_and_deleted,
    set_producer_token_replaces_the_hash_of_an_existing_producer_only,
    times_come_from_the_database_clock_in_utc_with_millisecond_precision,
);

// ---------------------------------------------------------------------------
// SQLite-only: how the embedded store is opened.

#[tokio::test]
async fn sqlite_in_memory_url_keeps_one_database_for_the_life_of_the_store() {
    let s = store::connect("sqlite::memory:").await.unwrap();
    s.migrate().await.unwrap();
    let m = prepare(s.as_ref(), "in-memory", Due::Later).await;
    // Concurrent calls must all see the same (single-connection) database.
    let (a, b) = tokio::join!(s.find_message_by_id(m.id), s.find_message(BIZ, "in-memory"));
    assert_eq!(a.unwrap(), Some(m.clone()));
    assert_eq!(b.unwrap(), Some(m.clone()));
    let t = decided(decide_key(s.as_ref(), "in-memory", false, producer(), LATER).await);
    assert_eq!(t.status, MessageStatus::RolledBack);
}

#[tokio::test]
async fn sqlite_file_is_created_when_missing_and_runs_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fresh.db");
    assert!(!path.exists());
    let url = format!("sqlite://{}", path.display());
    let s = trustmsg::store::sqlite::SqliteStore::connect(&url)
        .await
        .unwrap();
    s.migrate().await.unwrap();
    assert!(path.exists(), "connect must create the database file");
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(s.pool())
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    let busy: i64 = sqlx::query_scalar("PRAGMA busy_timeout")
        .fetch_one(s.pool())
        .await
        .unwrap();
    assert!(busy >= 1_000, "busy_timeout is {busy} ms");
    // And the schema is really there: a second connect sees the same rows.
    prepare(&s, "persisted", Due::Later).await;
    s.pool().close().await;
    let again = store::connect(&url).await.unwrap();
    again.migrate().await.unwrap();
    assert!(again
        .find_message(BIZ, "persisted")
        .await
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn sqlite_due_scans_use_their_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("plan.db").display());
    let s = trustmsg::store::sqlite::SqliteStore::connect(&url)
        .await
        .unwrap();
    s.migrate().await.unwrap();
    for (column, index) in [
        ("next_send_at", "idx_messages_send_due"),
        ("next_verify_at", "idx_messages_verify_due"),
    ] {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "EXPLAIN QUERY PLAN SELECT id FROM messages WHERE {column} <= 0 ORDER BY {column} LIMIT 10"
        )))
        .fetch_all(s.pool())
        .await
        .unwrap();
        let details: Vec<String> = rows
            .iter()
            .map(|r| sqlx::Row::get::<String, _>(r, "detail"))
            .collect();
        assert!(
            details.iter().any(|d| d.contains(index)),
            "{column} scan does not use {index}: {details:?}"
        );
    }
}
