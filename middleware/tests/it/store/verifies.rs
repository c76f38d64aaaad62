//! Check-back scheduling: claims of due PREPARED rows with a lease, retries
//! that count an attempt, and releases that do not.

use std::time::Duration;

use trustmsg::store::DynStore;
use trustmsg_verify_api::MessageStatus;

use crate::store::harness::*;

pub(crate) async fn claim_due_verifies_takes_only_prepared_rows_that_are_due(s: &DynStore) {
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
    let claimed = s.claim_due_verifies(100, lease).await.unwrap().messages;
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

pub(crate) async fn claim_due_verifies_skips_claimed_rows_until_a_short_lease_runs_out(
    s: &DynStore,
) {
    let s = s.as_ref();
    let before = arrange(s, State::Prepared, Due::Now).await.unwrap();
    let lease = Duration::from_millis(300);
    let first = s.claim_due_verifies(10, lease).await.unwrap().messages;
    assert_eq!(first.len(), 1);
    assert!(
        s.claim_due_verifies(10, lease)
            .await
            .unwrap()
            .messages
            .is_empty(),
        "a claimed row is not claimed again within its lease"
    );
    let again =
        claim_eventually(|| async { s.claim_due_verifies(10, LATER).await.unwrap().messages })
            .await;
    let now = s.now().await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].id, before.id);
    assert_eq!(again[0].version, before.version + 2);
    assert!(
        now >= first[0].next_verify_at.unwrap(),
        "reclaimed before the lease ran out"
    );
}

pub(crate) async fn reschedule_verify_applies_only_to_a_prepared_row(s: &DynStore) {
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

pub(crate) async fn release_verify_hands_a_claim_back_without_counting_an_attempt(s: &DynStore) {
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
