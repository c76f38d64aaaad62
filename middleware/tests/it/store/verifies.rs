//! Check-back scheduling: claims of due PREPARED rows with a lease, retries
//! that count an attempt, and releases that do not.

use std::collections::BTreeMap;
use std::time::Duration;

use trustmsg::store::{DynStore, Inserted, NewMessage, ProducerRecord, Reschedule, VerifyLease};
use trustmsg_verify_api::MessageStatus;

use crate::store::harness::*;
use crate::store::producers::producer_record;

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
    let claimed = s
        .claim_due_verifies(100, lasting(lease))
        .await
        .unwrap()
        .messages;
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
    // The row as stored, but for the payload, which check-back never reads.
    let mut stored = s.find_message_by_id(m.id).await.unwrap().expect("stored");
    assert!(!stored.payload.is_empty());
    assert!(m.payload.is_empty(), "the claim read the payload");
    stored.payload.clear();
    assert_eq!(&stored, m);
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
    // Short, but longer than two claims take on a loaded machine: with
    // 300 ms, the sharded store's second claim came after the lease in a
    // full run and took the row back.
    let lease = Duration::from_secs(4);
    let first = s
        .claim_due_verifies(10, lasting(lease))
        .await
        .unwrap()
        .messages;
    assert_eq!(first.len(), 1);
    assert!(
        s.claim_due_verifies(10, lasting(lease))
            .await
            .unwrap()
            .messages
            .is_empty(),
        "a claimed row is not claimed again within its lease"
    );
    let again = claim_eventually(|| async {
        s.claim_due_verifies(10, lasting(LATER))
            .await
            .unwrap()
            .messages
    })
    .await;
    assert_reclaimed_after_the_lease(s, &before, &again, first[0].next_verify_at).await;
}

pub(crate) async fn a_check_back_claim_lasts_each_rows_producer_timeout_plus_the_margin(
    b: &Backend,
) {
    let s = b.store.as_ref();
    // Two producers with their own timeouts, one registered above the cap,
    // and BIZ, which is not registered.
    for (biz_id, timeout_ms) in [("fast", 2_000), ("mid", 7_500), ("slow", 90_000)] {
        s.upsert_producer(&ProducerRecord {
            verify_timeout_ms: timeout_ms,
            ..producer_record(biz_id)
        })
        .await
        .unwrap();
    }
    let mut want = BTreeMap::new();
    for (biz_id, key, secs) in [
        ("fast", "f-1", 7_000),
        ("mid", "m-1", 12_500),
        ("fast", "f-2", 7_000),
        ("slow", "s-1", 65_000),
        (BIZ, "u-1", 65_000),
    ] {
        let new = NewMessage {
            biz_id: biz_id.into(),
            ..new_message(key, Duration::ZERO)
        };
        let Inserted::Created(m) = s.insert_prepared(&new).await.unwrap() else {
            panic!("{key} not created");
        };
        want.insert(m.id, (key, chrono::Duration::milliseconds(secs)));
    }
    let lease = VerifyLease {
        margin: Duration::from_secs(5),
        max_timeout: Duration::from_secs(60),
    };
    // Someone holds a registration locked meanwhile: the claim neither waits
    // for it nor skips that producer's rows.
    let held = b.lock_producer("fast").await;
    let t0 = s.now().await.unwrap();
    let claimed = tokio::time::timeout(Duration::from_secs(5), s.claim_due_verifies(10, lease))
        .await
        .expect("the claim does not wait for a locked registration")
        .unwrap();
    let t1 = s.now().await.unwrap();
    drop(held);
    let at = claimed
        .claimed_at
        .expect("a claim that took rows says when");
    assert!(t0 <= at && at <= t1, "{at} vs {t0}..{t1}");
    assert_eq!(
        claimed.messages.iter().map(|m| m.id).collect::<Vec<_>>(),
        want.keys().copied().collect::<Vec<_>>(),
        "every due row is claimed"
    );
    for m in &claimed.messages {
        let (key, lasts) = want[&m.id];
        // The lease the verifier counts on (`next_verify_at` − `claimed_at`).
        // With shards each claims at its own clock and `claimed_at` is the
        // latest of them, so a row's lease as counted is never longer than
        // its own.
        let counted = m.next_verify_at.expect("leased") - at;
        if b.store.shards() == 1 {
            assert_eq!(
                counted, lasts,
                "{key}: its producer's timeout (at most the cap) plus the margin"
            );
        } else {
            assert!(
                counted <= lasts && counted > lasts - chrono::Duration::seconds(1),
                "{key}: {counted} counted of {lasts}"
            );
        }
        let mut stored = s.find_message_by_id(m.id).await.unwrap().expect("stored");
        assert!(!stored.payload.is_empty());
        // Check-back never looks at the payload, so its claim reads none.
        assert!(m.payload.is_empty(), "{key}: the claim read the payload");
        stored.payload.clear();
        assert_eq!(
            &stored, m,
            "{key}: the claimed message is the row as stored, without its payload"
        );
    }
}

pub(crate) async fn reschedule_verify_applies_only_to_a_prepared_row(s: &DynStore) {
    let s = s.as_ref();
    let delay = Duration::from_millis(10_250);
    let (before, _, ok) = apply_in_every_state(
        s,
        State::Prepared,
        "be rescheduled for check-back",
        move |id, version| async move {
            s.reschedule_verify(&Reschedule {
                id,
                version,
                error: "HTTP 503".into(),
                delay,
            })
            .await
            .unwrap()
        },
    )
    .await;
    assert!(ok);
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
        .reschedule_verify(&Reschedule {
            id: m.id,
            version: before.version,
            error: "HTTP 503".into(),
            delay
        })
        .await
        .unwrap());
}

pub(crate) async fn release_verifies_hands_claims_back_without_counting_an_attempt(s: &DynStore) {
    let s = s.as_ref();
    let delay = Duration::from_millis(1_500);
    // One row in each state, given back in one call: only the PREPARED one
    // matches.
    let rows = arrange_every_state(s).await;
    let claims = claims_of(&rows);
    assert_eq!(s.release_verifies(&claims, delay).await.unwrap(), 1);
    for (state, before, audit) in &rows {
        if *state != State::Prepared {
            assert_untouched(s, *state, before, *audit).await;
        }
    }
    let (_, before, _) = rows
        .iter()
        .find(|(st, _, _)| *st == State::Prepared)
        .unwrap();
    let before = before.as_ref().unwrap();
    assert_released(s, before, delay).await;

    // A batch of PREPARED rows, one of them with a stale claim: the others are
    // given back, the stale one is left as it is.
    let mut batch = Vec::new();
    for i in 0..5 {
        batch.push(prepare(s, &format!("release-{i}"), Due::Later).await);
    }
    let stale = batch[2].clone();
    let mut claims: Vec<(u64, u64)> = batch.iter().map(|m| (m.id, m.version)).collect();
    claims[2].1 = stale.version + 7;
    assert_eq!(s.release_verifies(&claims, delay).await.unwrap(), 4);
    for (i, m) in batch.iter().enumerate() {
        if i == 2 {
            let now = s.find_message_by_id(stale.id).await.unwrap().unwrap();
            assert_eq!(now, stale, "a stale claim matches nothing");
        } else {
            assert_released(s, m, delay).await;
        }
    }
    assert_eq!(
        s.release_verifies(&claims, delay).await.unwrap(),
        0,
        "claims given back once are stale"
    );
    assert_eq!(s.release_verifies(&[], delay).await.unwrap(), 0);
}

/// `before` was given back: same attempts and error, version bumped, due
/// within `delay` from now.
async fn assert_released(
    s: &dyn trustmsg::store::Store,
    before: &trustmsg::store::Message,
    delay: Duration,
) {
    let m = s.find_message_by_id(before.id).await.unwrap().unwrap();
    assert_eq!(m.status, MessageStatus::Prepared);
    assert_eq!(m.verify_attempts, before.verify_attempts, "not an attempt");
    assert_eq!(m.last_error, before.last_error);
    assert_eq!(m.version, before.version + 1);
    let now = s.now().await.unwrap();
    let due = m.next_verify_at.unwrap();
    let delay = chrono::Duration::from_std(delay).unwrap();
    assert!(
        due > now + delay - chrono::Duration::milliseconds(500) && due <= now + delay,
        "due {due} vs now {now}"
    );
}
