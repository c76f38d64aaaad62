//! Sending (`docs/architecture.md`, Forwarder): claims with a lease, SENT with partition and offset,
//! retries and SEND_FAILED, each guarded by the claim's version.

use std::collections::BTreeSet;
use std::time::Duration;

use trustmsg::store::{
    Actor, DynStore, Message, PayloadRoom, Reschedule, SendOwner, SentMark, Store,
};
use trustmsg_verify_api::{MessageStatus, SendStatus};

use crate::store::harness::*;

pub(crate) async fn claim_due_sends_takes_only_committed_pending_rows_that_are_due(s: &DynStore) {
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
    let claimed = s.claim_due_sends(100, ROOM, lease).await.unwrap().messages;
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

pub(crate) async fn claim_due_sends_skips_claimed_rows_until_a_short_lease_runs_out(s: &DynStore) {
    let s = s.as_ref();
    let before = arrange(s, State::SendPending, Due::Now).await.unwrap();
    // Short, but longer than two claims take on a loaded machine: with
    // 300 ms, the sharded store's second claim came after the lease in a
    // full run and took the row back.
    let lease = Duration::from_secs(4);
    let first = s.claim_due_sends(10, ROOM, lease).await.unwrap().messages;
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].version, before.version + 1);
    assert!(
        s.claim_due_sends(10, ROOM, lease)
            .await
            .unwrap()
            .messages
            .is_empty(),
        "a claimed row is not claimed again within its lease"
    );
    let again = claim_eventually(|| claim_sends(s)).await;
    assert_reclaimed_after_the_lease(s, &before, &again, first[0].next_send_at).await;
}

pub(crate) async fn claim_due_sends_takes_at_most_the_limit(s: &DynStore) {
    let s = s.as_ref();
    for i in 0..3 {
        arrange_key(s, &format!("batch-{i}"), State::SendPending, Due::Now).await;
    }
    let a = s.claim_due_sends(2, ROOM, LATER).await.unwrap().messages;
    let b = s.claim_due_sends(2, ROOM, LATER).await.unwrap().messages;
    let c = s.claim_due_sends(2, ROOM, LATER).await.unwrap().messages;
    assert_eq!((a.len(), b.len(), c.len()), (2, 1, 0));
    let ids: BTreeSet<u64> = a.iter().chain(&b).map(|m| m.id).collect();
    assert_eq!(ids.len(), 3);
}

/// A send claim reads its rows whole, so its room bounds the memory it
/// takes: it takes, in due order, the rows whose payloads fit by the
/// lengths their prepares recorded; the rest stay due, and the claim says
/// it ran out of room. What it takes comes with the whole payload.
pub(crate) async fn a_send_claim_takes_the_rows_whose_payloads_fit_its_room(s: &DynStore) {
    let s = s.as_ref();
    let mut arranged = BTreeSet::new();
    for i in 0..3 {
        let m = arrange_key(s, &format!("sized-{i}"), State::SendPending, Due::Now).await;
        arranged.insert(m.unwrap().id);
    }
    let payload = new_message("any", LATER).payload;
    let len = payload.len() as u64;
    // Room for two payloads, and for none if a length were unknown: the
    // claim must read the lengths (10 rows of unknown length do not fit).
    let room = PayloadRoom {
        bytes: 2 * len + 1,
        unknown: len + 1,
    };
    let first = s.claim_due_sends(10, room, LATER).await.unwrap();
    assert_eq!(first.messages.len(), 2, "{:?}", first.messages);
    assert!(first.out_of_room, "a due row did not fit");
    let rest = s.claim_due_sends(10, room, LATER).await.unwrap();
    assert_eq!(rest.messages.len(), 1);
    assert!(!rest.out_of_room, "nothing is left to fit");
    let claimed: Vec<&Message> = first.messages.iter().chain(&rest.messages).collect();
    assert_eq!(
        claimed.iter().map(|m| m.id).collect::<BTreeSet<_>>(),
        arranged
    );
    for m in claimed {
        assert_eq!(
            m.payload, payload,
            "message {} came without its payload",
            m.id
        );
        assert_eq!(s.find_message_by_id(m.id).await.unwrap().as_ref(), Some(m));
    }
    assert!(
        s.claim_due_sends(10, room, LATER)
            .await
            .unwrap()
            .messages
            .is_empty(),
        "each row was leased once claimed"
    );
}

/// A row too large for the room is not claimed at all; a row whose length
/// was never recorded (written before migration 0016) counts as the
/// largest payload.
pub(crate) async fn a_send_claim_counts_an_unrecorded_length_as_the_largest(b: &Backend) {
    let s = b.store.as_ref();
    let m = arrange_key(s, "unsized", State::SendPending, Due::Now)
        .await
        .unwrap();
    let len = m.payload.len() as u64;
    let too_small = PayloadRoom {
        bytes: len - 1,
        unknown: len,
    };
    let claim = s.claim_due_sends(10, too_small, LATER).await.unwrap();
    assert!(claim.messages.is_empty() && claim.out_of_room, "{claim:?}");

    let sql = "UPDATE messages SET payload_bytes = NULL WHERE id = ?";
    assert_eq!(b.raw_execute(sql, m.id).await, 1);
    let unknown_too_large = PayloadRoom {
        bytes: 1000,
        unknown: 1001,
    };
    let claim = s
        .claim_due_sends(10, unknown_too_large, LATER)
        .await
        .unwrap();
    assert!(claim.messages.is_empty() && claim.out_of_room, "{claim:?}");
    let unknown_fits = PayloadRoom {
        bytes: 1001,
        unknown: 1001,
    };
    let claim = s.claim_due_sends(10, unknown_fits, LATER).await.unwrap();
    assert_eq!(claim.messages.len(), 1);
    assert_eq!(claim.messages[0].payload, m.payload);
    assert!(!claim.out_of_room);
}

pub(crate) async fn racing_claimers_never_take_the_same_row(s: &DynStore) {
    for i in 0..20 {
        arrange_key(
            s.as_ref(),
            &format!("many-{i}"),
            State::SendPending,
            Due::Now,
        )
        .await;
    }
    let claim = || async { s.claim_due_sends(5, ROOM, LATER).await.unwrap().messages };
    let (a, b, c, d) = tokio::join!(claim(), claim(), claim(), claim());
    let rest = s.claim_due_sends(100, ROOM, LATER).await.unwrap().messages;
    let all: Vec<u64> = [a, b, c, d, rest].iter().flatten().map(|m| m.id).collect();
    let distinct: BTreeSet<u64> = all.iter().copied().collect();
    assert_eq!(
        all.len(),
        distinct.len(),
        "a row was claimed twice: {all:?}"
    );
    assert_eq!(distinct.len(), 20);
}

pub(crate) async fn mark_sent_matches_only_the_claimed_version_of_a_pending_row(s: &DynStore) {
    let s = s.as_ref();
    for state in STATES {
        let before = arrange(s, state, Due::Later).await;
        let audit = audit_len(s, &before).await;
        let mark = SentMark {
            id: id_of(&before),
            version: version_of(&before),
            partition: 7,
            offset: 1234,
            order: None,
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

pub(crate) async fn mark_sent_with_a_stale_version_matches_nothing(s: &DynStore) {
    let s = s.as_ref();
    let a = arrange_key(s, "stale-a", State::SendPending, Due::Now)
        .await
        .unwrap();
    let b = arrange_key(s, "stale-b", State::SendPending, Due::Later)
        .await
        .unwrap();
    // Another instance re-claims `a` after our lease ran out: our version is stale.
    let reclaimed = s
        .claim_due_sends(10, ROOM, LATER)
        .await
        .unwrap()
        .messages
        .pop()
        .unwrap();
    assert_eq!(reclaimed.id, a.id);
    let stale = SentMark {
        id: a.id,
        version: a.version,
        partition: 0,
        offset: 1,
        order: None,
    };
    let fresh = SentMark {
        id: b.id,
        version: b.version,
        partition: 0,
        offset: 2,
        order: None,
    };
    assert_eq!(s.mark_sent(&[stale, fresh]).await.unwrap(), 1);
    assert_eq!(
        s.find_message_by_id(a.id).await.unwrap(),
        Some(reclaimed.clone())
    );
    let b_now = s.find_message_by_id(b.id).await.unwrap().unwrap();
    assert_eq!(b_now.send_status, Some(SendStatus::Sent));
    assert_eq!(s.mark_sent(&[]).await.unwrap(), 0);
    // The current claimer's mark still lands, with its own partition and
    // offset, even beside the stale owner's mark for the same row.
    let current = SentMark {
        version: reclaimed.version,
        partition: 2,
        offset: 7,
        order: None,
        ..stale
    };
    assert_eq!(s.mark_sent(&[stale, current, stale]).await.unwrap(), 1);
    let a_now = s.find_message_by_id(a.id).await.unwrap().unwrap();
    assert_eq!(
        (a_now.send_status, a_now.kafka_partition, a_now.kafka_offset),
        (Some(SendStatus::Sent), Some(2), Some(7))
    );
    assert_eq!(a_now.version, reclaimed.version + 1);
}

pub(crate) async fn reschedule_send_applies_only_to_a_pending_row(s: &DynStore) {
    let s = s.as_ref();
    let (before, audit, m) =
        retry_of_a_pending_send_only(s, "broker down", move |id, version| async move {
            s.reschedule_send(&Reschedule {
                id,
                version,
                error: "broker down".into(),
                delay: RETRY_DELAY,
            })
            .await
            .unwrap()
        })
        .await;
    assert_eq!(m.send_attempts, before.send_attempts + 1);
    assert_eq!(
        audit_lines(s, m.id).await.len(),
        audit,
        "a retry is not audited"
    );
    // The version moved on: the same stale write now matches nothing.
    assert!(!s
        .reschedule_send(&Reschedule {
            id: m.id,
            version: before.version,
            error: "broker down".into(),
            delay: RETRY_DELAY
        })
        .await
        .unwrap());
}

pub(crate) async fn postpone_send_reschedules_only_a_pending_row_without_counting_an_attempt(
    s: &DynStore,
) {
    let s = s.as_ref();
    let (before, audit, m) =
        retry_of_a_pending_send_only(s, "timed out", move |id, version| async move {
            s.postpone_send(&Reschedule {
                id,
                version,
                error: "timed out".into(),
                delay: RETRY_DELAY,
            })
            .await
            .unwrap()
        })
        .await;
    assert_eq!(m.send_attempts, before.send_attempts, "no attempt counted");
    assert_eq!(audit_lines(s, m.id).await.len(), audit, "not audited");
    // Counted and uncounted retries add up on the same row.
    assert!(s
        .reschedule_send(&Reschedule {
            id: m.id,
            version: m.version,
            error: "broker said no".into(),
            delay: RETRY_DELAY
        })
        .await
        .unwrap());
    let counted = s.find_message_by_id(m.id).await.unwrap().unwrap();
    assert_eq!(counted.send_attempts, before.send_attempts + 1);
    // The version moved on: the same stale write now matches nothing.
    assert!(!s
        .postpone_send(&Reschedule {
            id: m.id,
            version: m.version,
            error: "timed out".into(),
            delay: RETRY_DELAY
        })
        .await
        .unwrap());
}

/// How long the retries above put a send off.
const RETRY_DELAY: Duration = Duration::from_millis(5_500);

/// Applies `retry` (a write of `error` due [`RETRY_DELAY`] from now) in every
/// state: it must match the pending row alone, which is then still COMMITTED
/// and PENDING, one version on. Returns that row before, its audit length
/// then, and the row now.
async fn retry_of_a_pending_send_only<F, Fut>(
    s: &dyn Store,
    error: &str,
    retry: F,
) -> (Message, usize, Message)
where
    F: FnMut(u64, u64) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let (before, audit, ok) =
        apply_in_every_state(s, State::SendPending, "be rescheduled for sending", retry).await;
    assert!(ok);
    let m = s.find_message_by_id(before.id).await.unwrap().unwrap();
    assert_eq!(
        (m.status, m.send_status),
        (MessageStatus::Committed, Some(SendStatus::Pending))
    );
    assert_eq!(m.last_error.as_deref(), Some(error));
    assert_eq!(m.version, before.version + 1);
    assert_eq!(
        m.next_send_at,
        Some(m.updated_at + chrono::Duration::milliseconds(5_500))
    );
    (before, audit, m)
}

/// What a send claim of up to ten rows, leased for an hour, takes.
async fn claim_sends(s: &dyn Store) -> Vec<Message> {
    s.claim_due_sends(10, ROOM, LATER).await.unwrap().messages
}

pub(crate) async fn mark_send_failed_applies_only_to_a_pending_row_and_audits_it(s: &DynStore) {
    let s = s.as_ref();
    let (before, _, got) = apply_in_every_state(
        s,
        State::SendPending,
        "become SEND_FAILED",
        move |id, version| async move {
            s.mark_send_failed(id, version, "topic authorization failed", &Actor::Forwarder)
                .await
                .unwrap()
        },
    )
    .await;
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

pub(crate) async fn release_sends_makes_only_the_named_pending_claims_due_at_once(s: &DynStore) {
    let s = s.as_ref();
    // One row in each state, given back in one call: only the PENDING one
    // (claimed for an hour by its commit) matches.
    let rows = arrange_every_state(s).await;
    let claims = claims_of(&rows);
    assert!(claim_sends(s).await.is_empty());
    assert_eq!(s.release_sends(&claims).await.unwrap(), 1);
    for (state, before, audit) in &rows {
        if *state != State::SendPending {
            assert_untouched(s, *state, before, *audit).await;
        }
    }
    let pending = rows[2].1.clone().unwrap();
    let claimed = claim_sends(s).await;
    assert_eq!(
        claimed.iter().map(|m| m.id).collect::<Vec<_>>(),
        [pending.id],
        "due at once"
    );
    assert_eq!(
        claimed[0].version,
        pending.version + 1,
        "claimed from the same version"
    );

    // A stale claim (the row was claimed again since) matches nothing.
    assert_eq!(
        s.release_sends(&[(pending.id, pending.version)])
            .await
            .unwrap(),
        0
    );
    assert!(claim_sends(s).await.is_empty());
    assert_eq!(s.release_sends(&[]).await.unwrap(), 0);
}

pub(crate) async fn a_batch_of_sent_marks_gives_each_row_its_own_partition_and_offset(
    s: &DynStore,
) {
    let s = s.as_ref();
    let mut rows = Vec::new();
    for i in 0..5 {
        let key = format!("marks-{i}");
        rows.push(
            arrange_key(s, &key, State::SendPending, Due::Later)
                .await
                .unwrap(),
        );
    }
    let marks: Vec<SentMark> = rows
        .iter()
        .enumerate()
        .map(|(i, m)| SentMark {
            id: m.id,
            version: m.version,
            partition: i as i32 % 3,
            offset: 1_000 + 7 * i as i64,
            order: None,
        })
        .collect();
    assert_eq!(s.mark_sent(&marks).await.unwrap(), 5);
    for (m, mark) in rows.iter().zip(&marks) {
        let now = s.find_message_by_id(m.id).await.unwrap().unwrap();
        assert_eq!(
            (now.send_status, now.kafka_partition, now.kafka_offset),
            (
                Some(SendStatus::Sent),
                Some(mark.partition),
                Some(mark.offset)
            ),
            "{}",
            m.message_key
        );
        assert_eq!(now.version, m.version + 1);
        assert_eq!(now.send_attempts, m.send_attempts + 1);
    }
    assert_eq!(s.mark_sent(&marks).await.unwrap(), 0, "marked once");
}

/// A fencer gives back the lapsed claims it read before its fence, and no
/// claim the owner took since: a claim the owner takes again (after opening
/// its producer anew) has a new version and stays its own, while another
/// lapsed one is given back, due at once, nobody's, its version bumped.
pub(crate) async fn a_fencer_gives_back_only_the_lapsed_claims_it_read_before_its_fence(
    s: &DynStore,
) {
    let s = s.as_ref();
    let a = SendOwner::new("a-1").unwrap();
    for key in ["one", "two", "three"] {
        prepare(s, key, Due::Later).await;
        decided(decide_key(s, key, true, producer(), Duration::ZERO).await);
    }
    let short = Duration::from_millis(300);
    let mut claimed = s
        .claim_owned_sends(&a, 2, ROOM, short)
        .await
        .unwrap()
        .messages;
    claimed.sort_by_key(|m| m.id);
    assert_eq!(claimed.len(), 2);
    assert_eq!(
        s.lapsed_claims(&a).await.unwrap(),
        [],
        "nothing lapsed while the claims hold"
    );
    tokio::time::sleep(short + Duration::from_millis(300)).await;
    let mut lapsed = s.lapsed_claims(&a).await.unwrap();
    lapsed.sort_unstable();
    let before: Vec<(u64, u64)> = claimed.iter().map(|m| (m.id, m.version)).collect();
    assert_eq!(lapsed, before, "both claims ran out, at their versions");

    // The owner, its producer opened anew, gives the second back (as its
    // own recovery does) and claims again: the first and the second under
    // new versions, and the third. Then the fencer gives back what it read.
    let (first, second) = (&claimed[0], &claimed[1]);
    s.release_sends(&[(second.id, second.version)])
        .await
        .unwrap();
    let retaken = s
        .claim_owned_sends(&a, 10, ROOM, Duration::from_secs(60))
        .await
        .unwrap()
        .messages;
    let again = retaken.iter().find(|m| m.id == first.id).unwrap();
    assert!(again.version > first.version);
    let second_now = retaken.iter().find(|m| m.id == second.id).unwrap();
    assert_eq!(
        s.release_claims_of(&a, &lapsed).await.unwrap(),
        0,
        "every claim read before the fence was taken again since: none is given back"
    );
    let mut held = s.held_claims(&a, &[first.id, second.id]).await.unwrap();
    held.sort_unstable();
    assert_eq!(
        held,
        [
            (again.id, again.version),
            (second_now.id, second_now.version)
        ],
        "the owner keeps its new claims"
    );
    let other = SendOwner::new("b.2").unwrap();
    assert_eq!(
        s.release_claims_of(&other, &[(again.id, again.version)])
            .await
            .unwrap(),
        0,
        "only the owner's own claims are given back"
    );
    assert_eq!(
        s.release_claims_of(&a, &[(again.id, again.version)])
            .await
            .unwrap(),
        1
    );
    let row = s.find_message_by_id(again.id).await.unwrap().unwrap();
    assert!(row.version > again.version, "its version bumped");
    assert_eq!(
        s.held_claims(&a, &[again.id]).await.unwrap(),
        [],
        "nobody's"
    );
    let taken = s
        .claim_owned_sends(&other, 10, ROOM, Duration::from_secs(60))
        .await
        .unwrap()
        .messages;
    assert_eq!(
        taken.iter().map(|m| m.id).collect::<Vec<_>>(),
        [again.id],
        "due at once for anyone"
    );
}

/// The exactly-once mode's claims (issue 63): a claim names its owner; no
/// other owner takes the row while the claim holds, nor once it has run
/// out, but sees the owner among the lapsed ones; a retry is nobody's;
/// once the owner's claims are given back, anyone takes them. What the
/// owner holds (`held_claims`) follows each step.
pub(crate) async fn an_owned_claim_is_taken_by_no_other_owner_until_its_owner_is_released(
    s: &DynStore,
) {
    let s = s.as_ref();
    let (a, b) = (
        SendOwner::new("a-1").unwrap(),
        SendOwner::new("b.2").unwrap(),
    );
    for key in ["one", "two"] {
        prepare(s, key, Due::Later).await;
        // No send lease: due at once, as an exactly-once instance commits.
        decided(decide_key(s, key, true, producer(), Duration::ZERO).await);
    }
    let short = Duration::from_millis(300);
    let claimed = s
        .claim_owned_sends(&a, 10, ROOM, short)
        .await
        .unwrap()
        .messages;
    assert_eq!(claimed.len(), 2, "a takes both");
    let ids = [claimed[0].id, claimed[1].id, claimed[1].id + 1000];
    let held = |owner: &SendOwner| {
        let owner = owner.clone();
        async move {
            let mut held = s.held_claims(&owner, &ids).await.unwrap();
            held.sort_unstable();
            held
        }
    };
    let mut both: Vec<(u64, u64)> = claimed.iter().map(|m| (m.id, m.version)).collect();
    both.sort_unstable();
    assert_eq!(
        held(&a).await,
        both,
        "a holds both, at its claims' versions"
    );
    assert_eq!(held(&b).await, [], "b holds nothing");
    assert!(
        s.claim_owned_sends(&b, 10, ROOM, short)
            .await
            .unwrap()
            .messages
            .is_empty(),
        "b takes nothing a holds"
    );
    assert_eq!(s.lapsed_owners(&b).await.unwrap(), Vec::<SendOwner>::new());

    tokio::time::sleep(short + Duration::from_millis(300)).await;
    assert!(
        s.claim_owned_sends(&b, 10, ROOM, short)
            .await
            .unwrap()
            .messages
            .is_empty(),
        "b takes nothing of a's, lapsed or not, before a's claims are given back"
    );
    assert_eq!(s.lapsed_owners(&b).await.unwrap(), vec![a.clone()]);
    assert_eq!(s.lapsed_owners(&a).await.unwrap(), Vec::<SendOwner>::new());
    // The plain claim of the default mode passes over nothing: it is not
    // used beside this one.

    // A retry of one is nobody's claim.
    let (one, two) = (&claimed[0], &claimed[1]);
    let retry = Reschedule {
        id: one.id,
        version: one.version,
        error: "aborted with its transaction".into(),
        delay: Duration::ZERO,
    };
    assert!(s.postpone_send(&retry).await.unwrap());
    assert_eq!(
        held(&a).await,
        [(claimed[1].id, claimed[1].version)],
        "a retried one: it holds two alone"
    );
    assert_eq!(
        s.release_owner(&a).await.unwrap(),
        1,
        "only two is still a's"
    );
    assert_eq!(s.lapsed_owners(&b).await.unwrap(), Vec::<SendOwner>::new());
    assert_eq!(held(&a).await, [], "a holds nothing once given back");
    let taken = s
        .claim_owned_sends(&b, 10, ROOM, Duration::from_secs(60))
        .await
        .unwrap()
        .messages;
    assert_eq!(
        taken.iter().map(|m| m.id).collect::<BTreeSet<_>>(),
        BTreeSet::from([one.id, two.id]),
        "b takes both once they are nobody's"
    );
    let again = taken.iter().find(|m| m.id == two.id).unwrap();
    assert!(again.version > two.version, "a's claim of two is stale");
}
