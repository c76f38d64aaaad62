//! Decisions (`docs/architecture.md`, States): commit and rollback from every state, through
//! [`store::decide`]; the VERIFY_FAILED and re-verify transitions; stale
//! versions and racing writers, of which exactly one wins.

use std::time::Duration;

use trustmsg::store::{
    self, Actor, DecideOutcome, DecideRequest, DynStore, Inserted, Message, Store, Target,
    Tombstone, Transition,
};
use trustmsg_verify_api::{MessageStatus, SendStatus};

use crate::store::harness::*;

pub(crate) async fn commit_of_an_unknown_message_is_not_found_and_creates_nothing(s: &DynStore) {
    let s = s.as_ref();
    let key = key_of(State::Missing);
    let got = decide_key(s, &key, true, producer(), LATER).await;
    assert_eq!(got, DecideOutcome::NotFound);
    assert_untouched(s, State::Missing, &None, 0).await;
}

pub(crate) async fn commit_of_a_prepared_message_commits_it_and_claims_it_for_sending(b: &Backend) {
    let s = b.store.as_ref();
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
    // The producer's own decision is in the trail, told by the row: it
    // writes no audit row, and the producer's reason is always the same.
    let entry = &s.audit_trail(m.id).await.unwrap()[0];
    assert_eq!(entry.reason, store::producer_reason(true));
    assert_eq!(entry.message_id, m.id);
    assert_eq!(entry.created_at, decided_at);
    let rows = "SELECT COUNT(*) FROM audit_log WHERE message_id = ?";
    assert_eq!(b.raw_count(rows, m.id).await, 0);
}

pub(crate) async fn a_producer_commit_after_a_reverify_follows_it_in_the_trail(b: &Backend) {
    let s = b.store.as_ref();
    let before = arrange(s, State::VerifyFailed, Due::Later).await.unwrap();
    let failed = audit_lines(s, before.id).await;
    assert_eq!(failed.len(), 1, "{failed:?}");
    let again = s
        .transition(&reverify(&before))
        .await
        .unwrap()
        .expect("re-verified");
    let m = decided(decide_key(s, &again.message_key, true, producer(), LATER).await);
    let later = Actor::Operator("bob".into());
    let failed_send = s
        .mark_send_failed(m.id, m.version, "broker gone", &later)
        .await
        .unwrap();
    assert!(failed_send.is_some());
    let mut want = failed.clone();
    want.extend([
        "operator:alice reverify VERIFY_FAILED=>PREPARED send -=>-".to_string(),
        "producer:shop commit PREPARED=>COMMITTED send -=>PENDING".to_string(),
        "operator:bob send_failed COMMITTED=>COMMITTED send PENDING=>SEND_FAILED".to_string(),
    ]);
    assert_eq!(audit_lines(s, m.id).await, want);
    let rows = "SELECT COUNT(*) FROM audit_log WHERE message_id = ?";
    assert_eq!(
        b.raw_count(rows, m.id).await,
        3,
        "every change but the producer's"
    );
}

pub(crate) async fn commit_of_a_verify_failed_message_commits_it_and_audits_it(s: &DynStore) {
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

pub(crate) async fn commit_of_a_committed_message_is_an_idempotent_repeat_in_every_send_state(
    s: &DynStore,
) {
    deciding_again_answers(
        s.as_ref(),
        true,
        &[State::SendPending, State::Sent, State::SendFailed],
        DecideOutcome::AlreadyDecided,
    )
    .await;
}

pub(crate) async fn commit_after_rollback_is_a_conflict(s: &DynStore) {
    deciding_again_answers(
        s.as_ref(),
        true,
        &[State::RolledBack, State::Tombstone],
        DecideOutcome::Conflict,
    )
    .await;
}

/// Deciding (`commit` or rolling back) the row of each of `states` again
/// answers `outcome` with the row as it was, and changes nothing.
async fn deciding_again_answers(
    s: &dyn Store,
    commit: bool,
    states: &[State],
    outcome: fn(Message) -> DecideOutcome,
) {
    for &state in states {
        let before = arrange(s, state, Due::Later).await;
        let audit = audit_len(s, &before).await;
        let got = decide_key(s, &key_of(state), commit, producer(), LATER).await;
        assert_eq!(got, outcome(before.clone().unwrap()), "{state:?}");
        assert_untouched(s, state, &before, audit).await;
    }
}

pub(crate) async fn rollback_of_an_unknown_message_leaves_an_audited_tombstone(s: &DynStore) {
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
        s.insert_tombstone(&Tombstone {
            biz_id: BIZ,
            message_key: "never-prepared",
            actor: &producer(),
            reason: "again",
        })
        .await
        .unwrap(),
        None
    );
    assert_eq!(audit_lines(s, t.id).await.len(), 1);
}

pub(crate) async fn rollback_of_a_prepared_message_rolls_it_back_and_audits_it(s: &DynStore) {
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

pub(crate) async fn rollback_of_a_verify_failed_message_rolls_it_back_and_audits_it(s: &DynStore) {
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

pub(crate) async fn rollback_of_a_rolled_back_message_or_tombstone_is_an_idempotent_repeat(
    s: &DynStore,
) {
    deciding_again_answers(
        s.as_ref(),
        false,
        &[State::RolledBack, State::Tombstone],
        DecideOutcome::AlreadyDecided,
    )
    .await;
}

pub(crate) async fn rollback_after_commit_is_a_conflict_in_every_send_state(s: &DynStore) {
    deciding_again_answers(
        s.as_ref(),
        false,
        &[State::SendPending, State::Sent, State::SendFailed],
        DecideOutcome::Conflict,
    )
    .await;
}

pub(crate) async fn decide_by_id_of_an_unknown_message_is_not_found_and_leaves_no_tombstone(
    s: &DynStore,
) {
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

pub(crate) async fn a_check_back_decision_by_id_counts_as_a_verify_attempt(s: &DynStore) {
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

pub(crate) async fn verify_failed_transition_applies_only_to_a_prepared_row(s: &DynStore) {
    let s = s.as_ref();
    let (before, _, got) =
        transition_in_every_state(s, State::Prepared, "become VERIFY_FAILED", verify_failed).await;
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

/// The operator's re-verify: VERIFY_FAILED → PREPARED, attempts
/// back to 0, the first check due at once.
fn reverify(m: &Message) -> Transition {
    transition(
        m,
        MessageStatus::VerifyFailed,
        MessageStatus::Prepared,
        Actor::Operator("alice".into()),
        "producer fixed its check endpoint",
    )
}

pub(crate) async fn reverify_transition_applies_only_to_a_verify_failed_row_and_makes_it_due_at_once(
    s: &DynStore,
) {
    let s = s.as_ref();
    let (before, _, got) =
        transition_in_every_state(s, State::VerifyFailed, "be re-verified", reverify).await;
    assert!(before.verify_attempts > 0);
    let m = got.expect("a VERIFY_FAILED row is re-verified");
    assert_eq!(m.status, MessageStatus::Prepared);
    assert_eq!(m.send_status, None);
    assert_eq!(m.version, before.version + 1);
    assert_eq!(m.verify_attempts, 0, "attempts start over");
    assert_eq!(m.next_verify_at, Some(m.updated_at), "due at once");
    assert!(m.updated_at >= before.updated_at);
    assert_eq!(m.next_send_at, None);
    assert_eq!(m.decided_at, before.decided_at);
    assert_eq!(m.last_error, before.last_error, "the last error is kept");
    assert_eq!(s.find_message_by_id(m.id).await.unwrap(), Some(m.clone()));
    assert_eq!(
        audit_lines(s, m.id).await,
        [
            "verifier verify_failed PREPARED=>VERIFY_FAILED send -=>-",
            "operator:alice reverify VERIFY_FAILED=>PREPARED send -=>-",
        ]
    );
    assert_eq!(
        s.audit_trail(m.id).await.unwrap()[1].reason,
        "producer fixed its check endpoint"
    );
    let claimed = s
        .claim_due_verifies(10, lasting(LATER))
        .await
        .unwrap()
        .messages;
    assert_eq!(
        claimed.iter().map(|c| c.id).collect::<Vec<_>>(),
        [m.id],
        "the re-verified row is the one due for check-back"
    );
    assert_eq!(
        s.transition(&reverify(&before)).await.unwrap(),
        None,
        "a stale re-verify matches nothing"
    );
}

/// [`apply_in_every_state`] with the transition `to_transition` makes of
/// each row (or of none, for the missing state).
async fn transition_in_every_state(
    s: &dyn Store,
    applies_to: State,
    what: &str,
    to_transition: fn(&Message) -> Transition,
) -> (Message, usize, Option<Message>) {
    apply_in_every_state(s, applies_to, what, move |id, version| async move {
        let t = Transition {
            id,
            version,
            ..to_transition(&arrange_dummy())
        };
        s.transition(&t).await.unwrap()
    })
    .await
}

pub(crate) async fn a_transition_with_a_stale_version_matches_nothing(s: &DynStore) {
    let s = s.as_ref();
    let before = arrange(s, State::Prepared, Due::Now).await.unwrap();
    // A verifier claims the row (version 0 → 1); a writer still holding version 0 loses.
    let claimed = s
        .claim_due_verifies(10, lasting(LATER))
        .await
        .unwrap()
        .messages
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
    // As claimed, with the payload the claim did not read.
    let stored = Message {
        payload: before.payload.clone(),
        ..claimed.clone()
    };
    assert_untouched(s, State::Prepared, &Some(stored), 0).await;
    // The current version still wins.
    assert!(s
        .transition(&verify_failed(&claimed))
        .await
        .unwrap()
        .is_some());
}

pub(crate) async fn racing_commit_and_rollback_decide_exactly_once(s: &DynStore) {
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
