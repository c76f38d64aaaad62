//! Batches (the producer API's group commit): a batch has exactly the
//! outcomes its items would have had one by one.

use std::time::Duration;

use trustmsg::store::{
    self, Actor, DecideOutcome, DecideRequest, DynStore, Inserted, Message, NewMessage, Target,
    Transition,
};
use trustmsg_verify_api::{MessageStatus, SendStatus};

use crate::store::harness::*;

pub(crate) async fn a_prepare_batch_creates_each_new_key_once_and_returns_the_rows_already_there(
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

pub(crate) async fn a_prepare_batch_of_new_keys_returns_each_row_as_stored_in_request_order(
    s: &DynStore,
) {
    let s = s.as_ref();
    let keys = ["new-c", "new-a", "new-b"];
    let batch: Vec<NewMessage> = keys
        .iter()
        .map(|k| new_message(k, Duration::from_secs(30)))
        .collect();
    let results = s.insert_prepared_batch(&batch).await.unwrap();
    assert_eq!(results.len(), 3);
    for (key, result) in keys.iter().zip(&results) {
        let Inserted::Created(m) = result else {
            panic!("{key} was new: {result:?}")
        };
        assert_eq!(m.message_key, *key);
        let stored = s.find_message(BIZ, key).await.unwrap().unwrap();
        assert_eq!(
            *m, stored,
            "the returned row is the stored row, field by field"
        );
        assert_eq!(m.status, MessageStatus::Prepared);
        assert_eq!(m.version, stored.version);
        assert_eq!(
            m.next_verify_at,
            Some(m.created_at + chrono::Duration::seconds(30))
        );
    }
    let single = s
        .insert_prepared(&new_message("new-d", Duration::from_secs(30)))
        .await
        .unwrap();
    let Inserted::Created(m) = single else {
        panic!("new-d was new: {single:?}")
    };
    assert_eq!(m, s.find_message(BIZ, "new-d").await.unwrap().unwrap());
}

pub(crate) async fn a_transition_batch_applies_the_guards_that_hold_and_nothing_for_a_stale_one(
    s: &DynStore,
) {
    let s = s.as_ref();
    let rows = [
        prepare(s, "tb-1", Due::Later).await,
        prepare(s, "tb-2", Due::Later).await,
        prepare(s, "tb-3", Due::Later).await,
    ];
    let commit = |m: &Message, version: u64| Transition {
        version,
        ..batched_commit(m)
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

pub(crate) async fn a_transition_batch_of_rows_just_read_returns_each_row_as_stored(s: &DynStore) {
    let s = s.as_ref();
    let mut rows = Vec::new();
    for i in 0..8 {
        rows.push(prepare(s, &format!("seen-{i}"), Due::Now).await);
    }
    let to = |m: &Message, version: u64, to: MessageStatus| Transition {
        id: m.id,
        from: MessageStatus::Prepared,
        version,
        to,
        send_lease: Duration::from_millis(61_234),
        verify_attempt: to == MessageStatus::VerifyFailed,
        error: (to == MessageStatus::VerifyFailed).then(|| "no answer".to_string()),
        actor: producer(),
        reason: "batched".into(),
    };
    // Commits (a lease), VERIFY_FAILED (an error and an attempt), a batch
    // where one guard is stale (every transition then finds out alone), and
    // lone transitions, fresh and stale (a quiet service decides one at a
    // time). Each batch: the index of its first row, its transitions, and
    // which of them find a stale guard.
    let batches = [
        (
            0,
            vec![
                to(&rows[0], rows[0].version, MessageStatus::Committed),
                to(&rows[1], rows[1].version, MessageStatus::Committed),
            ],
            [false, false].as_slice(),
        ),
        (
            2,
            vec![
                to(&rows[2], rows[2].version, MessageStatus::VerifyFailed),
                to(&rows[3], rows[3].version, MessageStatus::VerifyFailed),
            ],
            &[false, false],
        ),
        (
            4,
            vec![
                to(&rows[4], rows[4].version, MessageStatus::RolledBack),
                to(&rows[5], rows[5].version + 1, MessageStatus::RolledBack),
            ],
            &[false, true],
        ),
        (
            6,
            vec![to(&rows[6], rows[6].version, MessageStatus::Committed)],
            &[false],
        ),
        (
            7,
            vec![to(&rows[7], rows[7].version + 1, MessageStatus::Committed)],
            &[true],
        ),
    ];
    for (first, ts, stale) in &batches {
        let seen: Vec<&Message> = rows[*first..first + ts.len()].iter().collect();
        let results = s.transition_batch_seen(ts, &seen).await.unwrap();
        assert_eq!(results.len(), ts.len());
        for (i, (t, result)) in ts.iter().zip(&results).enumerate() {
            let stored = s.find_message_by_id(t.id).await.unwrap().unwrap();
            assert_eq!(result.is_none(), stale[i], "transition of row {}", t.id);
            match result {
                Some(m) => {
                    assert_eq!(m, &stored, "the result is the row as stored");
                    assert_eq!(m.status, t.to);
                    assert_eq!(audit_lines(s, m.id).await.len(), 1);
                }
                None => {
                    assert_eq!(&stored, seen[i], "a stale guard changes nothing");
                    assert!(audit_lines(s, t.id).await.is_empty());
                }
            }
        }
    }
}

pub(crate) async fn a_decision_batch_has_the_outcomes_of_deciding_one_by_one(s: &DynStore) {
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
    let reqs = [
        batched("db-commit", true),
        batched("db-rollback", false),
        batched("db-committed", true),
        batched("db-committed2", false),
        batched("db-missing", true),
        batched("db-tombstone", false),
        batched("db-commit", true),
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

/// Rows the caller already holds (its own prepares) are not read again, and a
/// held row that changed since (claimed by the verifier, decided elsewhere)
/// gets the outcome it would have had if read: its stale version loses the
/// guard and the request is decided by reading the row.
pub(crate) async fn a_decision_batch_with_rows_held_has_the_outcomes_of_reading_them(s: &DynStore) {
    let s = s.as_ref();
    let fresh = prepare(s, "held-fresh", Due::Later).await;
    let claimed = prepare(s, "held-claimed", Due::Now).await;
    let elsewhere = prepare(s, "held-decided", Due::Later).await;
    let unheld = prepare(s, "held-none", Due::Later).await;
    // Changed behind the holder's back: a verifier claim bumps the version,
    // and another instance's commit decides the row.
    let claim = s
        .claim_due_verifies(10, lasting(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(
        claim.messages.iter().map(|m| m.id).collect::<Vec<_>>(),
        [claimed.id]
    );
    decided(decide_key(s, "held-decided", true, producer(), Duration::ZERO).await);
    let reqs = [
        batched("held-fresh", true),
        batched("held-claimed", true),
        batched("held-decided", false),
        batched("held-none", false),
    ];
    let known = [Some(&fresh), Some(&claimed), Some(&elsewhere), None];
    let outcomes = store::decide_batch_known(s, &reqs, &known).await.unwrap();
    for (i, (outcome, want)) in outcomes
        .iter()
        .zip([
            "decided COMMITTED",
            "decided COMMITTED",
            "conflict COMMITTED",
            "decided ROLLED_BACK",
        ])
        .enumerate()
    {
        let (name, row) = match outcome {
            DecideOutcome::Decided(m) => (format!("decided {}", m.status.as_str()), m),
            DecideOutcome::AlreadyDecided(m) => (format!("already {}", m.status.as_str()), m),
            DecideOutcome::Conflict(m) => (format!("conflict {}", m.status.as_str()), m),
            DecideOutcome::NotFound => panic!("request {i} found no row"),
        };
        assert_eq!(name, want, "request {i}");
        let stored = s.find_message_by_id(row.id).await.unwrap().unwrap();
        assert_eq!(
            row, &stored,
            "request {i}: the outcome carries the row as stored"
        );
        assert_eq!(
            audit_lines(s, row.id).await.len(),
            1,
            "request {i}: decided once, audited once"
        );
    }
    let claimed_now = s.find_message_by_id(claimed.id).await.unwrap().unwrap();
    assert_eq!(
        claimed_now.version,
        claimed.version + 2,
        "the claim's version, then the commit's"
    );
    assert_eq!(claimed_now.send_status, Some(SendStatus::Pending));
    let unheld_now = s.find_message_by_id(unheld.id).await.unwrap().unwrap();
    assert_eq!(unheld_now.version, unheld.version + 1);
}

/// A producer's decision on `key`, as the API's batcher makes it.
fn batched(key: &'static str, commit: bool) -> DecideRequest<'static> {
    DecideRequest {
        target: Target::Key {
            biz_id: BIZ,
            message_key: key,
        },
        commit,
        actor: producer(),
        reason: "batched".into(),
        send_lease: Duration::from_secs(60),
        verify_attempt: false,
    }
}

/// Two prepare batches of the same new keys at once, in opposite orders
/// (two instances taking the same producer's retries): each waits for the
/// other's uncommitted keys, which a database may break as a deadlock.
/// Whatever it does, both batches succeed and every key is created exactly
/// once: one batch is told Created, the other Existing, of the same row.
pub(crate) async fn concurrent_prepare_batches_of_the_same_keys_in_opposite_orders_create_each_once(
    s: &DynStore,
) {
    for round in 0..3 {
        let keys: Vec<String> = (0..100).map(|i| format!("race-{round}-{i}")).collect();
        let forward: Vec<NewMessage> = keys
            .iter()
            .map(|k| new_message(k, Duration::from_secs(30)))
            .collect();
        let backward: Vec<NewMessage> = forward.iter().rev().cloned().collect();
        let (a, b) = tokio::join!(
            s.insert_prepared_batch(&forward),
            s.insert_prepared_batch(&backward)
        );
        let (a, mut b) = (a.unwrap(), b.unwrap());
        b.reverse();
        for ((key, a), b) in keys.iter().zip(&a).zip(&b) {
            match (a, b) {
                (Inserted::Created(x), Inserted::Existing(y))
                | (Inserted::Existing(x), Inserted::Created(y)) => {
                    assert_eq!(x.id, y.id, "{key}: one row");
                    assert_eq!(&x.message_key, key);
                }
                _ => panic!("{key}: created once and found once, not {a:?} and {b:?}"),
            }
        }
    }
}

/// A batch mixing transitions to several states (commits, a rollback, a
/// VERIFY_FAILED with its error and attempt, a stale guard) leaves each row
/// as the same transition alone leaves its twin.
pub(crate) async fn a_mixed_transition_batch_changes_each_row_as_its_transition_alone_does(
    s: &DynStore,
) {
    let s = s.as_ref();
    let changes = [
        (MessageStatus::Committed, 0),
        (MessageStatus::RolledBack, 0),
        (MessageStatus::VerifyFailed, 0),
        (MessageStatus::Committed, 3),
        (MessageStatus::Committed, 0),
        (MessageStatus::RolledBack, 0),
    ];
    let to = |m: &Message, (to, stale): (MessageStatus, u64)| Transition {
        id: m.id,
        from: MessageStatus::Prepared,
        version: m.version + stale,
        to,
        send_lease: Duration::from_secs(60),
        verify_attempt: to == MessageStatus::VerifyFailed,
        error: (to == MessageStatus::VerifyFailed).then(|| "no answer".to_string()),
        actor: Actor::Verifier,
        reason: "mixed".into(),
    };
    let mut batched = Vec::new();
    let mut alone = Vec::new();
    for i in 0..changes.len() {
        batched.push(prepare(s, &format!("mixed-batch-{i}"), Due::Later).await);
        alone.push(prepare(s, &format!("mixed-alone-{i}"), Due::Later).await);
    }
    let ts: Vec<Transition> = batched.iter().zip(changes).map(|(m, c)| to(m, c)).collect();
    let results = s.transition_batch(&ts).await.unwrap();
    assert_eq!(results.len(), ts.len());
    // What a row's transition made of it, whatever its id, key and times.
    let outcome = |m: &Message| {
        (
            m.status,
            m.send_status,
            m.version,
            m.verify_attempts,
            m.last_error.clone(),
            m.next_send_at.is_some(),
            m.decided_at.is_some(),
        )
    };
    for (i, ((m, twin), change)) in batched.iter().zip(&alone).zip(changes).enumerate() {
        let one = s.transition(&to(twin, change)).await.unwrap();
        assert_eq!(results[i].is_some(), one.is_some(), "transition {i}");
        let stored = s.find_message_by_id(m.id).await.unwrap().unwrap();
        if let Some(r) = &results[i] {
            assert_eq!(
                r, &stored,
                "transition {i}: the result is the row as stored"
            );
        }
        let twin_now = s.find_message_by_id(twin.id).await.unwrap().unwrap();
        assert_eq!(outcome(&stored), outcome(&twin_now), "transition {i}");
        assert_eq!(
            audit_lines(s, m.id).await.len(),
            audit_lines(s, twin.id).await.len(),
            "transition {i}: audited as alone"
        );
    }
    assert_eq!(
        results
            .iter()
            .map(|r| r.as_ref().map(|m| m.status))
            .collect::<Vec<_>>(),
        [
            Some(MessageStatus::Committed),
            Some(MessageStatus::RolledBack),
            Some(MessageStatus::VerifyFailed),
            None,
            Some(MessageStatus::Committed),
            Some(MessageStatus::RolledBack),
        ]
    );
}
